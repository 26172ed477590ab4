#pragma once

// A chaos/soak harness for redsem, shared by the chaos ctest and the redsem-soak program.
//
// Many client processes (half `redsem run ... -- sh -c BODY`, half `redsem acquire` / BODY /
// `redsem release` in /bin/sh, half of them under libfaketime with a skewed wall clock) cycle
// through semaphores of small limits, while the harness SIGKILLs clients, SIGSTOPs waiters,
// holders and `redsem run` supervisors past their lease, pauses and kills Redis connections
// and restarts Redis with and without its data. An observer that does not trust redsem then
// checks, from what the clients' commands logged with the machine's real clock:
//
//   - safety: never more holders inside a semaphore than its limit, never two inside on one
//     slot, and for each slot the fences grow with the entry times;
//   - liveness: every client that was not SIGKILLed finished, with a documented outcome;
//   - hygiene: after the leases ran out and a gc, no key of a semaphore is left.
//
// The verdict is always computed and printed, also when something failed on the way.

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

namespace redsem::test::chaos {

using Milliseconds = std::chrono::milliseconds;

struct SemaphoreSpec {
    std::string name;
    int limit = 1;
    // Its clients connect as an ACL user without @dangerous (no INFO: lost data is noticed
    // by the script cache, see lua/lib/epoch.lua), under a prefix of its own, k_no_info_prefix.
    bool without_info = false;
};

inline constexpr const char* k_no_info_prefix = "lp";

struct Config {
    int clients = 66;               // client processes running at once
    Milliseconds duration{25'000};  // the chaos phase: spawning, killing, pausing
    Milliseconds ttl{1'000};        // every client's lease
    Milliseconds loss_grace{3'000}; // --loss-grace of every client (2-3x the ttl)
    std::vector<SemaphoreSpec> semaphores{{"c1", 1}, {"c3", 3, true}, {"c10", 10}};
    std::uint64_t seed = 20261122;
    bool skew = true;   // half the clients under libfaketime (if installed)
    std::string redsem; // the binary; empty: the one built with the tests

    // Holds: `redsem run` clients hold for long_hold_min..long_hold_max with probability
    // long_hold_share (so their heartbeat renews several times), else short_hold_min..max.
    // `acquire` clients do not renew: they always hold short, and never above a quarter of
    // the ttl.
    double long_hold_share = 0.35;
    Milliseconds short_hold_min{10};
    Milliseconds short_hold_max{80};
    Milliseconds long_hold_min{1'000};
    Milliseconds long_hold_max{3'000};
    // Share of the short holds with no sleep at all: the command logs its entry and its exit
    // at once (each stamp is a process of its own, so it still spans a few milliseconds).
    double zero_hold_share = 0;

    // Mean time between actions of each kind (0: never). Each is bounded: at most
    // max_paused clients are stopped at once, a stop lasts pause_min..pause_max.
    Milliseconds kill_every{300};               // SIGKILL a random client (redsem or its shell)
    Milliseconds waiter_pause_every{1'500};     // SIGSTOP a waiter
    Milliseconds holder_pause_every{1'500};     // SIGSTOP a holder's whole process tree
    Milliseconds supervisor_pause_every{2'000}; // SIGSTOP `redsem run` alone, not its command
    Milliseconds client_pause_every{7'000};     // CLIENT PAUSE client_pause ALL
    Milliseconds client_pause{1'500};
    Milliseconds client_kill_every{5'000}; // CLIENT KILL TYPE normal
    // Eviction: maxmemory lowered to just above what is used, with volatile-lru, and cache
    // entries with a TTL written (in database 15) until Redis evicted some; then all undone.
    Milliseconds eviction_every{6'000};
    int max_paused = 6;
    Milliseconds pause_min{1'500};
    Milliseconds pause_max{3'000};
    // Redis restarts, spread evenly over the chaos phase (never two at once, never during a
    // CLIENT PAUSE). Kinds cycle: kept (AOF, fsync always), wiped (AOF off and deleted: an
    // empty Redis), rolled back (AOF off for rollback_window before the restart: Redis comes
    // back without the writes of that window), failed back (no restart: a standby replica is
    // promoted, the master takes writes for rollback_window, then becomes the standby's
    // replica, which rolls it back, and is promoted again: the same process, a new
    // replication history; while it is a replica, clients get READONLY).
    int restarts = 3;
    Milliseconds rollback_window{500};

    Milliseconds survivor_grace{90'000}; // after the chaos phase, for every survivor to finish
    Milliseconds progress_every{0};      // a progress line this often (0: none)
    std::ostream* out = nullptr;         // progress, violations, failures; nullptr: std::cout
    bool keep_files_on_failure = true;   // keep the log directory when the verdict is bad
};

struct Violation {
    std::string kind; // "overlap", "slot", "fence", "malformed"
    std::string text; // with the log lines involved
};

struct Result {
    double seconds = 0; // the chaos phase
    int clients_started = 0;
    int cycles_completed = 0; // entered and left (S and E logged)
    int cycles_skewed = 0;    // of those, under a skewed clock
    int long_holds_completed = 0;
    int clients_skewed = 0;

    std::map<int, int> exits;  // by exit code (128+N for death by signal N), all clients
    int exit_ok = 0;           // survivors: 0
    int exit_fenced = 0;       // survivors: 76, the lease was lost and the command stopped
    int exit_release_lost = 0; // survivors of the acquire form: release said the lease was gone (1)
    int exit_refused_at_restart = 0;  // survivors started while Redis restarted: 69 at once
    int exit_unanswered_in_pause = 0; // survivors: 69, Redis paused past their patience
    int exit_oom_in_eviction = 0;     // survivors: 69, OOM while Redis was full (an eviction)
    int exit_readonly_in_failback = 0; // survivors: 69, READONLY while the master was a replica
    int exit_75 = 0;                  // survivors: 75 (no slot in time: never asked for)
    int exit_other = 0;               // survivors: anything else (a failure)

    int sigkills = 0;
    std::map<std::string, int> sigkill_targets; // "redsem run", "command", "shell", "redsem"
    int pauses_waiter = 0;
    int pauses_holder = 0;       // whole process tree of a holder
    int pauses_supervisor = 0;   // `redsem run` alone
    int pauses_reclassified = 0; // chosen as waiters, found holding once stopped
    int client_pauses = 0;       // CLIENT PAUSE
    int client_kill_rounds = 0;  // CLIENT KILL TYPE normal
    int evictions = 0;           // eviction rounds (Config::eviction_every)
    long long evicted_keys = 0;  // keys Redis evicted in them
    long long connections_killed = 0;
    int restarts_kept = 0;        // with persistence
    int restarts_wiped = 0;       // without: empty
    int restarts_rolled_back = 0; // without: the latest writes lost
    int failbacks = 0;            // the same process, rolled back by a replica it followed
    int harness_errors = 0;       // actions that failed (printed)

    std::map<std::string, int> max_inside; // by semaphore (overlap intervals)
    int silent_ends = 0;                   // entered, then died without logging E or T
    int silent_ends_seen = 0;     // of those, `redsem run` commands whose death was seen (pidfd)
    int late_entries = 0;         // stopped holding a grant before logging S (fencing-only)
    int late_entries_refused = 0; // of those, behind a newer fence on their slot
    int overlap_violations = 0;
    int slot_violations = 0;
    int fence_violations = 0;
    int malformed_lines = 0;
    std::vector<Violation> violations;

    int survivors = 0;                 // clients not SIGKILLed by the harness
    int survivors_failed = 0;          // finished with another code, or without their log lines
    int survivors_hung = 0;            // not finished within the grace (killed then)
    std::vector<std::string> failures; // one line each

    int keys_left = 0; // redsem:{...} keys after the leases ran out and gc
    std::string keys_left_names;
    bool gc_ok = true;
    std::string directory; // where the log is (kept when the verdict is bad)

    bool safe() const {
        return overlap_violations == 0 && slot_violations == 0 && fence_violations == 0 &&
               malformed_lines == 0;
    }
    bool live() const { return survivors_failed == 0 && survivors_hung == 0; }
    bool clean() const { return keys_left == 0 && gc_ok; }
    // One line: the figures and the verdict.
    std::string summary() const;
};

// Runs the whole thing against a redis-server of its own (AOF on, fsync always), and returns
// the figures. Never throws for what the chaos does; throws only when it cannot start.
Result run(const Config& config);

} // namespace redsem::test::chaos

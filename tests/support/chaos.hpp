#pragma once

// A chaos/soak harness for redsem, shared by the chaos ctest and the redsem-soak program.
//
// Many client processes (half `redsem run ... -- sh -c BODY`, half `redsem acquire` / BODY /
// `redsem release` in /bin/sh, half of them under libfaketime with a skewed wall clock, a
// share of them running the previous release's binary, and now and then one that takes
// several slots) cycle through semaphores of small limits, while the harness applies the
// faults of k_faults (below) to the clients and to Redis. An observer that does not trust
// redsem then checks, from what the clients' commands logged with the machine's real clock:
//
//   - safety: never more slots held inside a semaphore than its limit (a holder of
//     `--slots K` counts K), never two inside on one slot, and for each slot the fences grow
//     with the entry times;
//   - liveness: every client that was not SIGKILLed finished, with an outcome that the rule
//     of one fault in k_faults explains (or 0);
//   - hygiene: after the leases ran out and a gc, no key of a semaphore is left.
//
// The verdict is always computed and printed, also when something failed on the way.

#include <array>
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
    // The previous release cannot run without INFO: its clients use the other semaphores.
    bool without_info = false;
    // Clients of several slots (Fault::weighted) come to it: while one holds or waits, and
    // until the semaphore is next idle, older clients are refused, so they are kept apart from
    // the other semaphores (on a busy one that is never idle, it would be for good).
    bool weighted = false;
};

inline constexpr const char* k_no_info_prefix = "lp";

struct Config {
    int clients = 66;               // client processes running at once
    Milliseconds duration{25'000};  // the chaos phase: spawning, killing, pausing
    Milliseconds ttl{1'000};        // every client's lease
    Milliseconds loss_grace{3'000}; // --loss-grace of every client (2-3x the ttl)
    std::vector<SemaphoreSpec> semaphores{
        {"c1", 1}, {"c3", 3, true}, {"c5", 5, false, true}, {"c10", 10}};
    std::uint64_t seed = 20261122;
    bool skew = true;   // half the clients under libfaketime (if installed)
    std::string redsem; // the binary; empty: the one built with the tests

    // The previous release (0.1.0) in the fleet: this share of the clients of semaphores with
    // INFO run its binary instead, on the same semaphores, in both forms. Empty
    // `older_redsem`: redsem_previous_binary() (support/build_paths.hpp); when that file is
    // missing (no git history), no client runs it and Result::older_release stays empty.
    double older_share = 1.0 / 6;
    std::string older_redsem;

    // Holds: `redsem run` clients hold for long_hold_min..long_hold_max with probability
    // long_hold_share (so their heartbeat renews several times), else short_hold_min..max.
    // `acquire` clients do not renew: they always hold short, and never above a quarter of
    // the ttl.
    double long_hold_share = 0.35;
    Milliseconds short_hold_min{10};
    Milliseconds short_hold_max{80};
    Milliseconds long_hold_min{1'000};
    Milliseconds long_hold_max{3'000};
    // Shares of this release's `run` clients that give --supersede (newest wins: a newer one
    // takes its place, and it exits 80 holding nothing), and of its long holds stopped by
    // --max-run half-way (exit 124, the command's group stopped before the slot goes on).
    double supersede_share = 0.1;
    double max_run_share = 0.3;
    // Share of the short holds with no sleep at all: the command logs its entry and its exit
    // at once (each stamp is a process of its own, so it still spans a few milliseconds).
    double zero_hold_share = 0;

    // Mean time between rounds of each fault of k_faults (0: never); each round comes after
    // 0.5..1.5 times it. What each fault does: k_faults.
    Milliseconds kill_every{300};
    Milliseconds waiter_pause_every{1'500};
    Milliseconds holder_pause_every{1'500};
    Milliseconds supervisor_pause_every{2'000};
    Milliseconds weighted_every{6'000};
    Milliseconds client_pause_every{7'000};
    Milliseconds client_kill_every{5'000};
    Milliseconds eviction_every{6'000};
    Milliseconds eviction_flip_every{9'000};
    Milliseconds pause_every{8'000};
    Milliseconds older_gc_every{4'000};
    Milliseconds older_limit_every{6'000};

    // Bounds of the faults' rounds.
    int max_paused = 6;            // SIGSTOPs: at most this many clients stopped at once,
    Milliseconds pause_min{1'500}; // each for pause_min..pause_max
    Milliseconds pause_max{3'000};
    Milliseconds client_pause{1'500};    // length of a CLIENT PAUSE
    int weighted_slots = 2;              // `run --slots K` of a weighted client
    Milliseconds semaphore_pause{1'500}; // from `redsem pause` to `redsem resume`
    int flip_evictions = 64;             // an eviction flip writes until Redis evicted this many
    Milliseconds flip_max{2'000};        // or this long has passed
    Milliseconds flip_older_wait{1'000}; // for older clients to enter or end before a flip
    // Redis restarts, spread evenly over the chaos phase (never two at once, never during a
    // CLIENT PAUSE), their kinds in turn: kept, wiped, rolled back, failed back (k_faults).
    int restarts = 3;
    Milliseconds rollback_window{500};

    Milliseconds survivor_grace{90'000}; // after the chaos phase, for every survivor to finish
    Milliseconds progress_every{0};      // a progress line this often (0: none)
    std::ostream* out = nullptr;         // progress, violations, failures; nullptr: std::cout
    bool keep_files_on_failure = true;   // keep the log directory when the verdict is bad
};

// ---- The faults: one written list --------------------------------------------------------
//
// Every fault the harness applies is one entry of k_faults: its name, how often (a member of
// Config, or one of Config::restarts), whether it acts on the client processes or on Redis,
// what it does to Redis and to the clients, and which exits of surviving clients it explains.
// A survivor's exit that no entry explains (nor 0 after its command ran) is a failure.
// chaos.cpp holds, for each entry, its action (a case of Harness::act_on_clients() or
// act_on_redis(), which the loops schedule from this list) and the rules that explain exits by
// its windows (exit_rules()); docs/TESTING.md mirrors this list. A new kind of fault is one
// more entry here (and its mean interval in Config), its action, and its exit rules if it
// explains any.

enum class Fault {
    sigkill,
    stop_waiter,
    stop_holder,
    stop_supervisor,
    weighted,
    client_pause,
    client_kill,
    eviction,
    eviction_flip,
    pause,
    older_gc,
    older_limit,
    restart_kept,
    restart_wiped,
    restart_rolled_back,
    failback,
};

enum class FaultSide {
    clients, // done by the loop that spawns and reaps the clients
    redis,   // done by the thread that acts on Redis, one round at a time
};

struct FaultEntry {
    Fault fault;
    const char* name;            // as summary() prints it
    Milliseconds Config::*every; // its mean interval; nullptr: one of Config::restarts
    FaultSide side;
    const char* to_redis;
    const char* to_clients;
    const char* explains; // exits of surviving clients (any exit of a SIGKILLed one counts)
};

inline constexpr std::array<FaultEntry, 16> k_faults{{
    {Fault::sigkill, "SIGKILL", &Config::kill_every, FaultSide::clients,
     "nothing at once: the killed redsem's connection closes, its lease stays until it runs "
     "out, its place in the queue until it stops refreshing",
     "a random client's redsem (run, acquire or release) or its command or shell is "
     "SIGKILLed; a command dies with its run",
     "any exit of that client: it is not a survivor"},
    {Fault::stop_waiter, "SIGSTOP waiter", &Config::waiter_pause_every, FaultSide::clients,
     "its place in the queue lapses (it stops refreshing); a slot handed to it meanwhile goes "
     "on uncollected",
     "a waiting client is stopped for pause_min..pause_max, then continued; one found "
     "holding once stopped counts as a stopped holder",
     "nothing: it queues again and finishes"},
    {Fault::stop_holder, "SIGSTOP holder", &Config::holder_pause_every, FaultSide::clients,
     "the holder's lease runs out and its slot goes on",
     "a holder's whole process tree is stopped past its lease; from the stop on it counts as "
     "fencing-only",
     "76 (run: its lease found gone), 1 (acquire form: release finds no lease)"},
    {Fault::stop_supervisor, "SIGSTOP supervisor", &Config::supervisor_pause_every,
     FaultSide::clients, "the lease runs out and the slot goes on",
     "`redsem run` alone is stopped while its command runs on (fencing-only from the stop)", "76"},
    {Fault::weighted, "weighted", &Config::weighted_every, FaultSide::clients,
     "the stored limit reads \"N weighted\" until the semaphore is next idle",
     "one more client of this release, `run --slots weighted_slots`, on a semaphore marked "
     "weighted (limit >= 3; it counts weighted_slots toward the limit); older clients are "
     "refused while the mark stands",
     "older clients: 65 (\"the stored limit ... is not a number\") while marked weighted"},
    {Fault::client_pause, "CLIENT PAUSE", &Config::client_pause_every, FaultSide::redis,
     "CLIENT PAUSE client_pause ALL: Redis answers nobody meanwhile (no other fault either)",
     "every call stalls; heartbeats miss renewals, run stops a command whose lease may be gone",
     "69 (\"did not answer\") of a client alive then, ending within 10s of its end; 76"},
    {Fault::client_kill, "CLIENT KILL", &Config::client_kill_every, FaultSide::redis,
     "CLIENT KILL TYPE normal: every client connection is cut",
     "calls reconnect and retry (the same token: the same lease)", "nothing"},
    {Fault::eviction, "eviction", &Config::eviction_every, FaultSide::redis,
     "maxmemory lowered to 4 MB above what is used, volatile-lru, and cache entries with a TTL "
     "written (database 15) until Redis evicted some; then flushed and maxmemory 0. The keys "
     "of semaphores in use that have a TTL as it begins (evictable) are printed and counted",
     "keys in use have no TTL and are spared; this release counts keys evicted after a CONFIG "
     "SET as a possible loss: admission closes for the loss grace (waiters wait)",
     "69 (\"out of memory\") while Redis was full"},
    {Fault::eviction_flip, "eviction flip", &Config::eviction_flip_every, FaultSide::redis,
     "maxmemory lowered to 1 MB above what is used, maxmemory-policy allkeys-lru, and keys "
     "without a TTL written (database 15) until Redis evicted flip_evictions keys or flip_max "
     "passed: any key may go, the semaphores' too; then volatile-lru again, FLUSHDB of "
     "database 15, maxmemory 0. For the prefix without INFO, which cannot see a policy, the "
     "harness runs `redsem lost` before and after, as the README tells an operator to",
     "this release refuses to admit while allkeys-* is set (69 EVICTING) and keeps admission "
     "closed for the loss grace after; a semaphore whose state hash went refuses (65) until "
     "its holders leave; a holder whose lease went: run stops its command (76), release finds "
     "no lease (1). Older clients see no policy (NEWS): none starts from the flip's start until "
     "a call of this release has recorded the loss, counting every key it evicted (or the "
     "loss grace after it); a "
     "flip waits up to flip_older_wait for those waiting to enter or end, and if some still "
     "wait, runs `redsem lost` for them too, as NEWS tells",
     "69 (EVICTING, or \"out of memory\" before database 15 is flushed) during it; 65 (\"state "
     "key ... is gone\") until long_hold_max + 2 ttl + 1s after it; 76; 1"},
    {Fault::pause, "redsem pause", &Config::pause_every, FaultSide::redis,
     "this release's `redsem pause NAME --for` (the stored limit reads \"N paused\", the queue "
     "holds a mark), then `redsem resume NAME` semaphore_pause later",
     "this release's newcomers and waiters wait; holders keep their slots; older clients are "
     "refused while the mark stands",
     "older clients: 65 (\"the stored limit ... is not a number\") while marked paused"},
    {Fault::older_gc, "older gc", &Config::older_gc_every, FaultSide::redis,
     "the previous release's `redsem gc`: expired holders and dead waiters removed by its "
     "rules (it cannot free the slots of a holder of several), empty semaphores deleted",
     "nothing they may notice", "nothing"},
    {Fault::older_limit, "older limit", &Config::older_limit_every, FaultSide::redis,
     "the previous release's `redsem limit NAME N`, N the spec's, on a semaphore older clients "
     "use: over a \"paused\" mark it writes a plain number, which this release marks again. "
     "Never while a weighted client of the harness may hold there (NEWS: an older limit "
     "over the weighted mark lets older clients count a holder of K slots as one)",
     "nothing they may notice", "nothing"},
    {Fault::restart_kept, "restart (kept)", nullptr, FaultSide::redis,
     "SIGTERM and a restart with the AOF (fsync always): the data kept, a new process",
     "connections break and are made again; admission closes for the loss grace",
     "69 (\"cannot connect\") of a client whose first contact came while Redis was down"},
    {Fault::restart_wiped, "restart (wiped)", nullptr, FaultSide::redis,
     "the AOF turned off and deleted, then a restart: an empty Redis",
     "every lease and place is gone; admission closes for the loss grace",
     "69 (\"cannot connect\") at first contact; 76; 1"},
    {Fault::restart_rolled_back, "restart (rolled back)", nullptr, FaultSide::redis,
     "the AOF turned off for rollback_window, then a restart: the writes of that window lost",
     "leases and grants of that window are gone; admission closes for the loss grace",
     "69 (\"cannot connect\") at first contact; 76; 1"},
    {Fault::failback, "failback", nullptr, FaultSide::redis,
     "a standby replica is promoted (one call without INFO reaches it), the master takes "
     "writes for rollback_window, then follows the standby (losing them) and is promoted "
     "again: the same process, a new replication history",
     "READONLY while the master is a replica; admission closes for the loss grace",
     "69 (\"read-only replica\") during it; 76; 1"},
}};

// The entry of `fault`.
const FaultEntry& entry_of(Fault fault);

struct Violation {
    std::string kind; // "overlap", "slot", "fence", "malformed"
    std::string text; // with the log lines involved
};

struct Result {
    double seconds = 0; // the chaos phase
    int clients_started = 0;
    int clients_skewed = 0;
    int clients_older = 0;       // running the previous release
    int clients_weighted = 0;    // `run --slots K`
    int clients_superseding = 0; // `run --supersede`
    int clients_deadline = 0;    // `run --max-run`, shorter than their hold
    int cycles_completed = 0;    // entered and left (S and E logged)
    int cycles_skewed = 0;       // of those, under a skewed clock
    int cycles_older = 0;        // of those, of the previous release
    int cycles_weighted = 0;     // of those, of several slots
    int long_holds_completed = 0;
    std::string older_release; // the previous release's binary, empty when none ran

    // Survivors' exits. Each counter but the last two is one rule of exit_rules() (chaos.cpp),
    // which summary() prints in that order, each explained by a fault of k_faults.
    std::map<int, int> exits;           // by exit code (128+N for death by signal N), all clients
    int exit_ok = 0;                    // 0, having logged S and E
    int exit_fenced = 0;                // 76, the lease was lost and the command stopped
    int exit_release_lost = 0;          // 1 of the acquire form: release said the lease was gone
    int exit_refused_at_restart = 0;    // 69 at first contact while Redis restarted
    int exit_unanswered_in_pause = 0;   // 69, Redis paused past their patience
    int exit_oom_in_eviction = 0;       // 69, OOM while Redis was full (an eviction or a flip)
    int exit_readonly_in_failback = 0;  // 69, READONLY while the master was a replica
    int exit_evicting_in_flip = 0;      // 69, EVICTING: allkeys-* in force
    int exit_state_gone_after_flip = 0; // 65, holders without a state hash after a flip
    int older_refused_paused = 0;       // older clients: 65 on a semaphore marked paused
    int older_refused_weighted = 0;     // older clients: 65 on a semaphore marked weighted
    int exit_superseded = 0;            // 80 of a client with --supersede, which never held
    int exit_max_run = 0;               // 124 of a client with --max-run, stopped after entering
    int exit_75 = 0;                    // 75 (no slot in time: never asked for): a failure
    int exit_other = 0;                 // anything else: a failure

    // What the faults did: rounds of each (SIGSTOPs by what the stopped client turned out to
    // be), and some figures of theirs.
    std::map<Fault, int> rounds;
    int rounds_of(Fault fault) const;
    std::map<std::string, int> sigkill_targets; // "redsem run", "command", "shell", "redsem"
    int pauses_reclassified = 0;                // chosen as waiters, found holding once stopped
    long long connections_killed = 0;           // by CLIENT KILL
    long long evicted_keys = 0;                 // by Redis in eviction rounds
    // Keys of a semaphore in use (somebody holds or waits) that had a TTL as an eviction round
    // began: volatile-lru may evict them (printed with their names).
    int evictable_in_use = 0;
    long long flip_evicted_keys = 0; // by Redis in eviction flips
    int flip_states_lost = 0;        // state hashes and epoch keys gone in flips
    int older_limits_skipped = 0;    // older limit rounds left out: a weighted client there
    int flips_declared = 0;          // eviction flips declared (redsem lost) for older waiters
    int older_commands_failed = 0;   // older gc or limit rounds that did not exit 0 (printed)
    int harness_errors = 0;          // actions that failed (printed)

    std::map<std::string, int> max_inside; // by semaphore: most slots held at once
    int silent_ends = 0;                   // entered, then died without logging E or T
    int silent_ends_seen = 0;     // of those, `redsem run` commands whose death was seen (pidfd)
    int late_entries = 0;         // stopped holding a grant before logging S (fencing-only)
    int late_entries_refused = 0; // of those, behind a newer fence on their slot
    // Bare acquire scripts still inside a ttl after they logged their entry (starved):
    // their time past it is not counted as inside (only fencing protects it).
    int outstayed_leases = 0;
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

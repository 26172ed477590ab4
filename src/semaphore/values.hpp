#pragma once

// The values redsem and its scripts exchange (see wire.hpp), and the options of an acquire.

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "semaphore/protocol.hpp"
#include "util/boot_clock.hpp"
#include "util/duration.hpp"

namespace redsem {

inline constexpr long long k_min_limit = 1;
inline constexpr Milliseconds k_default_ttl{k_default_ttl_ms};
inline constexpr Milliseconds k_min_ttl{100};
// After Redis may have lost data, nobody new is admitted for the loss grace (protocol.hpp).
inline constexpr Milliseconds k_default_loss_grace{k_loss_grace_ms};
// A queued waiter at the head that has not refreshed its place for this long is dropped from
// the queue, so a waiter killed with SIGKILL stops blocking the ones behind it within this
// time. Further back, waiters refresh less often and get as much longer (lua/acquire.lua).
inline constexpr Milliseconds k_waiter_liveness{k_waiter_liveness_ms};
// How often a queued waiter at the head refreshes its place; well inside k_waiter_liveness.
inline constexpr Milliseconds k_waiter_refresh{1'500};
// A label longer than this is cut, to keep holder metadata small.
inline constexpr std::size_t k_max_label_bytes = 1024;
// How many events a semaphore's history (redsem log) keeps at most (k_default_history: by
// default).
inline constexpr long long k_max_history = 10'000'000;

// Who holds or waits for a slot, shown by `status`.
// The CI job a holder runs in (see process/ci_job.hpp): its system ("github", "gitlab", ...),
// where a person can open it, and the names of its pipeline and job, each possibly empty.
struct CiJob {
    std::string system;
    std::string url;
    std::string pipeline;
    std::string job;
};

struct HolderMeta {
    std::string host;
    long long pid = 0;  // the process that owns the slot
    std::string pid_of; // what that is: "run", "caller" (of acquire) or "while-pid"
    std::string user;
    std::string label;
    std::optional<CiJob> ci{}; // recorded when no --label was given
    // As a record reads back (lua/acquire.lua writes it, from AcquireOptions::keeper;
    // to_json() does not): a keeper process renews it (acquire --while-pid).
    bool keeper = false;
    // As a claim's metadata reads back (lua/lib/occurrence.lua writes these; to_json() does
    // not): which run of the occurrence it is, the token of the run before it, and the exit
    // status of a run that failed.
    long long attempt = 1;
    std::string after{};
    std::optional<long long> exit_status{};

    std::string to_json() const;
};

// Where a queued waiter stands, reported while it waits.
struct QueuePosition {
    long long ahead = 0; // waiters in front of this one
    long long held = 0;  // slots held now
    long long limit = 0;
    long long queued = 0; // waiters in all, this one included
};

// A pause of admission (`redsem pause`; see lua/lib/pause.lua) as the server holds it.
struct Pause {
    HolderMeta by;          // who paused; by.label is the reason
    long long since_ms = 0; // server clock
    long long until_ms = 0; // server clock; 0: until resumed
};

// The claim of a `run --once-per` occurrence while its window lasts (lua/lib/occurrence.lua).
struct Claim {
    std::string token;      // the run that claimed it
    std::string stage;      // "run" (it holds its slot), "done" (it succeeded), "failed" (it
                            // exited with another status; by.exit_status says which), or
                            // "lapsed" (it left without a release of its own); after the
                            // last two the next caller runs, unless its --attempts are used up
    long long attempt = 1;  // which run of the occurrence
    long long since_ms = 0; // its grant (server clock)
    long long until_ms = 0; // the window's end (server clock)
    HolderMeta by{};        // who ran it
};

// The pause in force, as a reply that refused a slot said.
struct PauseSeen {
    HolderMeta by;                       // who paused; by.label is the reason
    Milliseconds age{0};                 // since it began
    std::optional<Milliseconds> ends_in; // nullopt: until resumed
};

// Whether admission was closed after a possible loss of data at the server, or paused, as a
// reply that refused a slot said (see lua/lib/epoch.lua).
struct AdmissionClosed {
    Milliseconds opens_in{0}; // until the loss grace has passed; 0: not closed by a loss
    // Why: "start" (Redis has no record of redsem, and started lost_ago), "change" (it
    // restarted, or another server took over, lost_ago), "unproven" (for a user without
    // INFO: the Redis process could not show that it had seen redsem's records before),
    // "evicted" (an evicting maxmemory-policy was in force, or keys were evicted after a
    // CONFIG SET: see lua/lib/epoch.lua), "declared" (`redsem lost`), or "paused" (see
    // `pause`).
    std::string cause;
    Milliseconds lost_ago{0};
    // The pause in force, told to every waiter, wherever it stands in the queue.
    std::optional<PauseSeen> pause{};

    bool closed() const noexcept { return opens_in.count() > 0 || pause.has_value(); }
};

// Another run claims the occurrence that a caller of `run --once-per` asked for one run of,
// so it skipped (lua/lib/occurrence.lua).
struct Skip {
    bool done = false; // that run succeeded; else it runs still, or `why` says more
    // "ran" (done), "running", "attempts" (done too: the occurrence's runs failed or left
    // without finishing as often as --attempts allows; the last one is by, by.attempt of them),
    // or for --at-most-once "lapsed" (the run that claimed the
    // occurrence left without finishing) or "lost" (Redis may have lost data, of `cause`, at
    // since_ms, after the window could have begun; the next run may start at until_ms; no
    // token, no `by`)
    std::string why{};
    std::string cause{};
    std::string token{};    // the claim's
    HolderMeta by{};        // who runs or ran it
    long long since_ms = 0; // when it was granted (server clock)
    long long until_ms = 0; // when the window ends (server clock)
    long long server_now_ms = 0;
};

// Thrown by Semaphore::acquire() when the caller skipped: an outcome, not a failure, and
// nothing is held or queued.
class Skipped : public std::exception {
public:
    explicit Skipped(Skip skip) : m_skip(std::move(skip)) {}
    const Skip& skip() const noexcept { return m_skip; }
    const char* what() const noexcept override { return "skipped: another run claims it"; }

private:
    Skip m_skip;
};

// What a `run --once-per` asks of each occurrence of its window (see lua/lib/occurrence.lua).
struct OncePer {
    long long window_ms = 0;   // one run of the occurrence is enough within it
    bool at_most_once = false; // --at-most-once: also skip where a run's outcome is unknown
    long long attempts = 1;    // --attempts: runs that may fail or leave without finishing
};

struct AcquireOptions {
    std::optional<long long> limit; // nullopt: the stored limit (1 for a new semaphore)
    long long slots = 1;            // how many slots one grant takes (--slots)
    bool exclusive = false;         // all of them, as many as the limit at the grant
    Milliseconds ttl = k_default_ttl;
    std::optional<Milliseconds> wait; // nullopt: wait for ever; 0: try once
    HolderMeta meta;                  // for people: status, log (to_json())
    std::optional<OncePer> once_per{};
    bool keeper = false; // a keeper process renews the lease (acquire --while-pid)
    // acquire --max-hold: no renewal moves the lease past its grant + this (lua/renew.lua).
    std::optional<Milliseconds> max_hold{};
    // --supersede: queued, take the place of the waiter that asked for it before, which
    // leaves (Skipped, why "superseded"); newest wins.
    bool supersede = false;
    // --max-waiting N: a caller that would make more than N wait is refused (QueueFull).
    std::optional<long long> max_waiting{};
    int interrupt_fd = -1; // readable => stop waiting, leave the queue, throw WaitInterrupted
    std::function<void(const QueuePosition&)> on_wait; // called each time the waiter is queued
    // Refresh the place in the queue every k_waiter_refresh however far back it is, so that
    // on_wait shows a live position (a person is watching); otherwise less often further back.
    bool live_position = false;
    // Called with every reply that refused a slot: whether a slot could have been taken but
    // admission is closed for a while (opens_in > 0).
    std::function<void(const AdmissionClosed&)> on_closed;
    // The loss grace for this caller's own admission; nullopt: the one every client has
    // (k_default_loss_grace). Never stored: it changes nobody else's admission.
    std::optional<Milliseconds> loss_grace;
    // The token may have reached the server before (a retry after a lost reply): look it up
    // rather than treat it as new.
    bool retry = false;
    // --replicas: a slot counts as held only once this many replicas have it (WAIT).
    long long replicas = 0;
};

// Why a renewal found no lease (lua/renew.lua), as far as the server can tell.
struct LeaseLoss {
    std::string why{};        // "expired" (by the server's clock), "gone" (the semaphore's keys
                              // are), or "unknown" (the token is not there)
    long long lost_at_ms = 0; // the latest possible loss of data (server clock; 0: none known)
    std::string cause{};      // of that loss, as AdmissionState names it
    long long server_now_ms = 0;

    // What a holder granted at server time `granted_ms` is told: why its slot is gone.
    std::string describe(long long granted_ms) const;
};

// A held slot, as the server granted it.
// How `run`'s command ended, as its release records it in the history (the released event).
struct CommandEnd {
    int status = 0;              // run's exit status: the command's, 128+N after signal N, 124
                                 // when stopped at --max-run
    std::optional<int> signal{}; // the signal that ended it, 0 when it exited; nullopt: unknown
    std::optional<Milliseconds> timed_out_after{}; // stopped at --max-run after this long
};

struct Lease {
    std::string token;
    long long fence = 0;            // strictly increasing per semaphore, so per slot too
    long long slot = 0;             // lowest free number in 0..limit-1, stable for the lease
    std::vector<long long> slots{}; // every slot of the grant (--slots K), ascending; slot first
    long long limit = 0;
    Milliseconds ttl{0};
    long long deadline_ms = 0; // server clock, epoch milliseconds
    // A server time at or after local_start: locally, the lease ends no later than
    // local_start + (deadline_ms - server_now_ms).
    long long server_now_ms = 0;
    bool waited = false;      // the acquire had to queue first
    bool handed_over = false; // a release handed this slot straight to this waiter
    // The local send time of the request whose script read server_now_ms.
    BootClock::time_point local_start;

    // How far ahead of the lease's end a holder stops trusting it: a quarter of the ttl, at
    // most 2s. It covers the local clock running slower than the server's.
    static Milliseconds safety_margin(Milliseconds ttl);
    // The local time by which the server may hand the slot on.
    BootClock::time_point ends_by() const;
    // The local time until which the holder may act on the lease: ends_by() less the margin.
    BootClock::time_point valid_until() const { return ends_by() - safety_margin(ttl); }
};

struct Renewal {
    long long deadline_ms = 0;
    long long server_now_ms = 0;
    Milliseconds ttl{0}; // the lease's ttl from now on
    bool capped = false; // the deadline is the grant + --max-hold: no renewal moves it further
};

// A semaphore's limit, as `redsem limit` shows it.
struct LimitInfo {
    long long limit = 1; // in force now (1 for a new semaphore)
    bool stored = false; // false: a new semaphore, no limit stored yet
    long long held = 0;
    long long queued = 0;
    long long history = k_default_history; // events its history keeps (0: none)
    // Who stored the limit: "operator" (redsem limit NAME N), "caller" (the -n of the acquire
    // that found the semaphore new or idle, or the default), "" (none stored, or not known).
    std::string set_by;
};

// Whether admission is closed after a possible loss of data, for the loss grace every client
// has, as the server sees it now (lua/view.lua).
struct AdmissionState {
    bool known = true;         // false: the server denies INFO, so nothing can be said
    long long opens_at_ms = 0; // server clock; 0: admission is open
    std::string cause; // while closed: "start", "change", "unproven", "evicted" or "declared" (see
                       // AdmissionClosed)
    long long lost_at_ms = 0; // the latest possible loss of data (0: none)
    bool noticed = true;      // false: the next call that may admit records the loss
    long long server_now_ms = 0;

    bool closed() const noexcept { return opens_at_ms > 0; }
};

// A loss of data an operator declared (`redsem lost`, lua/lost.lua), in server milliseconds.
struct LossDeclared {
    long long lost_at_ms = 0;
    long long opens_at_ms = 0; // for the loss grace every client has
};

// What `pause`, `resume` and `drain` see (lua/pause.lua).
struct PauseInfo {
    // The pause in force after the call (resume: the one it ended); nullopt: none.
    std::optional<Pause> pause{};
    long long held = 0;
    long long queued = 0;
    long long limit = 1;
    long long server_now_ms = 0;
    long long due_in_ms = -1; // when a lease or a waiter's liveness may run out; -1: none
};

// What release.lua did with a token. The late release of a `run --once-per` whose command
// succeeded after its lease ran out finds nothing to release, and says what became of its
// occurrence's claim: marked done all the same (late_done), claimed by another run since
// (late_taken), or gone (late_gone: Redis lost it with its data, or it was cleared).
enum class ReleaseOutcome { released, left_queue, not_found, late_done, late_taken, late_gone };

} // namespace redsem

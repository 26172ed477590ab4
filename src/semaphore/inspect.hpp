#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "semaphore/history.hpp"
#include "semaphore/record.hpp"
#include "semaphore/semaphore.hpp"

namespace redsem {

struct HolderView {
    std::string token{};
    std::optional<Record> record{}; // nullopt when the stored entry is missing or malformed
    long long deadline_ms = 0;
    bool expired = false; // lease ran out or hand-over not collected in time; not pruned
};

struct WaiterView {
    std::string token{};
    long long position = 1; // 1 = next: the numbering `status` and the waiting line show
    std::optional<Record> record{};
    bool stale = false; // stopped refreshing its place (dead?), not pruned yet
};

// How long the semaphore's last holders held their slots (its history), for an estimate of
// the wait (semaphore/wait_estimate.hpp).
struct HoldStats {
    std::size_t holds = 0;                // releases it is drawn from
    std::optional<Milliseconds> median{}; // nullopt: too few of them to tell
    bool whole = true;                    // the whole history was read for them
};

// One semaphore as `status NAME` shows it, judged by lua/view.lua. Times are the server's.
struct SemaphoreView {
    std::string name{};
    std::optional<long long> limit{}; // nullopt: the semaphore does not exist (or has no limit)
    long long server_now_ms = 0;
    std::vector<HolderView> holders{}; // by slot
    std::vector<WaiterView> waiters{}; // in queue order
    // Counted as SemaphoreSummary counts them (dead entries apart).
    long long held = 0;
    long long expired = 0;
    long long waiting = 0;
    long long stale = 0;
    AdmissionState admission{};       // closed after a possible loss of data?
    std::optional<Pause> pause{};     // paused now (redsem pause)?
    std::optional<Claim> claim{};     // the occurrence's (run --once-per), while its window lasts
    std::string exclusive{};          // the token of an --exclusive holder ("": none)
    std::optional<HoldStats> holds{}; // while anybody waits, when asked (read_holds())
    std::optional<RunHistory> runs{}; // when asked (read_runs())
};

// One line of `status` without a name. Dead entries the scripts have not pruned yet are
// counted apart: a holder whose lease ran out (or whose hand-over nobody collected) is not
// holding, and a waiter that stopped refreshing its place is not waiting.
// Counted in the semaphore's state while its history is on (lua/lib/history.lua, log_event()); they
// start again from 0 when its keys are deleted (gc) or expire.
struct HistoryCounters {
    long long acquired = 0; // slots granted, directly or by hand-over
    long long expired = 0;  // leases that ran out, and hand-overs nobody collected
    long long lost = 0;     // renewals that found no lease
};

struct SemaphoreSummary {
    std::string name{};
    std::optional<long long> limit{};
    long long held = 0;             // slots of live holders (one of --slots K counts K)
    long long holders = 0;          // live holders
    long long expired = 0;          // holders whose lease ran out, or whose hand-over lapsed
    long long waiting = 0;          // live waiters
    long long stale = 0;            // waiters past their liveness
    std::optional<Record> oldest{}; // the live holder that has held longest
    std::optional<long long> oldest_wait_since_ms{}; // when the live waiter queued first queued
    long long history = 0;                           // events its history keeps (0: none)
    std::optional<HistoryCounters> counters{};       // while its history is on
    long long server_now_ms = 0;  // the clock of the server (cluster node) that holds it
    AdmissionState admission{};   // closed after a possible loss of data?
    std::optional<Pause> pause{}; // paused now (redsem pause)?
    std::optional<Claim> claim{}; // the occurrence's (run --once-per), while its window lasts
    // Set when a key of another type is at one of its names (a key made by hand): which key,
    // and what it holds. The semaphore cannot be read then, and the other fields say nothing.
    std::string unreadable{};
};

// A primary of a Redis Cluster that a listing could not reach (down, or cut off): the listing
// goes on without the semaphores it holds.
struct UnlistedNode {
    std::string node; // its address
    std::string why;  // the error
};

// Reads one semaphore with lua/view.lua, in pages (so that no single call is long on a big
// semaphore); changes nothing but, without INFO, the proof of the epoch (see
// Semaphore::admission()). A page-by-page read is not one atomic snapshot.
SemaphoreView inspect(Connection& connection, std::string_view prefix, std::string_view name);

// How a listing reads admission: `none` (left open); `recorded`, as lua/view.lua judges it,
// or where INFO is denied as a call that could tell recorded it (else unknown), which writes
// nothing; `proven`, where INFO is denied by the proof of the epoch, which a user without INFO
// writes and removes (Semaphore::admission()).
enum class AdmissionRead { none, recorded, proven };

// Every semaphore under `prefix`, sorted by name, found with SCAN (never KEYS) and read with
// lua/view.lua in pipelined batches; on a Redis Cluster, on every primary, each timed by its
// node's clock.
// A semaphore with a key of another type at one of its names is listed with `unreadable` set.
// Changes nothing but the proof that `admission` may write (see AdmissionRead).
// With `unlisted`, a cluster primary that cannot be reached is noted there, and the others are
// listed; without, it fails the listing.
std::vector<SemaphoreSummary> list_semaphores(Connection& connection, std::string_view prefix,
                                              AdmissionRead admission = AdmissionRead::proven,
                                              std::vector<UnlistedNode>* unlisted = nullptr);

// One semaphore's line of list_semaphores(), timed by the clock of the server that holds it.
SemaphoreSummary summarize(Connection& connection, std::string_view prefix, std::string_view name,
                           AdmissionRead admission = AdmissionRead::proven);

// The names of every semaphore under `prefix` that has key `part` ("state": every one;
// "log": those with a history), sorted, found with SCAN (on a Redis Cluster, on every primary;
// `unlisted` as for list_semaphores()).
std::vector<std::string> scan_names(Connection& connection, std::string_view prefix,
                                    std::string_view part = "state",
                                    std::vector<UnlistedNode>* unlisted = nullptr);

// The tokens of holders and waiters of `name` that start with `start` (a short token, as
// `status` prints), found with HSCAN. Changes nothing.
std::vector<std::string> tokens_starting_with(Connection& connection, std::string_view prefix,
                                              std::string_view name, std::string_view start);

// The clock of the server that holds `key` (empty: any), in epoch milliseconds.
long long server_time_ms(Connection& connection, const std::string& key);

} // namespace redsem

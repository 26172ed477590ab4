#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "semaphore/record.hpp"

namespace redsem {

struct HolderView {
    std::string token;
    std::optional<Record> record; // nullopt when the stored entry is missing or malformed
    long long deadline_ms = 0;
    bool expired = false; // lease ran out or hand-over not collected in time; not pruned
};

struct WaiterView {
    std::string token;
    long long position = 1; // 1 = next: the numbering `status` and the waiting line show
    std::optional<Record> record;
    bool stale = false; // stopped refreshing its place (dead?), not pruned yet
};

// One semaphore as `status NAME` shows it. Times are the server's.
struct SemaphoreView {
    std::string name;
    std::optional<long long> limit; // nullopt: the semaphore does not exist (or has no limit)
    long long server_now_ms = 0;
    std::vector<HolderView> holders; // by slot
    std::vector<WaiterView> waiters; // in queue order
};

// One line of `status` without a name. Dead entries the scripts have not pruned yet are
// counted apart: a holder whose lease ran out (or whose hand-over nobody collected) is not
// holding, and a waiter that stopped refreshing its place is not waiting.
struct SemaphoreSummary {
    std::string name;
    std::optional<long long> limit;
    long long held = 0;           // live holders
    long long expired = 0;        // holders whose lease ran out, or whose hand-over lapsed
    long long waiting = 0;        // live waiters
    long long stale = 0;          // waiters past their liveness
    std::optional<Record> oldest; // the live holder that has held longest
    long long server_now_ms = 0;  // the clock of the server (cluster node) that holds it
};

// Reads one semaphore with read-only commands, in pages (so that no single call is long on a
// big semaphore); changes nothing. A page-by-page read is not one atomic snapshot.
SemaphoreView inspect(Connection& connection, std::string_view prefix, std::string_view name);

// Every semaphore under `prefix`, sorted by name, found with SCAN (never KEYS) and read in
// pipelined batches; on a Redis Cluster, on every primary, each timed by its node's clock.
// Changes nothing.
std::vector<SemaphoreSummary> list_semaphores(Connection& connection, std::string_view prefix);

// The names of every semaphore under `prefix`, sorted, found with SCAN (on a Redis Cluster, on
// every primary).
std::vector<std::string> scan_names(Connection& connection, std::string_view prefix);

// The tokens of holders and waiters of `name` that start with `start` (a short token, as
// `status` prints), found with HSCAN. Changes nothing.
std::vector<std::string> tokens_starting_with(Connection& connection, std::string_view prefix,
                                              std::string_view name, std::string_view start);

// The clock of the server that holds `key` (empty: any), in epoch milliseconds.
long long server_time_ms(Connection& connection, const std::string& key);

} // namespace redsem

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
    bool expired = false; // deadline passed, not pruned yet
};

struct WaiterView {
    std::string token;
    long long position = 0; // 0 = next
    std::optional<Record> record;
};

// One semaphore as `status NAME` shows it. Times are the server's.
struct SemaphoreView {
    std::string name;
    std::optional<long long> limit; // nullopt: the semaphore does not exist (or has no limit)
    long long server_now_ms = 0;
    std::vector<HolderView> holders; // by slot
    std::vector<WaiterView> waiters; // in queue order
};

// One line of `status` without a name.
struct SemaphoreSummary {
    std::string name;
    std::optional<long long> limit;
    long long held = 0;
    long long waiting = 0;
    std::optional<Record> oldest; // the holder that has held longest
};

// Reads one semaphore with read-only commands, in pages (so that no single call is long on a
// big semaphore); changes nothing. A page-by-page read is not one atomic snapshot.
SemaphoreView inspect(Connection& connection, std::string_view prefix, std::string_view name);

// Every semaphore under `prefix`, sorted by name, found with SCAN (never KEYS) and read in
// pipelined batches. Sets `server_now_ms`. Changes nothing.
std::vector<SemaphoreSummary> list_semaphores(Connection& connection, std::string_view prefix,
                                              long long& server_now_ms);

// The names of every semaphore under `prefix`, sorted, found with SCAN.
std::vector<std::string> scan_names(Connection& connection, std::string_view prefix);

// The server's clock, in epoch milliseconds.
long long server_time_ms(Connection& connection);

} // namespace redsem

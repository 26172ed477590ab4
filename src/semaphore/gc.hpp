#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/record.hpp"

namespace redsem {

struct GcEntry {
    enum class Kind { holder, waiter, handover, orphan };

    std::string name; // semaphore
    Kind kind = Kind::holder;
    std::string token;
    std::optional<Record> record;
    long long dead_for_ms = 0; // since the lease or liveness ran out; 0 for orphans
};

struct GcFailure {
    std::string name;
    ExitCode code;
    std::string message;
};

struct GcReport {
    std::vector<GcEntry> removed;
    std::vector<std::string> deleted;   // semaphores whose keys were deleted (nothing was left)
    std::vector<GcFailure> failed;      // semaphores that could not be cleaned (others were)
    std::vector<UnlistedNode> unlisted; // cluster primaries not reached (without names)
};

// How many semaphores one pipelined round trip starts cleaning.
inline constexpr std::size_t k_gc_batch = 100;
// How many entries of one semaphore a single call of lua/gc.lua examines at most: a call stays
// a few milliseconds at most, so gc never stalls Redis, however big the semaphore.
inline constexpr long long k_gc_entries_per_call = 100;

// Cleans the named semaphores, or every one under `prefix` (found with SCAN) when `names` is
// empty, by lua/gc.lua: each call removes up to k_gc_entries_per_call entries atomically, and
// the first calls of k_gc_batch semaphores share one round trip. With `dry_run`, reports
// what it would remove and changes nothing. A semaphore that cannot be cleaned (a foreign key
// in its place) is reported in `failed`, and the others are still cleaned.
GcReport collect_garbage(Connection& connection, std::string_view prefix,
                         const std::vector<std::string>& names, bool dry_run);

std::string_view kind_name(GcEntry::Kind kind);

} // namespace redsem

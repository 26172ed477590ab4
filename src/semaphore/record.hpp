#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "semaphore/values.hpp"

namespace redsem {

// One entry of a semaphore's info hash, as the scripts write it (lua/lib/records.lua):
// "h SLOTS FENCE ACQUIRED_MS TTL_MS JSON" for a holder (SLOTS: "3", or "0,3,4" for a holder of
// several), "w WANTS GRACE SINCE_MS TTL_MS JSON" for a waiter (WANTS: '-' one slot, a count, or
// 'x' for all of them).
struct Record {
    enum class Kind { holder, waiter };

    Kind kind = Kind::holder;
    long long slot = -1;            // holders only: the lowest of `slots`
    std::vector<long long> slots{}; // holders only: every slot it holds, ascending
    long long wants = 1;    // waiters only: how many slots it asks for; 0: all (--exclusive)
    long long fence = 0;    // holders only
    long long since_ms = 0; // acquired (holder) or queued (waiter), server clock
    long long ttl_ms = 0;
    HolderMeta meta{};
};

// Parses one info entry; nullopt when it is not in the format above (edited by hand).
std::optional<Record> parse_record(std::string_view raw);

// "0,3,4" (or "3") as slot numbers; nullopt when anything else.
std::optional<std::vector<long long>> parse_slot_list(std::string_view text);

// `text` cut at its spaces into `parts` parts at most, the last one the rest (a JSON that may
// hold spaces): what the scripts write as "A B ... JSON".
std::vector<std::string_view> split_spaces(std::string_view text, std::size_t parts);

// Parses the metadata JSON of an entry (HolderMeta::to_json()); a field that is missing or
// has another type (edited by hand) stays empty.
HolderMeta parse_meta(std::string_view json);

// What a table shows in its LABEL column: the label, and the CI job's URL (where a person can
// open it), or its system, pipeline and job when it has no URL.
std::string label_cell(const HolderMeta& meta);

} // namespace redsem

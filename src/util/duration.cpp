#include "util/duration.hpp"

#include "util/errors.hpp"
#include "util/name.hpp"

#include <array>
#include <cstdint>
#include <fmt/format.h>

namespace redsem {

namespace {

struct Unit {
    std::string_view suffix;
    std::int64_t ms;
};

// Largest first; "ms" precedes "m" so that the longer suffix wins.
constexpr std::array<Unit, 5> k_units{{
    {"d", 86'400'000},
    {"h", 3'600'000},
    {"ms", 1},
    {"m", 60'000},
    {"s", 1'000},
}};

// Rank for the largest-to-smallest ordering rule (ms is the smallest).
int unit_rank(std::string_view suffix) {
    constexpr std::array<std::string_view, 5> order{"d", "h", "m", "s", "ms"};
    for (std::size_t i = 0; i < order.size(); ++i) {
        if (order[i] == suffix) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

bool is_digit(char c) {
    return c >= '0' && c <= '9';
}

[[noreturn]] void fail(std::string_view text, std::string_view what, std::string_view why) {
    throw UsageError(fmt::format("{}: invalid duration '{}': {}", what, printable(text), why));
}

} // namespace

Milliseconds parse_duration(std::string_view text, std::string_view what) {
    if (text.empty()) {
        fail(text, what, "it is empty (use e.g. 30s, 5m, 1h30m)");
    }
    constexpr double k_max_ms = static_cast<double>(k_max_duration.count());
    double total_ms = 0;
    int last_rank = -1;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const std::size_t start = pos;
        while (pos < text.size() && is_digit(text[pos])) {
            ++pos;
        }
        if (pos < text.size() && text[pos] == '.') {
            ++pos;
            while (pos < text.size() && is_digit(text[pos])) {
                ++pos;
            }
        }
        const std::string_view number = text.substr(start, pos - start);
        if (number.empty() || number == "." || number.front() == '.' || number.back() == '.') {
            fail(text, what, "expected a number such as 30s, 5m or 1h30m");
        }
        if (number.size() > 15) {
            fail(text, what, "the number is too large");
        }
        const double value = std::stod(std::string(number));

        const std::size_t unit_start = pos;
        while (pos < text.size() && !is_digit(text[pos]) && text[pos] != '.') {
            ++pos;
        }
        const std::string_view suffix = text.substr(unit_start, pos - unit_start);
        if (suffix.empty()) {
            if (start != 0 || pos != text.size()) {
                fail(text, what, "every number needs a unit (ms, s, m, h, d)");
            }
            total_ms = value * 1000.0;
            break;
        }
        const Unit* unit = nullptr;
        for (const Unit& candidate : k_units) {
            if (candidate.suffix == suffix) {
                unit = &candidate;
            }
        }
        if (unit == nullptr) {
            fail(text, what,
                 fmt::format("unknown unit '{}' (use ms, s, m, h or d)", printable(suffix)));
        }
        const int rank = unit_rank(suffix);
        if (rank <= last_rank) {
            fail(text, what, "units must go from largest to smallest, each once (as in 1h30m)");
        }
        last_rank = rank;
        total_ms += value * static_cast<double>(unit->ms);
        if (total_ms > k_max_ms) {
            break;
        }
    }
    if (total_ms > k_max_ms) {
        fail(text, what, "longer than the maximum of 366 days");
    }
    return Milliseconds{static_cast<std::int64_t>(total_ms + 0.5)};
}

std::string format_duration(Milliseconds duration) {
    std::int64_t ms = duration.count();
    const char* sign = "";
    if (ms < 0) {
        sign = "-";
        ms = -ms;
    }
    if (ms < 1000) {
        return fmt::format("{}{}ms", sign, ms);
    }
    if (ms < 60'000) {
        const std::int64_t tenths = (ms + 50) / 100;
        if (tenths % 10 == 0 || ms >= 10'000) {
            return fmt::format("{}{}s", sign, (ms + 500) / 1000);
        }
        return fmt::format("{}{}.{}s", sign, tenths / 10, tenths % 10);
    }
    const std::int64_t seconds = (ms + 500) / 1000;
    const std::int64_t days = seconds / 86'400;
    const std::int64_t hours = seconds % 86'400 / 3600;
    const std::int64_t minutes = seconds % 3600 / 60;
    const std::int64_t secs = seconds % 60;
    if (days > 0) {
        return hours > 0 ? fmt::format("{}{}d{}h", sign, days, hours)
                         : fmt::format("{}{}d", sign, days);
    }
    if (hours > 0) {
        return minutes > 0 ? fmt::format("{}{}h{}m", sign, hours, minutes)
                           : fmt::format("{}{}h", sign, hours);
    }
    return secs > 0 ? fmt::format("{}{}m{}s", sign, minutes, secs)
                    : fmt::format("{}{}m", sign, minutes);
}

} // namespace redsem

#pragma once

#include <charconv>
#include <limits>
#include <optional>
#include <string_view>

namespace redsem {

// The one parser of whole decimal numbers: `text` must be a number (an optional '-' and
// digits, nothing around them) within [min, max]; anything else is nullopt.
inline std::optional<long long>
parse_integer(std::string_view text, long long min = std::numeric_limits<long long>::min(),
              long long max = std::numeric_limits<long long>::max()) {
    long long value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc() || ptr != end || value < min || value > max) {
        return std::nullopt;
    }
    return value;
}

} // namespace redsem

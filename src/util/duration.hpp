#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace redsem {

using Milliseconds = std::chrono::milliseconds;

// The longest duration redsem accepts anywhere: 366 days.
inline constexpr Milliseconds k_max_duration{366LL * 24 * 3600 * 1000};

// Parses "250ms", "30s", "5m", "2h", "1d", "1h30m", "1.5s"; a bare number means seconds.
// Units must appear from largest to smallest, each at most once. Throws UsageError naming
// `what` (for example "--ttl") on anything else, on negative values and above k_max_duration.
Milliseconds parse_duration(std::string_view text, std::string_view what);

// Formats for people: "250ms", "42s", "2m13s", "1h30m", "3d4h". Rounds to the two largest
// units above one minute.
std::string format_duration(Milliseconds duration);

} // namespace redsem

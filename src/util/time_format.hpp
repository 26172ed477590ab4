#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace redsem {

// "2026-11-21T07:16:00.123Z" for epoch milliseconds.
std::string iso8601_utc(long long epoch_ms);

// "2026-11-21 08:16:00.123" for epoch milliseconds, in the local time zone (TZ).
std::string local_time(long long epoch_ms);
// The local time zone's name now ("UTC", "CET", "CEST", or "UTC+05:30" where it has none).
std::string local_zone();

// Epoch milliseconds of a point in time given as "@SECONDS" (since the epoch), "YYYY-MM-DD"
// (its midnight), or "YYYY-MM-DD HH:MM[:SS[.FFF]]" with 'T' or a space between date and time,
// then optionally "Z" or an offset "+HH:MM" / "-HH:MM"; without a zone, local time. nullopt
// for anything else (also an impossible date, such as February 30th).
std::optional<long long> parse_time_point(std::string_view text);

} // namespace redsem

#include "util/time_format.hpp"

#include <ctime>
#include <fmt/format.h>

namespace redsem {

std::string iso8601_utc(long long epoch_ms) {
    const std::time_t seconds = static_cast<std::time_t>(epoch_ms / 1000);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                       utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                       epoch_ms % 1000);
}

} // namespace redsem

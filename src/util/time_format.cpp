#include "util/time_format.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <fmt/format.h>

namespace redsem {

namespace {

// The years ISO 8601 writes with four digits, as epoch milliseconds: a time outside them (a
// hand-edited record) is shown as the nearest one.
constexpr long long k_first_ms = -62'167'219'200'000; // 0000-01-01T00:00:00.000Z
constexpr long long k_last_ms = 253'402'300'799'999;  // 9999-12-31T23:59:59.999Z

// "YYYY-MM-DD<separator>HH:MM:SS.mmm<zone>" of `epoch_ms`, broken down by `breakdown`
// (gmtime_r or localtime_r).
std::string format_time(long long epoch_ms, std::tm* (*breakdown)(const std::time_t*, std::tm*),
                        char separator, std::string_view zone) {
    epoch_ms = std::clamp(epoch_ms, k_first_ms, k_last_ms);
    // Floored: -5 ms is 23:59:59.995 of the day before, not ".-05".
    const long long millis = ((epoch_ms % 1000) + 1000) % 1000;
    const std::time_t seconds = static_cast<std::time_t>((epoch_ms - millis) / 1000);
    std::tm parts{};
    breakdown(&seconds, &parts);
    return fmt::format("{:04}-{:02}-{:02}{}{:02}:{:02}:{:02}.{:03}{}",
                       std::clamp(parts.tm_year + 1900, 0, 9999), parts.tm_mon + 1, parts.tm_mday,
                       separator, parts.tm_hour, parts.tm_min, parts.tm_sec, millis, zone);
}

} // namespace

std::string iso8601_utc(long long epoch_ms) {
    return format_time(epoch_ms, gmtime_r, 'T', "Z");
}

std::string local_time(long long epoch_ms) {
    return format_time(epoch_ms, localtime_r, ' ', "");
}

std::string local_zone() {
    const std::time_t now = std::time(nullptr);
    std::tm parts{};
    localtime_r(&now, &parts);
    char name[64] = "";
    std::strftime(name, sizeof(name), "%Z", &parts);
    // A zone given as an offset alone (TZ=<+0530>-5:30) is named by a number: say which.
    if (name[0] != '\0' && name[0] != '+' && name[0] != '-') {
        return name;
    }
    const long offset = parts.tm_gmtoff / 60;
    return fmt::format("UTC{}{:02}:{:02}", offset < 0 ? '-' : '+', std::labs(offset) / 60,
                       std::labs(offset) % 60);
}

namespace {

// Reads exactly `digits` decimal digits at `at`, advancing it.
std::optional<int> digits_at(std::string_view text, std::size_t& at, std::size_t digits) {
    if (at + digits > text.size()) {
        return std::nullopt;
    }
    int value = 0;
    for (std::size_t i = 0; i < digits; ++i) {
        const char c = text[at + i];
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
        value = value * 10 + (c - '0');
    }
    at += digits;
    return value;
}

bool take(std::string_view text, std::size_t& at, char c) {
    if (at < text.size() && text[at] == c) {
        ++at;
        return true;
    }
    return false;
}

} // namespace

std::optional<long long> parse_time_point(std::string_view text) {
    if (text.starts_with('@')) {
        long long seconds = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data() + 1, end, seconds);
        if (error != std::errc() || ptr != end || text.size() == 1 || seconds < 0 ||
            seconds > 253'402'300'799) { // 9999-12-31T23:59:59Z
            return std::nullopt;
        }
        return seconds * 1000;
    }
    std::size_t at = 0;
    std::tm fields{};
    const auto year = digits_at(text, at, 4);
    if (!year || !take(text, at, '-')) {
        return std::nullopt;
    }
    const auto month = digits_at(text, at, 2);
    if (!month || !take(text, at, '-')) {
        return std::nullopt;
    }
    const auto day = digits_at(text, at, 2);
    if (!day) {
        return std::nullopt;
    }
    int hour = 0;
    int minute = 0;
    int second = 0;
    int millis = 0;
    if (take(text, at, 'T') || take(text, at, ' ')) {
        const auto h = digits_at(text, at, 2);
        if (!h || !take(text, at, ':')) {
            return std::nullopt;
        }
        const auto m = digits_at(text, at, 2);
        if (!m) {
            return std::nullopt;
        }
        hour = *h;
        minute = *m;
        if (take(text, at, ':')) {
            const auto s = digits_at(text, at, 2);
            if (!s) {
                return std::nullopt;
            }
            second = *s;
            if (take(text, at, '.')) {
                const auto f = digits_at(text, at, 3);
                if (!f) {
                    return std::nullopt;
                }
                millis = *f;
            }
        }
    }
    std::optional<int> offset_minutes; // east of UTC; nullopt: local time
    if (take(text, at, 'Z')) {
        offset_minutes = 0;
    } else if (at < text.size() && (text[at] == '+' || text[at] == '-')) {
        const int sign = text[at] == '+' ? 1 : -1;
        ++at;
        const auto h = digits_at(text, at, 2);
        if (!h || !take(text, at, ':')) {
            return std::nullopt;
        }
        const auto m = digits_at(text, at, 2);
        if (!m || *h > 23 || *m > 59) {
            return std::nullopt;
        }
        offset_minutes = sign * (*h * 60 + *m);
    }
    if (at != text.size() || *month < 1 || *month > 12 || *day < 1 || *day > 31 || hour > 23 ||
        minute > 59 || second > 59 || *year < 1970) {
        return std::nullopt;
    }
    fields.tm_year = *year - 1900;
    fields.tm_mon = *month - 1;
    fields.tm_mday = *day;
    fields.tm_hour = hour;
    fields.tm_min = minute;
    fields.tm_sec = second;
    std::time_t seconds = 0;
    if (offset_minutes) {
        seconds = timegm(&fields) - static_cast<std::time_t>(*offset_minutes) * 60;
    } else {
        fields.tm_isdst = -1;
        seconds = mktime(&fields);
    }
    // mktime and timegm carry February 30th into March: refuse a date that moved.
    if (seconds == static_cast<std::time_t>(-1) || fields.tm_mday != *day ||
        fields.tm_mon != *month - 1) {
        return std::nullopt;
    }
    return static_cast<long long>(seconds) * 1000 + millis;
}

} // namespace redsem

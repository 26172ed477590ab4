#include "cli/admission.hpp"

#include "util/duration.hpp"
#include "util/time_format.hpp"

#include <fmt/format.h>

namespace redsem::cli {

namespace {

using nlohmann::json;

json time_or_null(long long epoch_ms) {
    return epoch_ms > 0 ? json(iso8601_utc(epoch_ms)) : json(nullptr);
}

json ms_or_null(long long ms) {
    return ms > 0 ? json(ms) : json(nullptr);
}

// A duration in whole seconds, rounded up for what is left and down for what has passed.
std::string seconds(long long ms, bool up) {
    const long long whole = up ? (ms + 999) / 1000 : ms / 1000;
    return whole == 0 ? "less than 1s" : format_duration(Milliseconds{whole * 1000});
}

} // namespace

json admission_json(const AdmissionState& admission) {
    if (!admission.known) {
        return {{"known", false},       {"closed", nullptr},   {"opens_at_ms", nullptr},
                {"opens_at", nullptr},  {"opens_in_ms", nullptr}, {"cause", nullptr},
                {"lost_at_ms", nullptr}, {"lost_at", nullptr}, {"noticed", nullptr}};
    }
    const bool closed = admission.closed();
    return {{"known", true},
            {"closed", closed},
            {"opens_at_ms", ms_or_null(admission.opens_at_ms)},
            {"opens_at", time_or_null(admission.opens_at_ms)},
            {"opens_in_ms",
             closed ? json(admission.opens_at_ms - admission.server_now_ms) : json(nullptr)},
            {"cause", closed ? json(admission.cause) : json(nullptr)},
            {"lost_at_ms", ms_or_null(admission.lost_at_ms)},
            {"lost_at", time_or_null(admission.lost_at_ms)},
            {"noticed", admission.noticed}};
}

std::string admission_line(const AdmissionState& admission) {
    if (!admission.known || !admission.closed()) {
        return "";
    }
    const long long now = admission.server_now_ms;
    const std::string left = seconds(admission.opens_at_ms - now, true);
    const std::string ago = seconds(now - admission.lost_at_ms, false);
    if (admission.cause == "start") {
        return fmt::format("admission closed for {} more: Redis has no record of redsem, and "
                           "started {} ago",
                           left, ago);
    }
    if (admission.cause == "unproven") {
        return fmt::format("admission closed for {} more: the Redis process could not show a "
                           "client without INFO that it had seen redsem's records (noticed {} "
                           "ago)",
                           left, ago);
    }
    if (!admission.noticed) {
        return fmt::format("admission closes for {} at the next acquire: Redis restarted, or "
                           "another server took over, since redsem last looked",
                           left);
    }
    return fmt::format("admission closed for {} more: Redis may have lost data (noticed {} ago: "
                       "it restarted, or another server took over)",
                       left, ago);
}

} // namespace redsem::cli

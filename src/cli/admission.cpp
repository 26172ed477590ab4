#include "cli/admission.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"

#include "util/duration.hpp"
#include "util/name.hpp"
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
        return {{"known", false},        {"closed", nullptr},      {"opens_at_ms", nullptr},
                {"opens_at", nullptr},   {"opens_in_ms", nullptr}, {"cause", nullptr},
                {"lost_at_ms", nullptr}, {"lost_at", nullptr},     {"noticed", nullptr}};
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
    if (admission.cause == "evicted") {
        return fmt::format("admission closed for {} more: Redis may have evicted redsem's keys "
                           "(an evicting maxmemory-policy, noticed {} ago)",
                           left, ago);
    }
    if (admission.cause == "declared") {
        return fmt::format("admission closed for {} more: an operator declared a possible loss "
                           "of data {} ago (redsem lost)",
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

std::string pause_text(const std::string& name, const HolderMeta& by, Milliseconds age,
                       std::optional<Milliseconds> ends_in) {
    std::string who = fmt::format("by {} on {}, pid {}", terminal_safe(by.user, 64),
                                  terminal_safe(by.host, 64), by.pid);
    if (by.ci && !by.ci->url.empty()) {
        who += ", " + terminal_safe(by.ci->url, 200);
    }
    const std::string why = by.label.empty() ? "no reason given" : terminal_safe(by.label, 200);
    const std::string end = ends_in ? fmt::format("it ends in {}", seconds(ends_in->count(), true))
                                    : fmt::format("until 'redsem resume {}'", printable(name));
    return fmt::format("'{}' is paused ({}, {} ago): {}; {}", printable(name), who,
                       seconds(age.count(), false), why, end);
}

json pause_json(const std::optional<Pause>& pause, long long server_now_ms) {
    if (!pause) {
        return nullptr;
    }
    const HolderMeta& by = pause->by;
    const json who{{"user", by.user}, {"host", by.host}, {"pid", by.pid}, {"ci", ci_json(by.ci)}};
    return {{"by", who},
            {"reason", by.label},
            {"since_ms", pause->since_ms},
            {"since", time_or_null(pause->since_ms)},
            {"until_ms", ms_or_null(pause->until_ms)},
            {"until", time_or_null(pause->until_ms)},
            {"age_ms", std::max(0LL, server_now_ms - pause->since_ms)},
            {"ends_in_ms", pause->until_ms > 0
                               ? json(std::max(0LL, pause->until_ms - server_now_ms))
                               : json(nullptr)}};
}

std::string_view loss_cause_text(std::string_view cause) {
    return cause == "start"      ? "Redis has no record of redsem (started without its data?)"
           : cause == "unproven" ? "the Redis process could not show it had seen redsem's records"
           : cause == "evicted"
               ? "Redis may have evicted redsem's keys (an evicting maxmemory-policy)"
           : cause == "declared"
               ? "an operator declared that Redis may have lost data (redsem lost)"
           : cause == "change" ? "Redis restarted or another server took over"
                               : cause;
}

} // namespace redsem::cli

#include "semaphore/wait_estimate.hpp"

#include "semaphore/history.hpp"
#include "util/errors.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsem {

HoldStats hold_stats(std::vector<Milliseconds> holds, bool whole) {
    HoldStats stats{holds.size(), std::nullopt, whole};
    if (holds.size() >= k_estimate_min_holds) {
        std::sort(holds.begin(), holds.end());
        const std::size_t middle = holds.size() / 2;
        stats.median =
            holds.size() % 2 == 1 ? holds[middle] : (holds[middle - 1] + holds[middle]) / 2;
    }
    return stats;
}

void read_holds(Connection& connection, std::string_view prefix, SemaphoreView& view) {
    if (view.waiters.empty()) {
        return;
    }
    bool whole = false;
    std::vector<Milliseconds> holds =
        recent_holds(connection, prefix, view.name, k_estimate_holds, k_estimate_scan, whole);
    // A held time no release can have (a history edited by hand) says nothing.
    std::erase_if(
        holds, [](Milliseconds held) { return held < Milliseconds{0} || held > k_longest_hold; });
    view.holds = hold_stats(std::move(holds), whole);
}

std::optional<Milliseconds> estimate_wait(const SemaphoreView& view, const HoldStats& stats,
                                          long long position) {
    if (!stats.median || !view.limit || *view.limit < 1 ||
        (view.pause && view.pause->until_ms == 0)) {
        return std::nullopt;
    }
    const long long now = view.server_now_ms;
    const long long hold = stats.median->count();
    const long long limit = *view.limit;
    // Nobody is admitted before a closed admission opens, or a pause with an end ends.
    long long start = std::max(now, view.admission.opens_at_ms);
    if (view.pause) {
        start = std::max(start, view.pause->until_ms);
    }
    // When each held slot frees, by the server's clock: its holder's grant plus the median.
    // After a lowered limit more may be held than it allows: a waiter then waits for enough of
    // them to free.
    std::vector<long long> ends;
    for (const HolderView& holder : view.holders) {
        if (holder.expired || !holder.record) {
            continue;
        }
        for (std::size_t i = 0; i < holder.record->slots.size(); ++i) {
            ends.push_back(std::max(now, holder.record->since_ms + hold));
        }
    }
    for (const WaiterView& waiter : view.waiters) {
        if (waiter.stale) {
            continue;
        }
        const long long wants = waiter.record ? waiter.record->wants : 1;
        const long long takes = wants < 1 ? limit : std::min(limit, wants);
        std::sort(ends.begin(), ends.end());
        const long long must_free = static_cast<long long>(ends.size()) + takes - limit;
        if (must_free > 0) {
            start = std::max(start, ends[static_cast<std::size_t>(must_free - 1)]);
        }
        std::erase_if(ends, [start](long long end) { return end <= start; });
        if (waiter.position == position) {
            return Milliseconds{start - now};
        }
        ends.insert(ends.end(), static_cast<std::size_t>(takes), start + hold);
    }
    return std::nullopt;
}

std::string rounded(Milliseconds wait) {
    if (wait < Milliseconds{1000}) {
        return "<1s";
    }
    const auto to = [&](long long unit) { return (wait.count() + unit / 2) / unit * unit; };
    const long long seconds = to(1'000);
    return format_duration(Milliseconds{seconds < 60'000 ? seconds : to(60'000)});
}

std::string about(Milliseconds wait) {
    return wait < Milliseconds{1000} ? "less than a second" : "about " + rounded(wait);
}

std::string estimate_text(const HoldStats& stats, std::optional<Milliseconds> wait) {
    if (stats.median && wait) {
        return fmt::format("{} (median hold {} over the last {})", about(*wait),
                           format_duration(*stats.median), stats.holds);
    }
    if (stats.median) {
        return "no estimate while paused";
    }
    const std::string where =
        stats.whole ? "the history" : fmt::format("its last {} events", k_estimate_scan);
    return stats.holds == 0 ? fmt::format("no estimate yet (no holds in {})", where)
                            : fmt::format("no estimate yet ({} hold{} in {})", stats.holds,
                                          stats.holds == 1 ? "" : "s", where);
}

} // namespace redsem

#include "semaphore/wait_estimate.hpp"

#include "semaphore/history.hpp"
#include "util/errors.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace redsem {

HoldStats hold_stats(std::vector<Milliseconds> holds) {
    HoldStats stats{holds.size(), std::nullopt};
    if (holds.size() >= k_estimate_min_holds) {
        const auto middle = holds.begin() + static_cast<std::ptrdiff_t>(holds.size() / 2);
        std::nth_element(holds.begin(), middle, holds.end());
        stats.median = *middle;
    }
    return stats;
}

void read_holds(Connection& connection, std::string_view prefix, SemaphoreView& view) {
    if (view.waiters.empty()) {
        return;
    }
    try {
        view.holds = hold_stats(
            recent_holds(connection, prefix, view.name, k_estimate_holds, k_estimate_scan));
    } catch (const Error&) {
        view.holds.reset(); // an estimate is said beside a wait or a listing: never ends it
    }
}

std::optional<Milliseconds> estimate_wait(const SemaphoreView& view, const HoldStats& stats,
                                          long long position) {
    if (!stats.median || !view.limit || *view.limit < 1) {
        return std::nullopt;
    }
    const long long now = view.server_now_ms;
    const long long hold = stats.median->count();
    const auto limit = static_cast<std::size_t>(*view.limit);
    // When each slot frees, by the server's clock: a free one now, a held one at its holder's
    // grant plus the median.
    std::vector<long long> frees;
    for (const HolderView& holder : view.holders) {
        if (holder.expired || !holder.record) {
            continue;
        }
        for (std::size_t i = 0; i < holder.record->slots.size() && frees.size() < limit; ++i) {
            frees.push_back(std::max(now, holder.record->since_ms + hold));
        }
    }
    frees.resize(limit, now);
    long long start = now;
    for (const WaiterView& waiter : view.waiters) {
        if (waiter.stale) {
            continue;
        }
        const long long wants = waiter.record ? waiter.record->wants : 1;
        const std::size_t takes =
            wants < 1 ? limit : std::min(limit, static_cast<std::size_t>(wants));
        std::sort(frees.begin(), frees.end());
        start = std::max(start, frees[takes - 1]);
        if (waiter.position == position) {
            return Milliseconds{start - now};
        }
        std::fill_n(frees.begin(), takes, start + hold);
    }
    return std::nullopt;
}

std::string rounded(Milliseconds wait) {
    if (wait < Milliseconds{1000}) {
        return "<1s";
    }
    const long long unit = wait < Milliseconds{60'000} ? 1'000 : 60'000;
    return format_duration(Milliseconds{(wait.count() + unit / 2) / unit * unit});
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
        return "";
    }
    return stats.holds == 0 ? "no estimate yet (no holds in the history)"
                            : fmt::format("no estimate yet ({} hold{} in the history)", stats.holds,
                                          stats.holds == 1 ? "" : "s");
}

} // namespace redsem

#pragma once

// How long a waiter may still wait, estimated from how long the semaphore's last holders held
// their slots (its history): what the waiting line, `status` and its JSON show.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "semaphore/inspect.hpp"
#include "util/duration.hpp"

namespace redsem {

// Holds the estimate is drawn from, and the fewest it needs.
inline constexpr std::size_t k_estimate_holds = 20;
inline constexpr std::size_t k_estimate_min_holds = 3;
// History entries read back at most to find them: a semaphore of many skips and timed-out
// waiters logs many events between two releases.
inline constexpr std::size_t k_estimate_scan = 2000;
// A longer held time is no release's (a history edited by hand).
inline constexpr Milliseconds k_longest_hold{400LL * 24 * 3600 * 1000};

// The median of `holds` (held times), when there are k_estimate_min_holds of them; `whole`:
// they are all the history has.
HoldStats hold_stats(std::vector<Milliseconds> holds, bool whole = true);

// Reads the last holds of `view`'s semaphore into view.holds when anybody waits for it (from
// its history, back k_estimate_scan entries at most). Throws Error as read_history() does.
// Changes nothing.
void read_holds(Connection& connection, std::string_view prefix, SemaphoreView& view);

// When the waiter at `position` (1: next) of `view` may get its slots, from now: each holder is
// taken to hold for the median from its grant (and one that held longer, to leave now), and
// each waiter ahead, in queue order, to take the first slots that free and hold them for the
// median (FIFO: none starts before the one ahead of it); nobody before a closed admission
// opens or a pause with an end ends. nullopt without a median, while paused until resumed, or
// for a position the view does not list.
std::optional<Milliseconds> estimate_wait(const SemaphoreView& view, const HoldStats& stats,
                                          long long position);

// The estimate in words, as the waiting line and `status` say it: "about 6m (median hold
// 2m10s over the last 20)", "no estimate yet (2 holds in the history)", or with a median but
// no `wait` (estimate_wait()), "no estimate while paused".
std::string estimate_text(const HoldStats& stats, std::optional<Milliseconds> wait);

// `wait` rounded as an estimate is: "<1s", "40s", "6m", "2h10m".
std::string rounded(Milliseconds wait);

// `wait` as an estimate is said: "less than a second", "about 40s", "about 6m".
std::string about(Milliseconds wait);

} // namespace redsem

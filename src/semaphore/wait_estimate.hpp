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
// History entries read to find them (a release is about one entry in three).
inline constexpr std::size_t k_estimate_scan = 100;

// The median of `holds` (held times), when there are k_estimate_min_holds of them.
HoldStats hold_stats(std::vector<Milliseconds> holds);

// Reads the last holds of `view`'s semaphore into view.holds when anybody waits for it (one
// round trip; its history); leaves it unset when they cannot be read. Changes nothing.
void read_holds(Connection& connection, std::string_view prefix, SemaphoreView& view);

// When the waiter at `position` (1: next) of `view` may get its slots, from now: each holder is
// taken to hold for the median from its grant (and one that held longer, to leave now), and
// each waiter ahead, in queue order, to take the first slots that free and hold them for the
// median (FIFO: none starts before the one ahead of it). nullopt without a median, or for a
// position the view does not list.
std::optional<Milliseconds> estimate_wait(const SemaphoreView& view, const HoldStats& stats,
                                          long long position);

// The estimate in words, as the waiting line and `status` say it: "about 6m (median hold
// 2m10s over the last 20)", or "no estimate yet (2 holds in the history)". `wait` as
// estimate_wait() gives it.
std::string estimate_text(const HoldStats& stats, std::optional<Milliseconds> wait);

// `wait` rounded as an estimate is: "<1s", "40s", "6m", "2h10m".
std::string rounded(Milliseconds wait);

// `wait` as an estimate is said: "less than a second", "about 40s", "about 6m".
std::string about(Milliseconds wait);

} // namespace redsem

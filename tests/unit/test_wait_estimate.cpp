#include "semaphore/wait_estimate.hpp"

#include <catch2/catch.hpp>

using namespace redsem;
using namespace std::chrono_literals;

namespace {

constexpr long long k_now = 1'800'000'000'000;

HolderView holder(long long since_ms, std::vector<long long> slots = {0}) {
    Record record;
    record.kind = Record::Kind::holder;
    record.slots = std::move(slots);
    record.slot = record.slots.front();
    record.since_ms = since_ms;
    return HolderView{.token = "h", .record = record, .deadline_ms = k_now + 60'000};
}

WaiterView waiter(long long position, long long wants = 1) {
    Record record;
    record.kind = Record::Kind::waiter;
    record.wants = wants;
    record.since_ms = k_now - 1'000;
    return WaiterView{.token = "w", .position = position, .record = record};
}

HoldStats minutes(long long median) {
    return HoldStats{.holds = 20, .median = Milliseconds{median * 60'000}};
}

} // namespace

TEST_CASE("hold_stats: the median of the holds, from three of them on") {
    CHECK_FALSE(hold_stats({}).median);
    CHECK(hold_stats({1s, 2s}).holds == 2);
    CHECK_FALSE(hold_stats({1s, 2s}).median);
    CHECK(hold_stats({5s, 1s, 3s}).median == Milliseconds{3s});
    CHECK(hold_stats({4s, 1s, 100s, 2s}).median == Milliseconds{3s}); // between the middle two
}

TEST_CASE("estimate_wait: one slot, each holder and waiter ahead holding for the median") {
    SemaphoreView view{.name = "x", .limit = 1, .server_now_ms = k_now};
    view.holders = {holder(k_now - 60'000)}; // has held 1m of a median of 2m
    view.waiters = {waiter(1), waiter(2), waiter(3)};
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{60'000});
    CHECK(estimate_wait(view, minutes(2), 2) == Milliseconds{180'000});
    CHECK(estimate_wait(view, minutes(2), 3) == Milliseconds{300'000});
    CHECK_FALSE(estimate_wait(view, minutes(2), 4));            // not in the queue
    CHECK_FALSE(estimate_wait(view, HoldStats{.holds = 2}, 1)); // too little history
}

TEST_CASE("estimate_wait: a holder past the median leaves now, free slots are taken at once") {
    SemaphoreView view{.name = "x", .limit = 2, .server_now_ms = k_now};
    view.holders = {holder(k_now - 10 * 60'000)};
    view.waiters = {waiter(1), waiter(2), waiter(3)};
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{0});
    CHECK(estimate_wait(view, minutes(2), 2) == Milliseconds{0});
    CHECK(estimate_wait(view, minutes(2), 3) == Milliseconds{120'000});
}

TEST_CASE("estimate_wait: a waiter of several slots waits for all of them, and FIFO holds") {
    SemaphoreView view{.name = "x", .limit = 3, .server_now_ms = k_now};
    view.holders = {holder(k_now - 60'000, {0}), holder(k_now, {1})}; // free at 1m and 2m
    view.waiters = {waiter(1, 0), waiter(2)};                         // --exclusive, then one
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{120'000});
    // Slot 2 is free now, but nobody behind the exclusive waiter goes first.
    CHECK(estimate_wait(view, minutes(2), 2) == Milliseconds{240'000});
}

TEST_CASE("estimate_wait: after a lowered limit, enough of the holders must leave first") {
    SemaphoreView view{.name = "x", .limit = 1, .server_now_ms = k_now};
    view.holders = {holder(k_now - 60'000, {0}), holder(k_now - 30'000, {1})};
    view.waiters = {waiter(1)};
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{90'000}); // the second leaves
}

TEST_CASE("estimate_wait: nobody before a pause with an end ends, or a closed admission opens") {
    SemaphoreView view{.name = "x", .limit = 1, .server_now_ms = k_now};
    view.waiters = {waiter(1)};
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{0});
    view.pause = Pause{.by = {}, .since_ms = k_now - 1'000, .until_ms = k_now + 45'000};
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{45'000});
    view.pause->until_ms = 0; // until resumed: nobody can tell
    CHECK_FALSE(estimate_wait(view, minutes(2), 1));
    view.pause.reset();
    view.admission.opens_at_ms = k_now + 20'000;
    CHECK(estimate_wait(view, minutes(2), 1) == Milliseconds{20'000});
}

TEST_CASE("estimate_text: the estimate and what it is drawn from, or why there is none") {
    CHECK(estimate_text(minutes(2), Milliseconds{6 * 60'000 + 20'000}) ==
          "about 6m (median hold 2m over the last 20)");
    CHECK(estimate_text(HoldStats{.holds = 0}, std::nullopt) ==
          "no estimate yet (no holds in the history)");
    CHECK(estimate_text(HoldStats{.holds = 1}, std::nullopt) ==
          "no estimate yet (1 hold in the history)");
    CHECK(estimate_text(HoldStats{.holds = 2}, std::nullopt) ==
          "no estimate yet (2 holds in the history)");
    CHECK(estimate_text(HoldStats{.holds = 2, .whole = false}, std::nullopt) ==
          "no estimate yet (2 holds in its last 2000 events)");
    CHECK(estimate_text(minutes(2), std::nullopt) == "no estimate while paused");
}

TEST_CASE("rounded and about: seconds under a minute, minutes above") {
    CHECK(rounded(Milliseconds{400}) == "<1s");
    CHECK(about(Milliseconds{400}) == "less than a second");
    CHECK(about(Milliseconds{40'400}) == "about 40s");
    CHECK(rounded(Milliseconds{59'500}) == "1m");
    CHECK(rounded(Milliseconds{130'000}) == "2m");
    CHECK(rounded(Milliseconds{150'000}) == "3m");
    CHECK(rounded(Milliseconds{2 * 3'600'000 + 10 * 60'000 + 20'000}) == "2h10m");
}

#include <catch2/catch.hpp>

#include "process/boot_timer.hpp"
#include "semaphore/semaphore.hpp"
#include "util/boot_clock.hpp"

#include <poll.h>
#include <thread>

using namespace redsem;
using namespace std::chrono_literals;

TEST_CASE("the boot clock advances with the monotonic clock") {
    const auto boot_before = BootClock::now();
    const auto steady_before = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(20ms);
    const auto boot_elapsed = BootClock::now() - boot_before;
    const auto steady_elapsed = std::chrono::steady_clock::now() - steady_before;
    CHECK(boot_elapsed >= 20ms);
    // Without a suspend in between, both count the same time (within scheduling noise).
    CHECK(boot_elapsed - steady_elapsed < 5ms);
    CHECK(steady_elapsed - boot_elapsed < 5ms);
}

TEST_CASE("a boot timer fires at its time, not before, and at once for a time passed") {
    BootTimer timer;
    pollfd fd{timer.fd(), POLLIN, 0};
    timer.arm(BootClock::now() + 200ms);
    CHECK(poll(&fd, 1, 0) == 0); // not yet
    const auto armed = BootClock::now();
    REQUIRE(poll(&fd, 1, 5000) == 1);
    CHECK(BootClock::now() - armed >= 150ms);
    timer.drain();
    CHECK(poll(&fd, 1, 0) == 0); // drained
    timer.arm(BootClock::now() - 1s);
    CHECK(poll(&fd, 1, 1000) == 1);
    timer.drain();
    timer.arm(BootClock::now() + 50ms);
    timer.disarm();
    CHECK(poll(&fd, 1, 150) == 0);
}

TEST_CASE("a lease is trusted until its end less the safety margin, on the boot clock") {
    Lease lease;
    lease.ttl = 8s;
    lease.local_start = BootClock::now();
    lease.server_now_ms = 1'000'000;
    lease.deadline_ms = 1'008'000;
    CHECK(Lease::safety_margin(8s) == 2s);    // at most 2s
    CHECK(Lease::safety_margin(1s) == 250ms); // a quarter of the ttl
    CHECK(lease.ends_by() - lease.local_start == 8s);
    CHECK(lease.valid_until() - lease.local_start == 6s);
    // A grant timed from an older acquire: the server's clock ran on since.
    lease.deadline_ms = 1'000'500;
    CHECK(lease.valid_until() < lease.local_start);
}

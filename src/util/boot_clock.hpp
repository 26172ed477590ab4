#pragma once

#include <chrono>
#include <ctime>

namespace redsem {

// The clock that times leases locally: CLOCK_BOOTTIME, which, unlike CLOCK_MONOTONIC
// (std::chrono::steady_clock), keeps counting while the machine is suspended. A holder that
// was asleep longer than its lease must see the lease as over when it wakes.
struct BootClock {
    using duration = std::chrono::nanoseconds;
    using rep = duration::rep;
    using period = duration::period;
    using time_point = std::chrono::time_point<BootClock>;
    static constexpr bool is_steady = true;

    static time_point now() noexcept {
        timespec now{};
        clock_gettime(CLOCK_BOOTTIME, &now);
        return time_point(std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec));
    }
};

} // namespace redsem

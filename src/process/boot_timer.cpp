#include "process/boot_timer.hpp"

#include "util/errors.hpp"

#include <algorithm>
#include <cstdint>
#include <sys/timerfd.h>
#include <unistd.h>

namespace redsem {

BootTimer::BootTimer() : m_fd(timerfd_create(CLOCK_BOOTTIME, TFD_CLOEXEC | TFD_NONBLOCK)) {
    if (m_fd < 0) {
        throw InternalError("cannot create a CLOCK_BOOTTIME timer");
    }
}

BootTimer::~BootTimer() {
    close(m_fd);
}

void BootTimer::arm(BootClock::time_point when) {
    // Relative, not TFD_TIMER_ABSTIME: a relative CLOCK_BOOTTIME timer counts a suspend just
    // the same, and time shims such as libfaketime shift absolute times (an hour off, or
    // EINVAL) even when told to leave the monotonic clocks alone. A zero it_value would disarm
    // the timer: a time already passed fires at once instead.
    const long long ns = std::max<long long>((when - BootClock::now()).count(), 1);
    itimerspec spec{};
    spec.it_value.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    if (timerfd_settime(m_fd, 0, &spec, nullptr) != 0) {
        throw InternalError("cannot arm a CLOCK_BOOTTIME timer");
    }
}

void BootTimer::disarm() {
    const itimerspec off{};
    timerfd_settime(m_fd, 0, &off, nullptr);
}

void BootTimer::drain() noexcept {
    std::uint64_t expirations = 0;
    [[maybe_unused]] const ssize_t ignored = read(m_fd, &expirations, sizeof(expirations));
}

} // namespace redsem

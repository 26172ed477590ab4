#pragma once

#include "util/boot_clock.hpp"

namespace redsem {

// A timer on the BootClock whose fd becomes readable at the armed time, so a poll()-based
// wait wakes at a lease deadline even when the machine was suspended in between (poll's own
// timeout does not count a suspend).
class BootTimer {
public:
    BootTimer();
    ~BootTimer();
    BootTimer(const BootTimer&) = delete;
    BootTimer& operator=(const BootTimer&) = delete;

    // Fires at `when` (at once if it has passed); replaces any earlier arming.
    void arm(BootClock::time_point when);
    void disarm();
    // Readable once fired; drain() before arming again.
    int fd() const noexcept { return m_fd; }
    void drain() noexcept;

private:
    int m_fd = -1;
};

} // namespace redsem

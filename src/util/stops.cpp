#include "util/stops.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>

namespace redsem {

namespace {

// Nanoseconds of BootClock; written by the handler only (clock_gettime is async-signal-safe).
std::atomic<BootClock::rep> g_continued_at{0};
static_assert(std::atomic<BootClock::rep>::is_always_lock_free);

extern "C" void on_continued(int) {
    const int saved_errno = errno;
    g_continued_at.store(BootClock::now().time_since_epoch().count(), std::memory_order_relaxed);
    errno = saved_errno;
}

} // namespace

void watch_stops() {
    struct sigaction action {};
    action.sa_handler = on_continued;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGCONT, &action, nullptr);
}

BootClock::time_point last_continued() noexcept {
    return BootClock::time_point(
        BootClock::duration(g_continued_at.load(std::memory_order_relaxed)));
}

} // namespace redsem

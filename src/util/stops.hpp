#pragma once

#include "util/boot_clock.hpp"

namespace redsem {

// When this process was stopped (SIGSTOP, Ctrl-Z, a debugger) and continued, so that a loop
// that times an outage by the clock can leave out a stop it could not see: one that came in
// the middle of a Redis call rather than in a sleep between calls (RetryPolicy).
//
// watch_stops() catches SIGCONT for the rest of the process's life (SA_RESTART; a poll()
// under way returns EINTR, as for any caught signal), and last_continued() tells when it last
// came: the time point zero when it never did, or when nothing watches.
void watch_stops();
BootClock::time_point last_continued() noexcept;

} // namespace redsem

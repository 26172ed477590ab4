#pragma once

#include <csignal>
#include <functional>
#include <optional>
#include <string>

#include "process/child.hpp"
#include "process/heartbeat.hpp"
#include "process/signal_watch.hpp"

namespace redsem {

// Signals that redsem passes on to the child's process group.
inline constexpr int k_forwarded_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// run --kill-after without the option.
inline constexpr Milliseconds k_default_kill_after{10'000};

struct SuperviseOptions {
    bool stop_on_lost = true;                        // --on-lost term (else ignore)
    Milliseconds kill_after = k_default_kill_after;  // SIGKILL this long after SIGTERM, or sooner
    std::function<void(const std::string&)> on_lost; // told why, once, when the lease is lost
    // --max-run: when the command has run for long enough, its group gets SIGTERM, and
    // SIGKILL after kill_after; on_timeout is called then, once.
    std::optional<BootClock::time_point> run_until{};
    std::function<void()> on_timeout;
};

struct SupervisedExit {
    ChildExit child;
    bool lease_lost = false;
    // The lease was found lost only after the child had ended: on_lost was not called, and
    // the child may have run past the lease (redsem was stopped, or starved of CPU).
    bool lost_after_end = false;
    bool timed_out = false; // stopped at run_until (--max-run)
};

// Waits for `child` to end while `heartbeat` keeps the lease alive (starting a heartbeat made
// with Start::when_due when its first renewal is due). Signals caught by
// `signals` (which must include SIGCHLD) are passed on to the child's process group. When
// the lease is lost (a renewal says so, or none was confirmed in time) and stop_on_lost is
// set, the child's group gets SIGTERM at once and SIGKILL after kill_after, but never later
// than half-way through the lease's safety margin: the group is dead before the server can
// hand the slot to anyone else. When the child's guard is killed while redsem lives, nothing
// would kill the group should redsem die too: the group gets SIGKILL, with a line on stderr.
// At run_until (if set) the group is stopped as after a lost lease, whatever stop_on_lost says.
SupervisedExit supervise(ChildProcess& child, Heartbeat& heartbeat, SignalWatch& signals,
                         const SuperviseOptions& options);

} // namespace redsem

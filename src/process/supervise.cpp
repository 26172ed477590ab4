#include "process/supervise.hpp"

#include "process/boot_timer.hpp"
#include "util/duration.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fmt/format.h>
#include <poll.h>

namespace redsem {

namespace {

bool is_forwarded(int signal) {
    return std::find(std::begin(k_forwarded_signals), std::end(k_forwarded_signals), signal) !=
           std::end(k_forwarded_signals);
}

// When the child must be killed at the latest after its lease was lost: half-way through the
// safety margin, so that it is dead before the server can hand the slot on.
BootClock::time_point kill_deadline(const Heartbeat::Status& status) {
    return status.valid_until + (status.ends_by - status.valid_until) / 2;
}

} // namespace

SupervisedExit supervise(ChildProcess& child, Heartbeat& heartbeat, SignalWatch& signals,
                         const SuperviseOptions& options) {
    bool lost = false;
    bool guard_gone = false;
    bool timed_out = false;
    constexpr BootClock::time_point k_never = BootClock::time_point::max();
    BootClock::time_point kill_at = k_never; // when to escalate to SIGKILL
    BootTimer timer;
    for (;;) {
        const std::optional<ChildExit> exit = child.poll();
        const Heartbeat::Status status = heartbeat.status();
        const auto now = BootClock::now();
        if (exit) {
            // redsem itself may have been stopped or starved past the lease while the command
            // ran to its end, perhaps beside the next holder: the caller must hear of it.
            const bool lost_unseen = !lost && (status.lost || now >= status.valid_until);
            return SupervisedExit{*exit, lost || lost_unseen, lost_unseen, timed_out};
        }
        if (!guard_gone && child.guard_ended()) {
            // Should redsem die now, nothing would kill the command's group: it dies with its
            // guard instead, and the slot is released as after any end.
            guard_gone = true;
            std::fprintf(stderr,
                         "redsem: the guard of the command's process group (pid %d) was killed; "
                         "killing the command with it\n",
                         static_cast<int>(child.group()));
            child.signal_group(SIGKILL);
        }
        if (!lost && (status.lost || now >= status.valid_until)) {
            if (const std::optional<ChildExit> ended = child.poll()) {
                // It ended in the meantime: redsem was stopped after it looked above, and the
                // command ended while the lease ran out. It was not stopped for the loss.
                return SupervisedExit{*ended, true, true, timed_out};
            }
            lost = true;
            std::string reason =
                status.lost
                    ? status.last_error
                    : fmt::format("no renewal was confirmed in time{}",
                                  status.last_error.empty() ? "" : " (" + status.last_error + ")");
            // The child first: the heartbeat thread may be stuck waiting for Redis.
            if (options.stop_on_lost) {
                child.signal_group(SIGTERM);
                kill_at = std::min(now + options.kill_after, kill_deadline(status));
            }
            heartbeat.request_stop();
            if (options.on_lost) {
                options.on_lost(reason);
            }
        }
        if (!timed_out && options.run_until && now >= *options.run_until) {
            timed_out = true;
            child.signal_group(SIGTERM);
            kill_at = std::min(kill_at, now + options.kill_after);
            if (options.on_timeout) {
                options.on_timeout();
            }
        }
        if (now >= kill_at) {
            child.signal_group(SIGKILL);
            kill_at = k_never;
        }
        if (!lost) {
            heartbeat.start_if_due();
        }

        // Sleep until something happens: a signal (SIGCHLD included), a heartbeat event, the
        // local end of the lease, the time to start the heartbeat, the --max-run deadline, or
        // the time to escalate to SIGKILL. The timer counts a suspend of the machine; poll()'s
        // own timeout would not.
        const BootClock::time_point wake =
            std::min({lost ? k_never : status.valid_until,
                      lost ? k_never : heartbeat.start_due().value_or(k_never),
                      timed_out ? k_never : options.run_until.value_or(k_never), kill_at});
        if (wake == k_never) {
            timer.disarm();
        } else {
            timer.arm(wake);
        }
        pollfd fds[3] = {
            {signals.fd(), POLLIN, 0}, {timer.fd(), POLLIN, 0}, {heartbeat.fd(), POLLIN, 0}};
        ::poll(fds, lost ? 2 : 3, -1);
        timer.drain();
        heartbeat.drain();
        for (const int signal : signals.take_pending()) {
            if (is_forwarded(signal)) {
                child.signal_group(signal);
            }
        }
    }
}

} // namespace redsem

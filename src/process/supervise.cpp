#include "process/supervise.hpp"

#include "util/duration.hpp"

#include <algorithm>
#include <csignal>
#include <fmt/format.h>
#include <poll.h>

namespace redsem {

namespace {

using Clock = std::chrono::steady_clock;

bool is_forwarded(int signal) {
    return std::find(std::begin(k_forwarded_signals), std::end(k_forwarded_signals), signal) !=
           std::end(k_forwarded_signals);
}

} // namespace

SupervisedExit supervise(ChildProcess& child, Heartbeat& heartbeat, SignalWatch& signals,
                         const SuperviseOptions& options) {
    bool lost = false;
    constexpr Clock::time_point k_never = Clock::time_point::max();
    Clock::time_point kill_at = k_never; // when to escalate to SIGKILL
    for (;;) {
        if (auto exit = child.poll()) {
            return SupervisedExit{*exit, lost};
        }
        const Heartbeat::Status status = heartbeat.status();
        const auto now = Clock::now();
        if (!lost && (status.lost || now >= status.valid_until)) {
            lost = true;
            std::string reason =
                status.lost
                    ? status.last_error
                    : fmt::format("no renewal was confirmed in time{}",
                                  status.last_error.empty() ? "" : " (" + status.last_error + ")");
            // The child first: the heartbeat thread may be stuck waiting for Redis.
            if (options.stop_on_lost) {
                child.signal_group(SIGTERM);
                kill_at = now + options.kill_after;
            }
            heartbeat.request_stop();
            if (options.on_lost) {
                options.on_lost(reason);
            }
        }
        if (now >= kill_at) {
            child.signal_group(SIGKILL);
            kill_at = k_never;
        }

        // Sleep until something happens: a signal (SIGCHLD included), a heartbeat event, the
        // local end of the lease, or the time to escalate to SIGKILL.
        Clock::time_point wake = lost ? k_never : status.valid_until;
        wake = std::min(wake, kill_at);
        // At most a minute per sleep, so a long ttl or --kill-after cannot overflow poll().
        constexpr long long k_longest_sleep_ms = 60'000;
        long long timeout_ms = k_longest_sleep_ms;
        if (wake != k_never) {
            timeout_ms = std::clamp<long long>(std::chrono::ceil<Milliseconds>(wake - now).count(),
                                               0, k_longest_sleep_ms);
        }
        const int timeout = static_cast<int>(timeout_ms);
        pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {heartbeat.fd(), POLLIN, 0}};
        ::poll(fds, lost ? 1 : 2, timeout);
        heartbeat.drain();
        for (const int signal : signals.take_pending()) {
            if (is_forwarded(signal)) {
                child.signal_group(signal);
            }
        }
    }
}

} // namespace redsem

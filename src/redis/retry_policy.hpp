#pragma once

#include <algorithm>
#include <chrono>
#include <optional>

#include "util/boot_clock.hpp"
#include "util/errors.hpp"
#include "util/stops.hpp"

namespace redsem {

// The one answer every retry loop asks for after a failed Redis call: retry or not, after how
// long, and until when. (Loops that treat every failure alike say why where they use it.)
//
// Worth another try: Redis there but not serving now (Transience::transient: LOADING, BUSY,
// TRYAGAIN, CLUSTERDOWN, MASTERDOWN, a failover under way); a connection that broke after the
// request was sent (broken: it may have run, and every redsem request is safe to send again
// with the same token); Redis unreachable, once this loop had reached it (an answer, or either
// failure above: a restart, a blip), never when it never did (a wrong address has nothing to
// wait for). Never a refusal (permanent: a password, NOPERM, a bug): the answer would be the
// same.
//
// Delays double from the schedule's first to its last. A loop retries until a failure comes
// after its window of unbroken failure, counted from the first failure after the last answer
// (so the last try may come up to one delay after the window: a restart that takes a little
// longer than the window is still ridden out). A loop that finds it did not run for a while
// (a sleep that ended long after its time: SIGSTOP, a suspended machine) takes that time out
// of the window (not_running()): the outage it finds on waking is given its window. So does
// a process stopped and continued since the failures began (last_continued(): a stop in the
// middle of a try, which no sleep sees), once per streak of failures: a SIGCONT that followed
// no stop (anybody may send one) must not keep a loop retrying for ever.
class RetryPolicy {
public:
    using Milliseconds = std::chrono::milliseconds;
    using Clock = BootClock; // counts a suspended machine too: leases do

    struct Schedule {
        Milliseconds first;
        Milliseconds last;
    };
    // A Redis call that failed: a restart takes a second or more.
    static constexpr Schedule k_calls{Milliseconds{100}, Milliseconds{1'000}};
    // A cluster that said TRYAGAIN or CLUSTERDOWN: a slot migration step or a failover's
    // election, which take milliseconds to seconds.
    static constexpr Schedule k_cluster_pauses{Milliseconds{10}, Milliseconds{500}};
    static constexpr Milliseconds k_unlimited = Milliseconds::max();

    explicit RetryPolicy(Milliseconds window = k_unlimited, Schedule schedule = k_calls,
                         bool reached_before = false)
        : m_window(window), m_schedule(schedule), m_delay(schedule.first),
          m_reached(reached_before) {}

    static bool worth_retrying(Transience transience, bool reached_before) {
        switch (transience) {
        case Transience::transient:
        case Transience::broken:
            return true;
        case Transience::unreachable:
            return reached_before;
        case Transience::permanent:
            break;
        }
        return false;
    }

    // Redis answered: the window counts from the next failure, and delays start over.
    void answered() {
        m_reached = true;
        m_failing = false;
        m_continuation_counted = false;
        m_delay = m_schedule.first;
    }

    // This loop did not run for `idle` between failures (a stopped process): the window does
    // not count it.
    void not_running(Clock::duration idle) {
        if (m_failing && idle > Clock::duration::zero()) {
            m_failing_since += idle;
        }
    }

    // The window may change between failures (a connection learns that it talks to a cluster,
    // whose failovers take longer).
    void set_window(Milliseconds window) { m_window = window; }

    // A time after which no failure is retried, whatever the window: a caller's own bound
    // (acquire -w). The last delay before it ends at it, for one last try.
    void set_deadline(std::optional<Clock::time_point> deadline) { m_deadline = deadline; }

    // After a failure of `transience`: how long to wait before trying again, or nullopt when
    // the failure stands.
    std::optional<Milliseconds> after(Transience transience) {
        const auto now = Clock::now();
        if (!m_failing) {
            m_failing = true;
            m_failing_since = now;
        }
        if (const auto continued = std::min(last_continued(), now);
            !m_continuation_counted && continued > m_failing_since) {
            m_failing_since = continued;
            m_continuation_counted = true;
        }
        if (!worth_retrying(transience, m_reached)) {
            return std::nullopt;
        }
        // A server that closed an accepted connection, or said it is loading, is at this
        // address: the restart that follows is ridden out like one after an answer.
        m_reached = true;
        if (m_window != k_unlimited && now - m_failing_since >= m_window) {
            return std::nullopt;
        }
        if (m_deadline && now >= *m_deadline) {
            return std::nullopt;
        }
        const Milliseconds delay = next_delay();
        return m_deadline ? std::min(delay, std::chrono::ceil<Milliseconds>(*m_deadline - now))
                          : delay;
    }
    std::optional<Milliseconds> after(const Error& error) { return after(error.transience()); }

    // The next delay of the schedule, for a loop that retries every failure (it says why).
    Milliseconds next_delay() {
        const Milliseconds delay = m_delay;
        m_delay = std::min(m_delay * 2, m_schedule.last);
        return delay;
    }

private:
    Milliseconds m_window;
    Schedule m_schedule;
    Milliseconds m_delay;
    bool m_reached;         // an answer, or a failure that only a server at this address gives
    bool m_failing = false; // since m_failing_since, without an answer
    Clock::time_point m_failing_since{};
    bool m_continuation_counted = false; // this streak's window was moved to a continuation
    std::optional<Clock::time_point> m_deadline;
};

} // namespace redsem

#include "process/heartbeat.hpp"

#include "redis/retry_policy.hpp"
#include "util/errors.hpp"

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>

namespace redsem {

namespace {

// However long the lease, a holder whose lease a Redis forgot (a restart without its data, a
// failover) must have stopped its command before the loss grace (k_default_loss_grace, 60 s)
// lets anybody else in. It renews at least every 20 s, so it finds out at its next renewal;
// and one whose renewals all fail (a Redis loading its data set for minutes) treats the lease
// as lost after 30 s: with --kill-after (10 s), well inside the grace.
constexpr Milliseconds k_max_renew_interval{20'000};
constexpr Milliseconds k_max_unconfirmed{30'000};

Milliseconds renew_every(Milliseconds ttl) {
    return std::clamp(ttl / 3, Milliseconds{1}, k_max_renew_interval);
}

// Until when a lease confirmed (by a grant or a renewal sent) at `confirmed` for `ttl` counts
// as valid here: ttl less the safety margin, and never more than k_max_unconfirmed.
BootClock::time_point valid_until(BootClock::time_point confirmed, Milliseconds ttl) {
    return confirmed + std::min(ttl - Lease::safety_margin(ttl), k_max_unconfirmed);
}

} // namespace

Heartbeat::Heartbeat(Connection& connection, std::string prefix, std::string name,
                     const Lease& lease, Start start, long long replicas)
    : m_connection(connection), m_prefix(std::move(prefix)), m_name(std::move(name)),
      m_token(lease.token), m_ttl(lease.ttl), m_granted_ms(lease.deadline_ms - lease.ttl.count()),
      m_replicas(replicas) {
    // The lease's own end, mapped onto the local clock (for a slot handed over, from the grant,
    // which may have come long after the waiter last asked), and never more than
    // k_max_unconfirmed after the server last answered this process.
    m_status.valid_until = std::min(lease.valid_until(), lease.local_start + k_max_unconfirmed);
    m_status.ends_by = lease.ends_by();
    if (pipe2(m_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw InternalError("cannot create the heartbeat pipe");
    }
    if (start == Start::now) {
        this->start(false);
    } else {
        m_start_due = lease.local_start + renew_every(m_ttl);
    }
}

void Heartbeat::start(bool renew_at_once) {
    m_start_due.reset();
    m_thread = std::thread([this, renew_at_once] { run(renew_at_once); });
}

std::optional<BootClock::time_point> Heartbeat::start_due() const {
    return m_start_due;
}

void Heartbeat::start_if_due() {
    if (m_start_due && BootClock::now() >= *m_start_due) {
        start(true);
    }
}

Heartbeat::~Heartbeat() {
    stop();
    close(m_pipe[0]);
    close(m_pipe[1]);
}

void Heartbeat::request_stop() {
    {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
    }
    m_wake.notify_all();
}

void Heartbeat::stop() {
    request_stop();
    if (m_thread.joinable()) {
        m_thread.join();
    }
}

Heartbeat::Status Heartbeat::status() const {
    std::lock_guard lock(m_mutex);
    return m_status;
}

void Heartbeat::notify() noexcept {
    const char byte = 1;
    [[maybe_unused]] const ssize_t ignored = write(m_pipe[1], &byte, 1);
}

void Heartbeat::drain() noexcept {
    char bytes[64];
    while (read(m_pipe[0], bytes, sizeof(bytes)) > 0) {
    }
}

void Heartbeat::run(bool renew_at_once) {
    // Signals are the main thread's business; here they would only interrupt Redis I/O.
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    Semaphore semaphore(m_connection, m_prefix, m_name);
    // Renewals are scheduled on the monotonic clock (what condition variables wait on); the
    // lease itself is timed on the BootClock.
    using Clock = std::chrono::steady_clock;
    const Milliseconds every = renew_every(m_ttl);
    Clock::time_point next = renew_at_once ? Clock::now() : Clock::now() + every;
    // Every failed renewal is tried again, whatever the error, on the policy's schedule: the
    // lease's own end (valid_until, watched by the owner) decides when the slot counts as lost,
    // and giving up sooner would only stop the command sooner.
    RetryPolicy retry;
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_wake.wait_until(lock, next, [this] { return m_stopping; });
        if (m_stopping) {
            return;
        }
        lock.unlock();
        const auto scheduled_from = Clock::now();
        const auto sent = BootClock::now();
        std::optional<Renewal> renewal;
        bool gone = false;
        std::string error;
        LeaseLoss loss;
        try {
            renewal = semaphore.renew(m_token, m_ttl, m_replicas, false, &loss);
            gone = !renewal;
        } catch (const NotHeldError&) {
            // Queued, not holding: a Redis that lost the grant but kept the queue entry (a
            // restart, a failback). The slot is gone as surely as when nothing is found.
            gone = true;
        } catch (const std::exception& failure) {
            error = failure.what();
        }
        lock.lock();
        if (m_stopping) {
            return;
        }
        if (renewal) {
            // The server set deadline = its now + ttl, and its now came after `sent`.
            m_status.ends_by = sent + m_ttl;
            m_status.valid_until = valid_until(sent, m_ttl);
            m_status.last_error.clear();
            next = scheduled_from + every;
            retry.answered();
        } else if (gone) {
            m_status.lost = true;
            m_status.last_error = loss.why.empty()
                                      ? "the server says this token no longer holds a slot"
                                      : loss.describe(m_granted_ms);
            notify();
            return;
        } else {
            m_status.last_error = error;
            next = Clock::now() + retry.next_delay();
        }
        notify();
    }
}

} // namespace redsem

#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "redis/connection.hpp"
#include "semaphore/semaphore.hpp"

namespace redsem {

// Keeps a lease alive from a thread of its own: renews it every ttl/3 (at most every 20 s),
// and after a failed renewal retries with backoff (reconnecting) for as long as the lease may
// still be valid.
// While the thread runs, the connection it was given is its own: the caller uses it again
// only after stop(). `run` hands over the connection it acquired on, so that a renewal costs
// no new connection (nor a second TLS handshake) at the time the lease needs it.
//
// It also keeps a local, conservative view of the lease on the BootClock (which counts a
// suspend): valid_until is the time by which the lease must be treated as lost, ttl minus a
// safety margin (at most 30 s: see heartbeat.cpp) after the send time of the last confirmed
// renewal, and ends_by the time by which the server may hand the slot on. The caller acts on
// them even if this thread is stuck in a renewal that gets no answer.
class Heartbeat {
public:
    struct Status {
        bool lost = false; // a renewal answered that the token holds nothing
        BootClock::time_point valid_until;
        BootClock::time_point ends_by;
        std::string last_error; // the last renewal failure, if any, for messages
    };

    enum class Start {
        now,      // start the thread at once
        when_due, // only when the first renewal is due (see start_if_due())
    };

    // Starts the thread now, or leaves it to start_if_due(): a command that ends before its
    // lease needs renewing then costs no thread. `connection` must outlive this object.
    // With `replicas`, a renewal counts only once that many replicas have it (--replicas).
    Heartbeat(Connection& connection, std::string prefix, std::string name, const Lease& lease,
              Start start = Start::now, long long replicas = 0);
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    // Readable whenever the status changed (drain it with drain()).
    int fd() const noexcept { return m_pipe[0]; }
    void drain() noexcept;
    Status status() const;
    // With Start::when_due, the time at which the first renewal is due (ttl/3 after the lease
    // was granted); nullopt once the thread runs.
    std::optional<BootClock::time_point> start_due() const;
    // Starts the thread once start_due() has come, renewing at once. Call it from the thread
    // that owns this object.
    void start_if_due();
    // Asks the thread to stop renewing; returns at once (it may be waiting for a reply).
    void request_stop();
    // Stops renewing and joins the thread.
    void stop();

private:
    void start(bool renew_at_once);
    void run(bool renew_at_once);
    void notify() noexcept;

    Connection& m_connection;
    std::string m_prefix;
    std::string m_name;
    std::string m_token;
    Milliseconds m_ttl;
    long long m_granted_ms; // the server's time at the grant (or the renewal that confirmed it)
    long long m_replicas;
    std::optional<BootClock::time_point> m_start_due; // set while the thread waits to start

    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stopping = false;
    Status m_status;
    int m_pipe[2] = {-1, -1};
    std::thread m_thread;
};

} // namespace redsem

#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "redis/connection.hpp"
#include "semaphore/semaphore.hpp"

namespace redsem {

// Keeps a lease alive from a thread of its own, on a connection of its own: renews it every
// ttl/3, and after a failed renewal retries with backoff (reconnecting) for as long as the
// lease may still be valid.
//
// It also keeps a local, conservative view of the lease: valid_until() is the local monotonic
// time by which the lease must be treated as lost, ttl minus a safety margin after the send
// time of the last confirmed renewal. The caller acts on it even if this thread is stuck
// in a renewal that gets no answer.
class Heartbeat {
public:
    using Clock = std::chrono::steady_clock;

    struct Status {
        bool lost = false; // a renewal answered that the token holds nothing
        Clock::time_point valid_until;
        std::string last_error; // the last renewal failure, if any, for messages
    };

    // `granted_by` is a local time no later than the server's grant (Lease::local_start).
    // Starts the thread.
    Heartbeat(ConnectOptions connect, std::string prefix, std::string name, const Lease& lease,
              Clock::time_point granted_by);
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

    // Readable whenever the status changed (drain it with drain()).
    int fd() const noexcept { return m_pipe[0]; }
    void drain() noexcept;
    Status status() const;
    // Asks the thread to stop renewing; returns at once (it may be waiting for a reply).
    void request_stop();
    // Stops renewing and joins the thread.
    void stop();

    // How far ahead of the lease's end the holder gives up: a quarter of the ttl, at most 2s.
    static Milliseconds safety_margin(Milliseconds ttl);

private:
    void run();
    void notify() noexcept;

    ConnectOptions m_connect;
    std::string m_prefix;
    std::string m_name;
    std::string m_token;
    Milliseconds m_ttl;

    mutable std::mutex m_mutex;
    std::condition_variable m_wake;
    bool m_stopping = false;
    Status m_status;
    int m_pipe[2] = {-1, -1};
    std::thread m_thread;
};

} // namespace redsem

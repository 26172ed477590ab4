#pragma once

// The socket under every transport (src/redis/ only): a descriptor owned by RAII, deadlines
// by poll(), and connecting to a URL's address or Unix socket. Plain TCP and Unix transports
// are the socket itself; TLS runs over it (tls_transport.cpp).

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unistd.h>
#include <utility>

#include "redis/transport.hpp"

namespace redsem::net {

using Clock = Transport::Clock;
using Milliseconds = std::chrono::milliseconds;

class FileDescriptor {
public:
    explicit FileDescriptor(int fd = -1) : m_fd(fd) {}
    ~FileDescriptor() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    FileDescriptor(FileDescriptor&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    FileDescriptor& operator=(FileDescriptor&& other) noexcept {
        std::swap(m_fd, other.m_fd);
        return *this;
    }
    int get() const noexcept { return m_fd; }

private:
    int m_fd;
};

enum class Ready { ready, timed_out, interrupted };

// Waits until `fd` has one of `events`, or `interrupt_fd` (>= 0) is readable, or `deadline`
// passed. Past the deadline it still looks once: a process resumed after a stop (SIGSTOP, a
// paused VM) finds what came meanwhile rather than calling it lost.
Ready wait_for(int fd, short events, Clock::time_point deadline, int interrupt_fd = -1);

// wait_for() on the way to a read: nullopt when the read may go ahead, else what read_some()
// returns instead.
std::optional<ReadResult> wait_to_read(int fd, short events, Clock::time_point deadline,
                                       int interrupt_fd);

// Throws ConnectionLost for `error` (an errno) met `during` ("while sending").
[[noreturn]] void lost(const std::string& where, std::string_view during, int error);

// A non-blocking, close-on-exec socket connected to `url` (TCP, or its Unix socket) by
// `deadline`. Throws UnavailableError when it cannot be, UsageError for a socket path too long.
FileDescriptor open_socket(const RedisUrl& url, Clock::time_point deadline,
                           Milliseconds connect_timeout);

// The transport of a plain TCP or Unix connection: the socket itself.
std::unique_ptr<Transport> plain_transport(FileDescriptor fd, std::string where);

} // namespace redsem::net

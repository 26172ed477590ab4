#include "redis/socket.hpp"

#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>

namespace redsem::net {

Ready wait_for(int fd, short events, Clock::time_point deadline, int interrupt_fd) {
    for (;;) {
        const auto left =
            std::max(Milliseconds{0}, std::chrono::ceil<Milliseconds>(deadline - Clock::now()));
        pollfd fds[2] = {{fd, events, 0}, {interrupt_fd, POLLIN, 0}};
        const int count = ::poll(fds, interrupt_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
        if (count < 0 && errno != EINTR) {
            return Ready::timed_out;
        }
        if (interrupt_fd >= 0 && (fds[1].revents & POLLIN) != 0) {
            return Ready::interrupted;
        }
        if (count > 0 && fds[0].revents != 0) {
            return Ready::ready; // POLLERR and POLLHUP too: the next I/O call tells what
        }
        if (left.count() == 0) {
            return Ready::timed_out;
        }
    }
}

std::optional<ReadResult> wait_to_read(int fd, short events, Clock::time_point deadline,
                                       int interrupt_fd) {
    switch (wait_for(fd, events, deadline, interrupt_fd)) {
    case Ready::timed_out:
        return ReadResult{ReadResult::Status::timed_out};
    case Ready::interrupted:
        return ReadResult{ReadResult::Status::interrupted};
    case Ready::ready:
        break;
    }
    return std::nullopt;
}

[[noreturn]] void lost(const std::string& where, std::string_view during, int error) {
    if (error == EPIPE || error == ECONNRESET) {
        throw ConnectionLost(fmt::format("Redis at {} closed the connection {}", where, during));
    }
    throw ConnectionLost(fmt::format("connection to Redis at {} failed {}: {}", where, during,
                                     std::strerror(error)));
}

namespace {

// Connects a non-blocking, close-on-exec socket to `address` by `deadline`. Returns the
// socket, or an invalid one with `error` set.
FileDescriptor connect_to(const sockaddr* address, socklen_t length, int family,
                          Clock::time_point deadline, int& error) {
    FileDescriptor fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (fd.get() < 0) {
        error = errno;
        return FileDescriptor();
    }
    if (::connect(fd.get(), address, length) != 0) {
        if (errno != EINPROGRESS && errno != EAGAIN) {
            error = errno;
            return FileDescriptor();
        }
        if (wait_for(fd.get(), POLLOUT, deadline) != Ready::ready) {
            error = ETIMEDOUT;
            return FileDescriptor();
        }
        socklen_t size = sizeof(error);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
            error = errno;
            return FileDescriptor();
        }
        if (error != 0) {
            return FileDescriptor();
        }
    }
    if (family != AF_UNIX) {
        const int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    return fd;
}

using Addresses = std::unique_ptr<addrinfo, void (*)(addrinfo*)>;

// getaddrinfo() has no timeout of its own, and a slow DNS server must not outlast the connect
// timeout: a name is looked up on a thread of its own, left to finish by itself (and free what
// it found) when `deadline` comes first. A numeric address needs no lookup, and no thread.
Addresses resolve(const RedisUrl& url, Clock::time_point deadline, Milliseconds connect_timeout) {
    const std::string where = url.describe();
    const std::string port = std::to_string(url.port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    addrinfo* found = nullptr;
    int status = ::getaddrinfo(url.host.c_str(), port.c_str(), &hints, &found);
    int error = errno;
    if (status == EAI_NONAME) {
        struct Lookup {
            std::mutex mutex;
            std::condition_variable done_cv;
            bool done = false;
            bool abandoned = false;
            int status = 0;
            int error = 0;
            addrinfo* found = nullptr;
        };
        auto lookup = std::make_shared<Lookup>();
        hints.ai_flags = 0;
        std::thread([lookup, host = url.host, port, hints] {
            addrinfo* result = nullptr;
            const int result_status = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
            const int result_error = errno;
            const std::lock_guard lock(lookup->mutex);
            if (lookup->abandoned) {
                if (result != nullptr) {
                    ::freeaddrinfo(result);
                }
                return;
            }
            lookup->done = true;
            lookup->status = result_status;
            lookup->error = result_error;
            lookup->found = result;
            lookup->done_cv.notify_one();
        }).detach();
        std::unique_lock lock(lookup->mutex);
        // The condition variable waits on the steady clock; `deadline` may be another's.
        const auto left = std::max(deadline - Clock::now(), Clock::duration{0});
        if (!lookup->done_cv.wait_for(lock, left, [&] { return lookup->done; })) {
            lookup->abandoned = true;
            throw UnavailableError(
                fmt::format("cannot connect to Redis at {}: looking up '{}' took longer than {} "
                            "(--connect-timeout; is DNS slow?)",
                            where, printable(url.host), format_duration(connect_timeout)));
        }
        status = lookup->status;
        error = lookup->error;
        found = lookup->found;
    }
    if (status != 0) {
        throw UnavailableError(
            fmt::format("cannot connect to Redis at {}: {}", where,
                        status == EAI_SYSTEM ? std::strerror(error) : ::gai_strerror(status)));
    }
    return Addresses(found, ::freeaddrinfo);
}

} // namespace

FileDescriptor open_socket(const RedisUrl& url, Clock::time_point deadline,
                           const Milliseconds connect_timeout) {
    const std::string where = url.describe();
    int error = 0;
    if (url.kind == RedisUrl::Kind::unix_socket) {
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        if (url.socket_path.size() >= sizeof(address.sun_path)) {
            throw UsageError(fmt::format("the socket path in {} is longer than {} bytes", where,
                                         sizeof(address.sun_path) - 1));
        }
        std::memcpy(address.sun_path, url.socket_path.c_str(), url.socket_path.size() + 1);
        FileDescriptor fd = connect_to(reinterpret_cast<const sockaddr*>(&address), sizeof(address),
                                       AF_UNIX, deadline, error);
        if (fd.get() >= 0) {
            return fd;
        }
    } else {
        const Addresses addresses = resolve(url, deadline, connect_timeout);
        for (const addrinfo* each = addresses.get(); each != nullptr; each = each->ai_next) {
            FileDescriptor fd =
                connect_to(each->ai_addr, each->ai_addrlen, each->ai_family, deadline, error);
            if (fd.get() >= 0) {
                return fd;
            }
        }
    }
    if (error == ETIMEDOUT) {
        throw UnavailableError(fmt::format("cannot connect to Redis at {}: no answer within {} "
                                           "(--connect-timeout)",
                                           where, format_duration(connect_timeout)));
    }
    throw UnavailableError(
        fmt::format("cannot connect to Redis at {}: {}", where, std::strerror(error)));
}

namespace {

class PlainTransport final : public Transport {
public:
    PlainTransport(FileDescriptor fd, std::string where)
        : m_fd(std::move(fd)), m_where(std::move(where)) {}

    void write_all(std::string_view data, Clock::time_point deadline) override {
        while (!data.empty()) {
            const ssize_t sent = ::send(m_fd.get(), data.data(), data.size(), MSG_NOSIGNAL);
            if (sent >= 0) {
                data.remove_prefix(static_cast<std::size_t>(sent));
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (wait_for(m_fd.get(), POLLOUT, deadline) != Ready::ready) {
                    throw ConnectionLost(
                        fmt::format("Redis at {} did not take the request in time", m_where));
                }
            } else if (errno != EINTR) {
                lost(m_where, "while sending", errno);
            }
        }
    }

    ReadResult read_some(char* buffer, std::size_t size, Clock::time_point deadline,
                         int interrupt_fd) override {
        for (;;) {
            if (auto early = wait_to_read(m_fd.get(), POLLIN, deadline, interrupt_fd)) {
                return *early;
            }
            const ssize_t got = ::recv(m_fd.get(), buffer, size, 0);
            if (got > 0) {
                return {ReadResult::Status::data, static_cast<std::size_t>(got)};
            }
            if (got == 0) {
                return {ReadResult::Status::closed};
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                lost(m_where, "while reading a reply", errno);
            }
        }
    }

private:
    FileDescriptor m_fd;
    std::string m_where;
};

} // namespace

std::unique_ptr<Transport> plain_transport(FileDescriptor fd, std::string where) {
    return std::make_unique<PlainTransport>(std::move(fd), std::move(where));
}

} // namespace redsem::net

#include "process/any_readable.hpp"

#include "util/errors.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <sys/epoll.h>
#include <unistd.h>

namespace redsem {

AnyReadable::AnyReadable(std::initializer_list<int> fds) : m_fd(epoll_create1(EPOLL_CLOEXEC)) {
    if (m_fd < 0) {
        throw InternalError(fmt::format("epoll_create1: {}", std::strerror(errno)));
    }
    for (const int fd : fds) {
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.fd = fd;
        if (epoll_ctl(m_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
            const int error = errno;
            close(m_fd);
            throw InternalError(fmt::format("epoll_ctl: {}", std::strerror(error)));
        }
    }
}

AnyReadable::~AnyReadable() {
    close(m_fd);
}

} // namespace redsem

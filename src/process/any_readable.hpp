#pragma once

#include <initializer_list>

namespace redsem {

// One descriptor that is readable while any of several is (an epoll set): lets a wait that
// knows one interrupt descriptor stop for a signal or for a process's exit.
class AnyReadable {
public:
    explicit AnyReadable(std::initializer_list<int> fds);
    ~AnyReadable();
    AnyReadable(const AnyReadable&) = delete;
    AnyReadable& operator=(const AnyReadable&) = delete;

    int fd() const noexcept { return m_fd; }

private:
    int m_fd;
};

} // namespace redsem

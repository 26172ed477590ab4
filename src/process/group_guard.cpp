#include "process/group_guard.hpp"

#include "util/errors.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redsem {

namespace {

// The guard's life, in the forked child: only async-signal-safe calls (redsem may have other
// threads). `lifeline` is the read end of the pipe.
[[noreturn]] void guard(int lifeline) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    for (int signal = 1; signal < NSIG; ++signal) {
        if (signal != SIGKILL && signal != SIGSTOP) {
            sigaction(signal, &ignore, nullptr);
        }
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // Nothing of redsem's: no Redis connection kept open, no pipe of a $(...) held.
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    }
    close_all_but({lifeline});
    char byte = 0;
    while (read(lifeline, &byte, 1) < 0 && errno == EINTR) {
    }
    kill(0, SIGKILL); // the whole group, this process last
    _exit(0);
}

} // namespace

void close_all_but(std::initializer_list<int> keep) {
    unsigned first = 3;
    for (const int fd : keep) {
        if (static_cast<unsigned>(fd) > first) {
            close_range(first, static_cast<unsigned>(fd) - 1, 0);
        }
        first = std::max(first, static_cast<unsigned>(fd) + 1);
    }
    close_range(first, ~0U, 0);
}

GroupGuard::GroupGuard() {
    int lifeline[2];
    if (pipe2(lifeline, O_CLOEXEC) != 0) {
        throw InternalError(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    }
    sigset_t all;
    sigset_t original;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &original);
    m_pid = fork();
    if (m_pid == 0) {
        setpgid(0, 0);
        close(lifeline[1]);
        guard(lifeline[0]);
    }
    const int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &original, nullptr);
    close(lifeline[0]);
    if (m_pid < 0) {
        close(lifeline[1]);
        throw InternalError(fmt::format("cannot start a process: {}", std::strerror(fork_errno)));
    }
    // Here too, so that the group exists before the command joins it, whichever runs first.
    setpgid(m_pid, m_pid);
    m_lifeline = lifeline[1];
}

GroupGuard::~GroupGuard() {
    if (!m_reaped) {
        // SIGKILL to the guard alone: it cannot take that for redsem's death (it never runs
        // again, so closing the pipe below is no death either). Not waited for: tearing down
        // its copy of this process took a quarter of a `run -- true`; redsem exits next, and
        // whoever inherits the guard reaps it.
        kill(m_pid, SIGKILL);
    }
    close(m_lifeline);
}

void GroupGuard::kill_group() noexcept {
    kill(-m_pid, SIGKILL);
    reap();
}

void GroupGuard::reap() noexcept {
    if (m_reaped) {
        return;
    }
    while (waitpid(m_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    m_reaped = true;
}

} // namespace redsem

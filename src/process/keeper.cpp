#include "process/keeper.hpp"

#include "process/boot_timer.hpp"
#include "process/group_guard.hpp"
#include "process/heartbeat.hpp"
#include "process/process_tree.hpp"
#include "process/signal_watch.hpp"
#include "redis/retry_policy.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <thread>
#include <unistd.h>

namespace redsem {

namespace {

// How long the keeper keeps trying to release the slot after the process exited; the lease
// runs out by itself anyway.
constexpr Milliseconds k_release_tries_for{5'000};

// The pidfd system calls, by number: glibc 2.36's <sys/pidfd.h> declares them without C
// linkage, so they cannot be called from C++ through it.
int pidfd_open(pid_t pid) {
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

int pidfd_send_signal(int fd, int signal) {
    return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, signal, nullptr, 0));
}

bool readable(int fd) {
    pollfd entry{fd, POLLIN, 0};
    return ::poll(&entry, 1, 0) > 0;
}

// Waits, on a connection and a thread of its own, for `redsem release` to say that it gave
// the slot back (lua/release.lua pushes to "<wake prefix><token>:released"). fd() becomes
// readable when it did.
class ReleaseWatch {
public:
    ReleaseWatch(ConnectOptions connect, std::string key)
        : m_connect(std::move(connect)), m_key(std::move(key)),
          m_stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
          m_fired(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
        if (m_stop < 0 || m_fired < 0) {
            throw InternalError("cannot create an eventfd");
        }
        m_thread = std::thread([this] { run(); });
    }
    ~ReleaseWatch() {
        const std::uint64_t one = 1;
        [[maybe_unused]] const ssize_t ignored = write(m_stop, &one, sizeof(one));
        m_thread.join();
        close(m_stop);
        close(m_fired);
    }
    ReleaseWatch(const ReleaseWatch&) = delete;
    ReleaseWatch& operator=(const ReleaseWatch&) = delete;

    int fd() const noexcept { return m_fired; }

private:
    void run() {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, nullptr);
        constexpr Milliseconds k_block{30'000};
        Connection connection(m_connect);
        // Any failure is looked past, on the policy's schedule: this watch is only a shortcut
        // (the heartbeat finds a released slot too, and deals with Redis being away).
        RetryPolicy retry;
        for (;;) {
            try {
                const Reply reply =
                    connection.command(Command{m_key, {"BLPOP", m_key, "30"}}, k_block, m_stop);
                if (!reply.is_nil() && !reply.is_error()) {
                    const std::uint64_t one = 1;
                    [[maybe_unused]] const ssize_t ignored = write(m_fired, &one, sizeof(one));
                    return;
                }
                if (!reply.is_error()) {
                    retry.answered();
                    continue;
                }
            } catch (const WaitInterrupted&) {
                return;
            } catch (const std::exception&) {
                // Redis away: the heartbeat deals with that; look again shortly.
            }
            pollfd stop{m_stop, POLLIN, 0};
            if (::poll(&stop, 1, static_cast<int>(retry.next_delay().count())) > 0) {
                return;
            }
        }
    }

    ConnectOptions m_connect;
    std::string m_key;
    int m_stop;
    int m_fired;
    std::thread m_thread;
};

// Whether `redsem release` gave the slot back: its mark is still there for a while.
bool released_by_user(const KeptSlot& slot, const std::string& key) {
    try {
        Connection connection(slot.connect);
        return connection.call(Command{key, {"EXISTS", key}}).as_integer() == 1;
    } catch (const std::exception&) {
        return false;
    }
}

void release(const KeptSlot& slot) {
    // Redis answered this slot's renewals, so an unreachable Redis is worth waiting for too
    // (a restart), within k_release_tries_for.
    RetryPolicy retries(k_release_tries_for, RetryPolicy::k_calls, true);
    for (;;) {
        std::optional<Milliseconds> delay;
        try {
            Connection connection(slot.connect);
            Semaphore semaphore(connection, slot.prefix, slot.name);
            semaphore.release(slot.lease.token);
            return;
        } catch (const Error& error) {
            delay = retries.after(error);
            if (!delay) {
                syslog(LOG_WARNING,
                       "could not release the slot of '%s' (%s); it frees itself "
                       "when its lease runs out",
                       printable(slot.name).c_str(), error.what());
                return;
            }
        }
        std::this_thread::sleep_for(*delay);
    }
}

// After the lost signal: SIGKILL to what is left of `tree` (the process and its descendants
// then) and of the process's descendants now, once its kill_after has passed.
void finish_off(const WatchedProcess& process, ProcessTree& tree) {
    if (tree.wait_for_end(*process.kill_after())) {
        return;
    }
    tree.merge(ProcessTree(process.pid()));
    tree.signal(SIGKILL);
    syslog(LOG_WARNING, "pid %d or its descendants still ran %s after the lost slot: sent SIGKILL",
           static_cast<int>(process.pid()), format_duration(*process.kill_after()).c_str());
}

// The keeper's life; returns its exit status.
int keep(const WatchedProcess& process, const KeptSlot& slot, int ready_fd) {
    openlog("redsem", LOG_PID, LOG_USER);
    signal(SIGHUP, SIG_IGN);
    const std::string released_key = Keys::make(slot.prefix, slot.name).released(slot.lease.token);
    SignalWatch signals{SIGTERM, SIGINT};
    Connection renewals(slot.connect);
    Heartbeat heartbeat(renewals, slot.prefix, slot.name, slot.lease, Heartbeat::Start::now,
                        slot.replicas);
    ReleaseWatch released(slot.connect, released_key);
    BootTimer timer;
    const char ok = 'k';
    [[maybe_unused]] const ssize_t ignored = write(ready_fd, &ok, 1);
    close(ready_fd);

    for (;;) {
        if (readable(released.fd())) {
            return 0; // `redsem release` gave the slot back
        }
        if (readable(process.fd()) || signals.received() != 0) {
            heartbeat.stop();
            release(slot);
            return 0;
        }
        const Heartbeat::Status status = heartbeat.status();
        if (status.lost || BootClock::now() >= status.valid_until) {
            heartbeat.request_stop();
            if (status.lost && released_by_user(slot, released_key)) {
                return 0; // the renewal ran right after `redsem release`
            }
            const std::string reason =
                status.lost ? status.last_error
                            : "no renewal was confirmed in time" +
                                  (status.last_error.empty() ? std::string()
                                                             : " (" + status.last_error + ")");
            ProcessTree tree(process.pid());
            if (process.lost_signal() != 0) {
                tree.signal(process.lost_signal());
            }
            syslog(LOG_WARNING, "lost the slot of '%s' held for pid %d: %s; %s",
                   printable(slot.name).c_str(), static_cast<int>(process.pid()), reason.c_str(),
                   process.lost_signal() != 0 ? fmt::format("sent it and its descendants SIG{}",
                                                            sigabbrev_np(process.lost_signal()))
                                                    .c_str()
                                              : "sent it nothing (--on-lost none)");
            if (!status.lost) {
                // The server may hold it still (renewals that reached too few replicas, or
                // Redis away for a while): give it back rather than block it to the end.
                release(slot);
            }
            if (process.kill_after()) {
                finish_off(process, tree);
            }
            return 1;
        }
        timer.arm(status.valid_until);
        pollfd fds[5] = {{process.fd(), POLLIN, 0},
                         {signals.fd(), POLLIN, 0},
                         {heartbeat.fd(), POLLIN, 0},
                         {timer.fd(), POLLIN, 0},
                         {released.fd(), POLLIN, 0}};
        ::poll(fds, 5, -1);
        timer.drain();
        heartbeat.drain();
        signals.take_pending();
    }
}

} // namespace

WatchedProcess::WatchedProcess(pid_t pid, int lost_signal, const char* option,
                               std::optional<Milliseconds> kill_after)
    : m_pid(pid), m_fd(-1), m_lost_signal(lost_signal), m_kill_after(kill_after) {
    if (pid == 1 && lost_signal != 0) {
        // Init: a lost lease must not TERM a host's systemd (in a container, PID 1 ignores
        // signals it has no handler for anyway).
        throw UsageError(fmt::format("{} 1: redsem does not signal PID 1 (init) when the lease is "
                                     "lost; add --on-lost none to hold the slot for its life",
                                     option));
    }
    m_fd = pidfd_open(pid);
    if (m_fd < 0) {
        throw UsageError(fmt::format("{} {}: {}", option, pid,
                                     errno == ESRCH ? "no such process" : std::strerror(errno)));
    }
    if (readable(m_fd)) {
        close(m_fd);
        throw UsageError(fmt::format("{} {}: the process has exited", option, pid));
    }
    if (lost_signal != 0 && pidfd_send_signal(m_fd, 0) != 0) {
        const int error = errno;
        close(m_fd);
        throw UsageError(fmt::format("{} {}: cannot signal it ({}); use --on-lost none", option,
                                     pid, std::strerror(error)));
    }
}

WatchedProcess::~WatchedProcess() {
    close(m_fd);
}

pid_t start_keeper(const WatchedProcess& process, const KeptSlot& slot) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        throw InternalError(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        const int error = errno;
        close(ready[0]);
        close(ready[1]);
        throw InternalError(fmt::format("cannot start the keeper: {}", std::strerror(error)));
    }
    if (pid == 0) {
        // The keeper: away from the caller's terminal, session and pipes (a $(...) waits for
        // every writer of its pipe to go).
        setsid();
        const int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        close_all_but({std::min(process.fd(), ready[1]), std::max(process.fd(), ready[1])});
        int status = 70;
        try {
            status = keep(process, slot, ready[1]);
        } catch (const std::exception& error) {
            syslog(LOG_ERR, "keeper of '%s' failed: %s", printable(slot.name).c_str(),
                   error.what());
        }
        _exit(status);
    }
    close(ready[1]);
    char byte = 0;
    ssize_t got = 0;
    while ((got = read(ready[0], &byte, 1)) < 0 && errno == EINTR) {
    }
    close(ready[0]);
    if (got != 1) {
        throw InternalError("the keeper process failed to start");
    }
    return pid;
}

} // namespace redsem

#pragma once

#include <optional>
#include <string>
#include <sys/types.h>

#include "redis/connection.hpp"
#include "semaphore/semaphore.hpp"

namespace redsem {

// A process to hold a slot for: watched through a pidfd, so that neither its exit nor the
// signal sent to it can mix it up with a later process that reuses its PID.
class WatchedProcess {
public:
    // Opens `pid`. Throws UsageError naming `option` when there is no such process, when it
    // has exited already, or when `lost_signal` (0: none) could not be sent to it or would go
    // to PID 1 (init). `kill_after`: how long after the lost signal what is left of the
    // process and its descendants gets SIGKILL (nullopt: never).
    WatchedProcess(pid_t pid, int lost_signal, const char* option,
                   std::optional<Milliseconds> kill_after = std::nullopt);
    ~WatchedProcess();
    WatchedProcess(const WatchedProcess&) = delete;
    WatchedProcess& operator=(const WatchedProcess&) = delete;

    pid_t pid() const noexcept { return m_pid; }
    int fd() const noexcept { return m_fd; }
    int lost_signal() const noexcept { return m_lost_signal; }
    std::optional<Milliseconds> kill_after() const noexcept { return m_kill_after; }

private:
    pid_t m_pid;
    int m_fd;
    int m_lost_signal;
    std::optional<Milliseconds> m_kill_after;
};

// What a keeper keeps: the lease of `name` under `prefix`, reached with `connect`.
struct KeptSlot {
    ConnectOptions connect;
    std::string prefix;
    std::string name;
    Lease lease;
    long long replicas = 0; // --replicas, for the renewals
};

// Starts a keeper process for `slot` (acquire --while-pid) and returns its pid once it runs.
// The keeper is detached (a session of its own, stdio on /dev/null, SIGHUP ignored) and
// renews the lease for as long as `process` lives. It ends, releasing the slot, when the
// process exits or the keeper gets SIGTERM or SIGINT; it ends at once when `redsem release`
// gave the slot back; and when the lease is lost it sends the process and its descendants
// the lost_signal (unless 0), logs to syslog, SIGKILLs what is left of them after kill_after
// (if set), and ends. Must be called while this process runs one thread only.
// Throws InternalError when the keeper could not be started.
pid_t start_keeper(const WatchedProcess& process, const KeptSlot& slot);

} // namespace redsem

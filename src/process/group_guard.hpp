#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace redsem {

// Closes every file descriptor from 3 on but those in `keep`, which is sorted.
void close_all_but(std::initializer_list<int> keep);
void close_all_but(const std::vector<int>& keep);

// What a guard starts once redsem died and it killed the group: this same program, in a
// process group of its own (so the kill does not reach it), with `args` after argv[0], the
// killed group's number appended to args[group_arg], environment `env`, and the descriptors
// `keep` left open (an inherited password: see inherited_secret()). `run` gives its slot back
// this way (see cli/run.cpp).
struct Successor {
    std::vector<std::string> args{};
    std::size_t group_arg = 0;
    std::vector<std::string> env{};
    std::vector<int> keep{};
};

// The guard's name, in /proc/PID/comm and /proc/PID/cmdline: without "redsem" in it, so that
// `pkill redsem`, `pkill -f redsem`, `killall redsem` and `pidof redsem` (a natural way to
// clear a stuck lock) reach redsem but miss its guard, which then does its work.
inline constexpr char k_guard_name[] = "semguard";

// The leader of a new process group, for a command that must not outlive redsem: a process
// named k_guard_name that ignores every signal it can and waits on a pipe only redsem writes
// to. When redsem dies, by any signal (a CI runner's SIGKILL of redsem's own group, the OOM
// killer), the pipe closes and the guard kills its group with SIGKILL, itself included; so the
// command's whole process tree ends before its lease can run out and the slot be handed on.
// Processes that left the group (setsid(), a daemon) escape it. Then it starts its successor,
// if any. A guard killed outright (SIGKILL) guards nothing more: see ended().
class GroupGuard {
public:
    // Starts the guard. Throws InternalError when it could not be started.
    explicit GroupGuard(std::optional<Successor> successor = std::nullopt);
    // Ends the guard alone (SIGKILL, not waited for): the group goes on as it is. For a
    // process about to exit, which leaves the guard to whoever reaps its orphans.
    ~GroupGuard();
    GroupGuard(const GroupGuard&) = delete;
    GroupGuard& operator=(const GroupGuard&) = delete;

    // The process group to start the command in (the guard's pid).
    pid_t group() const noexcept { return m_pid; }
    // Sends SIGKILL to every process of the group, the guard included.
    void kill_group() noexcept;
    // Whether the guard has ended while redsem lives: somebody killed it. It is not reaped
    // here, so its pid, the group's number, cannot be reused while redsem may signal the group.
    bool ended() const noexcept;

private:
    void reap() noexcept;

    pid_t m_pid = -1;
    int m_lifeline = -1; // the pipe's write end; closed only by redsem's death or ~GroupGuard
    bool m_reaped = false;
};

} // namespace redsem

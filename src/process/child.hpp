#pragma once

#include "process/group_guard.hpp"

#include <optional>
#include <string>
#include <vector>

namespace redsem {

// Occupies standard descriptors that redsem was started without (`redsem status >&-`) with
// /dev/null opened the wrong way round (0 write-only, 1 and 2 read-only): writing stdout
// still fails as on a closed descriptor (exit 74), but no socket or file redsem opens can
// become descriptor 1 and receive its output.
void reserve_standard_descriptors();

// Makes writes to a connection the peer closed fail with EPIPE instead of killing redsem
// (hiredis writes with write()). Children get the disposition redsem started with back.
void ignore_sigpipe();

// Throws CommandError when `command` could not be started as ChildProcess would start it:
// 127 when it is not found (in $PATH, unless it contains a '/'), 126 when it is not an
// executable file. So `run` fails before it queues, rather than after taking a slot.
void check_runnable(const std::string& command);

// How a child process ended, in shell terms.
struct ChildExit {
    int code = 0;   // exit code, or 128+N when killed by signal N
    int signal = 0; // N, when killed by a signal
};

// A command run as a child in a process group of its own, which redsem can signal as a whole.
// When redsem runs in the foreground of a terminal, the child's group is given the terminal
// (so an editor or a REPL works, and Ctrl-C reaches the child once), and the terminal is
// given back when it ends. If redsem dies, the child's whole group is killed (GroupGuard).
class ChildProcess {
public:
    // Starts `argv` (searched in PATH) with environment `env` ("NAME=value" entries). Throws
    // Error with exit code 127 when the command is not found, 126 when it cannot be executed.
    // When redsem dies, its guard starts `successor` once the group is dead (see GroupGuard).
    ChildProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 std::optional<Successor> successor = std::nullopt);
    ~ChildProcess();
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    int pid() const noexcept { return m_pid; }
    // The child's process group: its guard's pid.
    pid_t group() const noexcept { return m_guard.group(); }
    // Whether the guard was killed while redsem lives (see GroupGuard::ended()).
    bool guard_ended() const noexcept { return m_guard.ended(); }

    // Sends `signal` to the child's process group, while the child runs.
    void signal_group(int signal) const noexcept;
    // Sends SIGKILL to whatever is left of the child's process group, even once the child
    // has ended (what it started in the background).
    void kill_group() noexcept;

    // Reaps the child if it has ended; follows it through job control (Ctrl-Z) on a terminal.
    std::optional<ChildExit> poll();

private:
    void take_back_terminal() noexcept;
    void give_terminal() noexcept;

    GroupGuard m_guard; // first: the group exists before the child joins it
    int m_pid = -1;
    int m_tty = -1; // the controlling terminal, when the child was given it
    std::optional<ChildExit> m_exit;
};

} // namespace redsem

#include "process/group_guard.hpp"

#include "util/errors.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redsem {

namespace {

// The successor's command line and environment, made before the fork: the guard may only make
// plain system calls (redsem may have other threads), and fills in the group's number itself.
struct Prepared {
    std::string program;              // this binary's path (so `ps` names it), or /proc/self/exe
    std::vector<std::string> strings; // argv, then env
    std::vector<char*> argv;
    std::vector<char*> envp;
    std::vector<int> keep;
    char* group_digits = nullptr; // where the group's number goes
};

constexpr std::size_t k_group_digits = 20;

// The memory of this process's command line: the argv strings exec laid out for main().
struct CommandLineArea {
    char* start = nullptr;
    std::size_t size = 0;
};

// Where /proc/self/stat puts the command line (fields 48 and 49, arg_start and arg_end), when
// it starts at argv[0] (glibc's program_invocation_name) as exec laid it out: memory a fork
// may write its own name over. nullopt when it cannot tell.
std::optional<CommandLineArea> find_command_line_area() {
    std::ifstream in("/proc/self/stat");
    std::string line;
    if (!std::getline(in, line)) {
        return std::nullopt;
    }
    // The command name, field 2, is in parentheses and may hold anything but ends at the last ')'.
    const std::size_t name_end = line.rfind(')');
    if (name_end == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream fields(line.substr(name_end + 1));
    std::string skip;
    for (int field = 3; field < 48; ++field) {
        fields >> skip;
    }
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;
    fields >> start >> end;
    char* const first = reinterpret_cast<char*>(start);
    if (!fields || start == 0 || end <= start || first != program_invocation_name) {
        return std::nullopt;
    }
    return CommandLineArea{first, end - start};
}

const std::optional<CommandLineArea>& command_line_area() {
    static const std::optional<CommandLineArea> area = find_command_line_area();
    return area;
}

// Gives the guard its own name (k_guard_name): its comm, which `pkill` and `killall` match,
// and, over its copy of redsem's argv, the command line that `ps`, `pgrep -f` and `pidof`
// read (the kernel shows the whole area, NULs and all, when its last byte is NUL).
void take_guard_name(const CommandLineArea* area) {
    prctl(PR_SET_NAME, k_guard_name);
    if (area != nullptr) {
        std::memset(area->start, 0, area->size);
        std::memcpy(area->start, k_guard_name, std::min(area->size - 1, sizeof(k_guard_name) - 1));
    }
}

// Writes `number` as decimal digits at `out`, ending with '\0' (no allocation).
void write_number(char* out, long long number) {
    char reversed[k_group_digits];
    std::size_t length = 0;
    do {
        reversed[length++] = static_cast<char>('0' + number % 10);
        number /= 10;
    } while (number > 0 && length < k_group_digits);
    for (std::size_t i = 0; i < length; ++i) {
        out[i] = reversed[length - 1 - i];
    }
    out[length] = '\0';
}

// Starts the successor in a group of its own, with the signal dispositions a new program
// expects; returns once it is out of the guard's group (or could not be started).
void start_successor(Prepared& successor) {
    write_number(successor.group_digits, getpid());
    const pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        struct sigaction standard {};
        standard.sa_handler = SIG_DFL;
        sigemptyset(&standard.sa_mask);
        for (int signal = 1; signal < NSIG; ++signal) {
            if (signal != SIGKILL && signal != SIGSTOP) {
                sigaction(signal, &standard, nullptr);
            }
        }
        execve(successor.program.c_str(), successor.argv.data(), successor.envp.data());
        _exit(127);
    }
    if (pid > 0) {
        setpgid(pid, pid); // here too: out of the group before the guard kills it
    }
}

// The guard's life, in the forked child: only async-signal-safe calls (redsem may have other
// threads). `lifeline` is the read end of the pipe.
[[noreturn]] void guard(int lifeline, Prepared* successor, const CommandLineArea* name_area) {
    take_guard_name(name_area);
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
    if (successor != nullptr) {
        successor->keep.push_back(lifeline);
        std::sort(successor->keep.begin(), successor->keep.end()); // (no allocation)
        close_all_but(successor->keep);
    } else {
        close_all_but({lifeline});
    }
    char byte = 0;
    while (read(lifeline, &byte, 1) < 0 && errno == EINTR) {
    }
    if (successor != nullptr) {
        close(lifeline);
        start_successor(*successor);
    }
    kill(0, SIGKILL); // the whole group, this process last
    _exit(0);
}

template <typename Descriptors> void close_all_except(const Descriptors& keep) {
    unsigned first = 3;
    for (const int fd : keep) {
        if (fd < 0) {
            continue;
        }
        if (static_cast<unsigned>(fd) > first) {
            close_range(first, static_cast<unsigned>(fd) - 1, 0);
        }
        first = std::max(first, static_cast<unsigned>(fd) + 1);
    }
    close_range(first, ~0U, 0);
}

} // namespace

void close_all_but(std::initializer_list<int> keep) {
    close_all_except(keep);
}

void close_all_but(const std::vector<int>& keep) {
    close_all_except(keep);
}

GroupGuard::GroupGuard(std::optional<Successor> successor) {
    std::optional<Prepared> prepared;
    if (successor) {
        prepared.emplace();
        Prepared& p = *prepared;
        // Its path where it still has one, so that `ps` names the successor redsem; a binary
        // replaced or deleted since (an upgrade) is still this one as /proc/self/exe.
        std::error_code error;
        p.program = std::filesystem::read_symlink("/proc/self/exe", error).string();
        if (error || p.program.ends_with(" (deleted)")) {
            p.program = "/proc/self/exe";
        }
        p.strings.emplace_back("redsem");
        p.strings.insert(p.strings.end(), successor->args.begin(), successor->args.end());
        std::string& group = p.strings.at(successor->group_arg + 1);
        const std::size_t digits_at = group.size();
        group.append(k_group_digits + 1, '\0'); // room for the digits, written by the guard
        const std::size_t argc = p.strings.size();
        p.strings.insert(p.strings.end(), successor->env.begin(), successor->env.end());
        for (std::size_t i = 0; i < p.strings.size(); ++i) {
            (i < argc ? p.argv : p.envp).push_back(p.strings[i].data());
        }
        p.argv.push_back(nullptr);
        p.envp.push_back(nullptr);
        p.group_digits = p.argv[successor->group_arg + 1] + digits_at;
        p.keep = std::move(successor->keep);
        p.keep.reserve(p.keep.size() + 1);
    }
    const std::optional<CommandLineArea>& name_area = command_line_area();
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
        guard(lifeline[0], prepared ? &*prepared : nullptr, name_area ? &*name_area : nullptr);
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

bool GroupGuard::ended() const noexcept {
    if (m_reaped) {
        return true;
    }
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == m_pid;
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

#include "process/child.hpp"

#include "process/signal_watch.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <optional>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace redsem {

namespace {

// Exit codes a shell uses for a command that cannot run.
constexpr int k_not_found = static_cast<int>(ExitCode::not_found);
constexpr int k_cannot_execute = static_cast<int>(ExitCode::cannot_execute);

// SIGPIPE as redsem found it, for its children; set by ignore_sigpipe().
struct sigaction g_inherited_sigpipe {};
bool g_sigpipe_saved = false;

// Calls fn with SIGTTOU blocked, so that tcsetpgrp() works from a background process group.
template <typename Fn> void without_sigttou(Fn fn) {
    sigset_t block;
    sigset_t old;
    sigemptyset(&block);
    sigaddset(&block, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    fn();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Why execvp() would fail on `file`, which contains a '/': 0 when it would not.
int exec_problem(const std::string& file) {
    struct stat info {};
    if (stat(file.c_str(), &info) != 0) {
        return errno;
    }
    if (S_ISDIR(info.st_mode) || access(file.c_str(), X_OK) != 0) {
        return EACCES;
    }
    return 0;
}

// The interpreter that the "#!" line of executable `file` names, when it is not there to run
// (execve() would fail with ENOENT or EACCES after the slot was taken); nullopt otherwise, or
// when `file` is no script.
std::optional<std::string> missing_interpreter(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    std::string line;
    if (!in || in.get() != '#' || in.get() != '!' || !std::getline(in, line)) {
        return std::nullopt;
    }
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) {
        return std::nullopt;
    }
    const std::string interpreter = line.substr(start, line.find_first_of(" \t\r", start) - start);
    if (interpreter.empty() || exec_problem(interpreter) == 0) {
        return std::nullopt;
    }
    return interpreter;
}

// Throws when the script `file` (found runnable) names an interpreter that is missing.
void check_interpreter(const std::string& file, const std::string& command) {
    if (const auto interpreter = missing_interpreter(file)) {
        throw CommandError(k_not_found,
                           fmt::format("cannot run '{}': its interpreter '{}' (the #! line) is "
                                       "missing or not executable",
                                       printable(command, 200), printable(*interpreter, 200)));
    }
}

} // namespace

void check_runnable(const std::string& command) {
    int problem = ENOENT;
    if (command.find('/') != std::string::npos) {
        problem = exec_problem(command);
        if (problem == 0) {
            check_interpreter(command, command);
        }
    } else if (!command.empty()) {
        // As execvp() searches: each directory of $PATH in turn (an empty entry is the
        // current directory); a file found but not executable is remembered, and the search
        // goes on.
        const char* path = std::getenv("PATH");
        const std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
        std::size_t start = 0;
        for (;;) {
            const std::size_t end = std::min(dirs.find(':', start), dirs.size());
            const std::string dir = dirs.substr(start, end - start);
            const std::string file = (dir.empty() ? "." : dir) + "/" + command;
            const int found = exec_problem(file);
            if (found == 0) {
                check_interpreter(file, command);
                return;
            }
            if (found == EACCES) {
                problem = EACCES;
            }
            if (end == dirs.size()) {
                break;
            }
            start = end + 1;
        }
    }
    if (problem == 0) {
        return;
    }
    if (problem == ENOENT && command.find('/') == std::string::npos) {
        throw CommandError(k_not_found,
                           fmt::format("'{}': command not found", printable(command, 200)));
    }
    throw CommandError(
        problem == ENOENT ? k_not_found : k_cannot_execute,
        fmt::format("cannot run '{}': {}", printable(command, 200), std::strerror(problem)));
}

void reserve_standard_descriptors() {
    for (const int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) {
            continue;
        }
        // open() returns the lowest free descriptor: this one, as the lower ones are taken.
        const int placeholder = open("/dev/null", fd == STDIN_FILENO ? O_WRONLY : O_RDONLY);
        if (placeholder != -1 && placeholder != fd) {
            close(placeholder); // cannot happen; never keep a stray descriptor
        }
    }
}

void ignore_sigpipe() {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    if (sigaction(SIGPIPE, &ignore, &g_inherited_sigpipe) == 0) {
        g_sigpipe_saved = true;
    }
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::vector<std::string>& env, std::optional<Successor> successor)
    : m_guard(std::move(successor)) {
    // Everything the child needs is prepared before vfork(): the child shares this memory
    // until it execs, and may only make plain system calls.
    std::vector<char*> args;
    for (const auto& arg : argv) {
        args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& entry : env) {
        envp.push_back(const_cast<char*>(entry.c_str()));
    }
    envp.push_back(nullptr);
    if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp()) {
        m_tty = STDIN_FILENO;
    }
    const int tty = m_tty;
    const pid_t parent = getpid();
    const pid_t group = m_guard.group();

    // vfork() rather than fork(): no copy of this process's page tables, which is most of
    // the cost of starting a short command. Signals stay blocked until the child has reset
    // redsem's handlers, so none runs in the child. An exec failure comes back through a
    // close-on-exec pipe, which works whether or not the child shares our memory.
    int exec_error[2];
    if (pipe2(exec_error, O_CLOEXEC) != 0) {
        throw InternalError(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    }
    sigset_t all;
    sigset_t original;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &original);
    m_pid = vfork();
    if (m_pid == 0) {
        const sigset_t& caught = caught_signals();
        for (int signal = 1; signal < NSIG; ++signal) {
            struct sigaction action {};
            // (SIGCONT: util/stops.cpp's handler.)
            const bool ours = sigismember(&caught, signal) == 1 || signal == SIGCONT;
            if (ours && sigaction(signal, nullptr, &action) == 0 && action.sa_handler != SIG_IGN &&
                action.sa_handler != SIG_DFL) {
                action.sa_handler = SIG_DFL;
                sigaction(signal, &action, nullptr);
            }
        }
        if (g_sigpipe_saved) {
            sigaction(SIGPIPE, &g_inherited_sigpipe, nullptr);
        }
        setpgid(0, group);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(k_cannot_execute); // redsem died already
        }
        if (tty >= 0) {
            tcsetpgrp(tty, group); // allowed from a background group: SIGTTOU is blocked
        }
        sigprocmask(SIG_SETMASK, &original, nullptr);
        execvpe(args[0], args.data(), envp.data());
        const int error = errno;
        [[maybe_unused]] const ssize_t ignored = write(exec_error[1], &error, sizeof(error));
        _exit(error == ENOENT ? k_not_found : k_cannot_execute);
    }
    const int vfork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &original, nullptr);
    close(exec_error[1]);
    if (m_pid < 0) {
        close(exec_error[0]);
        throw InternalError(fmt::format("cannot start a process: {}", std::strerror(vfork_errno)));
    }
    int error = 0;
    ssize_t got = 0;
    while ((got = read(exec_error[0], &error, sizeof(error))) < 0 && errno == EINTR) {
    }
    close(exec_error[0]);
    if (got == sizeof(error)) {
        waitpid(m_pid, nullptr, 0);
        m_exit = ChildExit{error == ENOENT ? k_not_found : k_cannot_execute, 0};
        take_back_terminal();
        throw CommandError(m_exit->code, fmt::format("cannot run '{}': {}", printable(argv[0], 200),
                                                     std::strerror(error)));
    }
}

ChildProcess::~ChildProcess() {
    if (!m_exit && m_pid > 0) {
        signal_group(SIGKILL);
        waitpid(m_pid, nullptr, 0);
    }
    take_back_terminal();
}

void ChildProcess::signal_group(int signal) const noexcept {
    if (m_pid > 0 && !m_exit) {
        kill(-m_guard.group(), signal);
    }
}

void ChildProcess::kill_group() noexcept {
    m_guard.kill_group();
}

void ChildProcess::give_terminal() noexcept {
    if (m_tty >= 0) {
        without_sigttou([&] { tcsetpgrp(m_tty, m_guard.group()); });
    }
}

void ChildProcess::take_back_terminal() noexcept {
    if (m_tty >= 0) {
        without_sigttou([&] { tcsetpgrp(m_tty, getpgrp()); });
    }
}

std::optional<ChildExit> ChildProcess::poll() {
    if (m_exit) {
        return m_exit;
    }
    int status = 0;
    const pid_t got = waitpid(m_pid, &status, WNOHANG | WUNTRACED);
    if (got != m_pid) {
        return std::nullopt;
    }
    if (WIFSTOPPED(status)) {
        // Ctrl-Z reached the child: stop redsem too, so the shell sees a stopped job; when the
        // shell continues redsem, continue the child (in the foreground if redsem is).
        // Without a terminal, a stop came from somebody's kill: leave the child stopped.
        if (m_tty >= 0) {
            take_back_terminal();
            raise(SIGSTOP);
            if (tcgetpgrp(m_tty) == getpgrp()) {
                give_terminal();
            }
            signal_group(SIGCONT);
        }
        return std::nullopt;
    }
    if (WIFSIGNALED(status)) {
        m_exit = ChildExit{128 + WTERMSIG(status), WTERMSIG(status)};
    } else {
        m_exit = ChildExit{WEXITSTATUS(status), 0};
    }
    take_back_terminal();
    return m_exit;
}

} // namespace redsem

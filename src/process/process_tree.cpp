#include "process/process_tree.hpp"

#include "process/boot_timer.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <map>
#include <optional>
#include <poll.h>
#include <sstream>
#include <string>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

namespace redsem {

namespace {

struct ProcStat {
    char state = '?'; // R, S, D, T, Z (a zombie: it ended, and nobody reaped it yet)...
    pid_t parent = 0;
    pid_t group = 0;
    unsigned long long start = 0; // clock ticks after boot
};

// Fields 3 (state), 4 (ppid), 5 (pgrp) and 22 (starttime) of /proc/PID/stat; nullopt when it
// is gone.
std::optional<ProcStat> read_stat(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    try {
        if (!std::getline(in, line)) {
            return std::nullopt;
        }
    } catch (const std::exception&) {
        return std::nullopt; // gone between the open and the read
    }
    // The command name, field 2, is in parentheses and may hold anything but ends at the last ')'.
    const std::size_t name_end = line.rfind(')');
    if (name_end == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream fields(line.substr(name_end + 1));
    std::string skip;
    ProcStat stat;
    fields >> stat.state >> stat.parent >> stat.group;
    for (int field = 6; field < 22; ++field) {
        fields >> skip;
    }
    fields >> stat.start;
    if (!fields) {
        return std::nullopt;
    }
    return stat;
}

int open_pidfd(pid_t pid) {
    return static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

bool ended(int pidfd) {
    pollfd entry{pidfd, POLLIN, 0};
    return ::poll(&entry, 1, 0) > 0;
}

// Calls `visit(pid, stat)` for each process /proc shows now, until it returns false.
template <typename Visit> void each_process(Visit visit) {
    DIR* proc = opendir("/proc");
    if (proc == nullptr) {
        return;
    }
    while (const dirent* entry = readdir(proc)) {
        char* end = nullptr;
        const long pid = std::strtol(entry->d_name, &end, 10);
        if (pid <= 0 || *end != '\0') {
            continue;
        }
        if (const auto stat = read_stat(static_cast<pid_t>(pid));
            stat && !visit(static_cast<pid_t>(pid), *stat)) {
            break;
        }
    }
    closedir(proc);
}

// Whether a process of group `group` runs (or is stopped): one that ended and waits to be
// reaped does not count.
bool group_lives(pid_t group) {
    if (kill(-group, 0) != 0 && errno == ESRCH) {
        return false;
    }
    bool lives = false;
    each_process([&](pid_t, const ProcStat& stat) {
        lives = stat.group == group && stat.state != 'Z' && stat.state != 'X';
        return !lives;
    });
    return lives;
}

} // namespace

bool wait_for_group_end(pid_t group, Milliseconds timeout) {
    constexpr Milliseconds k_look_every{10};
    const auto give_up_at = BootClock::now() + timeout;
    while (group_lives(group)) {
        if (BootClock::now() >= give_up_at) {
            return false;
        }
        std::this_thread::sleep_for(k_look_every);
    }
    return true;
}

ProcessTree::ProcessTree(pid_t root) {
    std::multimap<pid_t, pid_t> children;
    std::map<pid_t, unsigned long long> starts;
    each_process([&](pid_t pid, const ProcStat& stat) {
        children.emplace(stat.parent, pid);
        starts[pid] = stat.start;
        return true;
    });
    std::vector<pid_t> pending{root};
    while (!pending.empty()) {
        const pid_t pid = pending.back();
        pending.pop_back();
        const auto [first, last] = children.equal_range(pid);
        for (auto child = first; child != last; ++child) {
            pending.push_back(child->second);
        }
        const int fd = open_pidfd(pid);
        if (fd < 0) {
            continue;
        }
        // Opened after the scan: it is the process scanned only if it started when that one did.
        const auto now = read_stat(pid);
        const auto scanned = starts.find(pid);
        if (!now || scanned == starts.end() || now->start != scanned->second) {
            close(fd);
            continue;
        }
        m_processes.push_back({pid, fd});
    }
}

ProcessTree::~ProcessTree() {
    for (const Member& member : m_processes) {
        close(member.fd);
    }
}

void ProcessTree::merge(ProcessTree&& other) {
    for (const Member& member : other.m_processes) {
        const bool known = std::any_of(m_processes.begin(), m_processes.end(),
                                       [&](const Member& mine) { return mine.pid == member.pid; });
        if (known) {
            close(member.fd);
        } else {
            m_processes.push_back(member);
        }
    }
    other.m_processes.clear();
}

void ProcessTree::signal(int signal) const {
    for (const Member& member : m_processes) {
        syscall(SYS_pidfd_send_signal, member.fd, signal, nullptr, 0);
    }
}

bool ProcessTree::wait_for_end(Milliseconds timeout) const {
    BootTimer timer;
    timer.arm(BootClock::now() + timeout);
    for (;;) {
        std::vector<pollfd> fds{{timer.fd(), POLLIN, 0}};
        for (const Member& member : m_processes) {
            if (!ended(member.fd)) {
                fds.push_back({member.fd, POLLIN, 0});
            }
        }
        if (fds.size() == 1) {
            return true;
        }
        ::poll(fds.data(), fds.size(), -1);
        if (fds[0].revents != 0) {
            return false;
        }
    }
}

} // namespace redsem

#pragma once

#include "util/duration.hpp"

#include <sys/types.h>
#include <vector>

namespace redsem {

// Waits until no process of process group `group` runs (those that ended and were not reaped
// yet do not count), or for `timeout`; true when none runs.
bool wait_for_group_end(pid_t group, Milliseconds timeout);

// A process and all its descendants as /proc shows them at one moment, each held by a pidfd:
// a signal sent later reaches those processes or none, never one that reused a pid.
class ProcessTree {
public:
    // The tree under `root`; empty when `root` is gone.
    explicit ProcessTree(pid_t root);
    ~ProcessTree();
    ProcessTree(const ProcessTree&) = delete;
    ProcessTree& operator=(const ProcessTree&) = delete;

    // Adds the processes of `other` that this tree does not have yet (it is left empty).
    void merge(ProcessTree&& other);
    // Sends `signal` to every process of the tree that has not ended.
    void signal(int signal) const;
    // Waits until every process of the tree has ended, or for `timeout`; true if they all ended.
    bool wait_for_end(Milliseconds timeout) const;
    bool empty() const noexcept { return m_processes.empty(); }

private:
    struct Member {
        pid_t pid;
        int fd; // pidfd
    };
    std::vector<Member> m_processes;
};

} // namespace redsem

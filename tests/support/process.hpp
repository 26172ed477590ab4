#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace redsem::test {

struct ProcessResult {
    int exit_code = -1; // -1 when killed by a signal
    int signal = 0;
    std::string out;
    std::string err;
};

// Environment changes for a child: a value sets the variable, nullopt removes it. The
// variables redsem reads (REDSEM_*, REDIS_URL, the CI systems' markers) are always removed first,
// so a test sees only what it sets.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

// A real child process running the redsem binary under test (redsem_binary()), with stdout and
// stderr captured in files of a temporary directory. The destructor SIGKILLs it if it runs.
class Child {
public:
    explicit Child(const std::vector<std::string>& args, const EnvChanges& env = {},
                   const std::string& input = "");
    // /bin/sh -c `script` instead of redsem (same environment rules).
    static std::unique_ptr<Child> shell(const std::string& script, const EnvChanges& env = {});
    ~Child();
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

    int pid() const { return m_pid; }
    void signal(int number) const;
    // Waits for the child to end; kills it and fails the calling test after `timeout`.
    ProcessResult wait(std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // Whether it has ended (reaping it if so).
    bool finished();
    // What it has written to stdout so far.
    std::string out_so_far() const;
    // Polls until stdout holds a full line or the time passes; returns that line.
    std::optional<std::string> wait_for_line(std::chrono::milliseconds timeout);

private:
    Child(std::vector<std::string> argv, const EnvChanges& env, const std::string& input, bool);
    std::string m_dir;
    int m_pid = -1;
    std::optional<ProcessResult> m_result;
};

// Runs the redsem binary to completion.
ProcessResult run_redsem(const std::vector<std::string>& args, const EnvChanges& env = {},
                         const std::string& input = "");

std::string read_file(const std::string& path);

} // namespace redsem::test

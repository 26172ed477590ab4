#include "support/process.hpp"
#include "support/build_paths.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace redsem::test {

namespace {

// What redsem reads: its own variables, and those that say a CI job runs (the tests may run
// in one; a test that wants a CI job sets them). REDSEM_FUNCTIONS is kept: the whole suite
// runs with REDSEM_FUNCTIONS=0 to test the scripts sent by EVAL (see .ci/run).
bool is_redsem_variable(std::string_view entry) {
    if (entry.rfind("REDSEM_FUNCTIONS=", 0) == 0) {
        return false;
    }
    for (const std::string_view name :
         {"REDSEM_", "REDIS_URL=", "REDISCLI_AUTH=", "GITHUB_ACTIONS=", "GITLAB_CI=",
          "JENKINS_URL=", "BUILDKITE=", "CIRCLECI=", "TF_BUILD="}) {
        if (entry.rfind(name, 0) == 0) {
            return true;
        }
    }
    return false;
}

ProcessResult decode(int status) {
    ProcessResult result;
    if (WIFEXITED(status)) {
        result.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        result.signal = WTERMSIG(status);
    }
    return result;
}

} // namespace

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

Child::Child(const std::vector<std::string>& args, const EnvChanges& env, const std::string& input)
    : Child(
          [&] {
              std::vector<std::string> argv{redsem_binary()};
              argv.insert(argv.end(), args.begin(), args.end());
              return argv;
          }(),
          env, input, true) {}

std::unique_ptr<Child> Child::shell(const std::string& script, const EnvChanges& env) {
    return std::unique_ptr<Child>(new Child({"/bin/sh", "-c", script}, env, "", true));
}

Child::Child(std::vector<std::string> argv_strings, const EnvChanges& env, const std::string& input,
             bool) {
    std::string pattern = (std::filesystem::temp_directory_path() / "redsem-child-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    m_dir = pattern;
    { std::ofstream(m_dir + "/in", std::ios::binary) << input; }

    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        if (!is_redsem_variable(*entry)) {
            environment.emplace_back(*entry);
        }
    }
    for (const auto& [name, value] : env) {
        std::erase_if(environment,
                      [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; });
        if (value) {
            environment.push_back(name + "=" + *value);
        }
    }
    m_pid = fork();
    if (m_pid < 0) {
        throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    }
    if (m_pid == 0) {
        std::vector<char*> argv;
        for (auto& arg : argv_strings) {
            argv.push_back(arg.data());
        }
        argv.push_back(nullptr);
        std::vector<char*> envp;
        for (auto& entry : environment) {
            envp.push_back(entry.data());
        }
        envp.push_back(nullptr);
        const int in = open((m_dir + "/in").c_str(), O_RDONLY);
        const int out = open((m_dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        const int err = open((m_dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(in, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        // Tests send signals to the child; start it with default dispositions and mask.
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        execve(argv[0], argv.data(), envp.data());
        _exit(127);
    }
}

Child::~Child() {
    if (!m_result && m_pid > 0) {
        kill(m_pid, SIGKILL);
        waitpid(m_pid, nullptr, 0);
    }
    std::error_code ignored;
    std::filesystem::remove_all(m_dir, ignored);
}

void Child::signal(int number) const {
    kill(m_pid, number);
}

bool Child::finished() {
    if (m_result) {
        return true;
    }
    int status = 0;
    if (waitpid(m_pid, &status, WNOHANG) == m_pid) {
        m_result = decode(status);
        return true;
    }
    return false;
}

ProcessResult Child::wait(std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (!finished()) {
        if (std::chrono::steady_clock::now() > give_up) {
            kill(m_pid, SIGKILL);
            int status = 0;
            waitpid(m_pid, &status, 0);
            m_result = decode(status);
            m_result->err = read_file(m_dir + "/err");
            throw std::runtime_error("child did not finish in time; stderr: " + m_result->err);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ProcessResult result = *m_result;
    result.out = read_file(m_dir + "/out");
    result.err = read_file(m_dir + "/err");
    return result;
}

std::string Child::out_so_far() const {
    return read_file(m_dir + "/out");
}

std::optional<std::string> Child::wait_for_line(std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const std::string out = out_so_far();
        if (const auto newline = out.find('\n'); newline != std::string::npos) {
            return out.substr(0, newline);
        }
        if (std::chrono::steady_clock::now() > give_up) {
            return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

ProcessResult run_redsem(const std::vector<std::string>& args, const EnvChanges& env,
                         const std::string& input) {
    Child child(args, env, input);
    return child.wait();
}

} // namespace redsem::test

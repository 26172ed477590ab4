#include "support/redis_server.hpp"

#include "support/process.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <netinet/in.h>
#include <stdexcept>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace redsem::test {

namespace {

constexpr auto k_start_timeout = std::chrono::seconds(10);
constexpr auto k_stop_timeout = std::chrono::seconds(5);
constexpr int k_port_attempts = 20;

} // namespace

int free_port() {
    const std::filesystem::path locks =
        std::filesystem::temp_directory_path() / "redsem-test-ports";
    std::error_code ignored;
    std::filesystem::create_directories(locks, ignored);
    for (int attempt = 0; attempt < k_port_attempts; ++attempt) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = 0;
        socklen_t length = sizeof(address);
        if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
            close(fd);
            throw std::runtime_error("cannot find a free port");
        }
        close(fd);
        const int port = ntohs(address.sin_port);
        // The lock lives (its descriptor stays open) until this process ends.
        const std::string lock = (locks / std::to_string(port)).string();
        const int lock_fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
        if (lock_fd >= 0 && flock(lock_fd, LOCK_EX | LOCK_NB) == 0) {
            return port;
        }
        if (lock_fd >= 0) {
            close(lock_fd); // another test process has this port
        }
    }
    throw std::runtime_error("cannot find a free port that no other test holds");
}

bool port_was_taken(const std::string& log) {
    return read_file(log).find("Address already in use") != std::string::npos;
}

RedisServer::RedisServer() : RedisServer(Options{}) {}

RedisServer::RedisServer(Options options) : m_options(std::move(options)) {
    std::string pattern = (std::filesystem::temp_directory_path() / "redsem-test-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    m_dir = pattern;
    m_socket = m_dir + "/redis.sock";
    start_on_free_ports();
    if (!m_options.new_data_set) {
        mark_in_use();
    }
}

void RedisServer::mark_in_use(const std::string& prefix, int db) const {
    Connection connection = admin();
    connection.call({"SELECT", std::to_string(db)});
    const std::string info = connection.call({"INFO", "server"}).as_string();
    const std::size_t at = info.find("run_id:");
    if (at == std::string::npos) {
        throw std::runtime_error("INFO server has no run_id");
    }
    const std::string run_id = info.substr(at + 7, 40);
    connection.call({"HSET", prefix + ":epoch", "run", run_id, "lost_at", "0"});
}

void RedisServer::start_on_free_ports() {
    for (int attempt = 1;; ++attempt) {
        if (m_options.tcp) {
            m_port = free_port();
        }
        m_option_ports.clear();
        for (std::size_t i = 0; i < m_options.port_options.size(); ++i) {
            m_option_ports.push_back(free_port());
        }
        if (start() == Started::ready) {
            return;
        }
        if (attempt == k_port_attempts) {
            throw std::runtime_error("redis-server found each free port taken; see " + m_dir +
                                     "/redis.log");
        }
    }
}

int RedisServer::port_of(const std::string& option) const {
    for (std::size_t i = 0; i < m_options.port_options.size(); ++i) {
        if (m_options.port_options[i] == option) {
            return m_option_ports.at(i);
        }
    }
    throw std::logic_error("this RedisServer has no port for " + option);
}

RedisServer::Started RedisServer::start() {
    std::vector<std::string> args{"redis-server",
                                  "--port",
                                  std::to_string(m_port),
                                  "--bind",
                                  m_options.ipv6 ? "::1" : "127.0.0.1",
                                  "--unixsocket",
                                  m_socket,
                                  "--unixsocketperm",
                                  "700",
                                  "--dir",
                                  m_dir,
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--logfile",
                                  m_dir + "/redis.log"};
    for (std::size_t i = 0; i < m_options.port_options.size(); ++i) {
        args.insert(args.end(), {m_options.port_options[i], std::to_string(m_option_ports.at(i))});
    }
    args.insert(args.end(), m_options.extra_args.begin(), m_options.extra_args.end());
    const std::string log = m_dir + "/redis.log";
    std::filesystem::remove(log); // what it says now is about this start

    m_pid = fork();
    if (m_pid == 0) {
        // Dies with the test, even when the test is killed (a ctest timeout) and no destructor
        // runs.
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        std::vector<char*> argv;
        for (auto& arg : args) {
            argv.push_back(arg.data());
        }
        argv.push_back(nullptr);
        const int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        execvp("redis-server", argv.data());
        _exit(127);
    }

    const auto give_up = std::chrono::steady_clock::now() + k_start_timeout;
    for (;;) {
        try {
            Connection connection = admin();
            if (connection.call({"PING"}).as_string() == "PONG") {
                return Started::ready;
            }
        } catch (const std::exception&) {
        }
        int status = 0;
        if (waitpid(m_pid, &status, WNOHANG) == m_pid) {
            m_pid = -1;
            if (port_was_taken(log)) {
                return Started::port_taken;
            }
            throw std::runtime_error("redis-server exited at start; see " + log);
        }
        if (std::chrono::steady_clock::now() > give_up) {
            throw std::runtime_error("redis-server did not answer PING in time");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

RedisServer::~RedisServer() {
    stop();
    std::error_code ignored;
    std::filesystem::remove_all(m_dir, ignored);
}

void RedisServer::restart(std::chrono::milliseconds down) {
    stop();
    std::this_thread::sleep_for(down);
    // The same ports: the clients know them.
    if (start() == Started::port_taken) {
        throw std::runtime_error("redis-server's port was taken while it was down");
    }
}

void RedisServer::kill() {
    if (m_pid > 0) {
        ::kill(m_pid, SIGKILL);
        int status = 0;
        waitpid(m_pid, &status, 0);
        m_pid = -1;
    }
}

void RedisServer::signal(int number) const {
    if (m_pid > 0) {
        ::kill(m_pid, number);
    }
}

void RedisServer::stop() {
    if (m_pid > 0) {
        ::kill(m_pid, SIGTERM);
        const auto give_up = std::chrono::steady_clock::now() + k_stop_timeout;
        int status = 0;
        while (waitpid(m_pid, &status, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() > give_up) {
                ::kill(m_pid, SIGKILL);
                waitpid(m_pid, &status, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        m_pid = -1;
    }
}

std::string RedisServer::socket_url() const {
    return "unix://" + m_socket;
}

std::string RedisServer::tcp_url() const {
    if (!m_options.tcp) {
        throw std::logic_error("this RedisServer has no TCP port");
    }
    return m_options.ipv6 ? "redis://[::1]:" + std::to_string(m_port)
                          : "redis://127.0.0.1:" + std::to_string(m_port);
}

Connection RedisServer::admin() const {
    ConnectOptions options{parse_redis_url(socket_url())};
    if (!m_options.admin_password.empty()) {
        options.url.password = m_options.admin_password;
    }
    if (!m_options.admin_user.empty()) {
        options.url.user = m_options.admin_user;
    }
    return Connection(std::move(options));
}

} // namespace redsem::test

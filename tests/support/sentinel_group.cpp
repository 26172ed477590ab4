#include "support/sentinel_group.hpp"

#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace redsem::test {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto k_ready_timeout = std::chrono::seconds(30);
constexpr auto k_poll = std::chrono::milliseconds(50);
constexpr int k_port_attempts = 20;

std::string make_temp_dir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "redsem-sentinel-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    return pattern;
}

// Polls `done` until it holds or `timeout` passes (then throws, naming `what`).
template <typename Condition>
void await(Condition done, std::chrono::milliseconds timeout, const std::string& what) {
    const auto give_up = Clock::now() + timeout;
    for (;;) {
        try {
            if (done()) {
                return;
            }
        } catch (const std::exception&) {
            // not up yet
        }
        if (Clock::now() > give_up) {
            throw std::runtime_error("sentinel test group: timed out waiting for " + what);
        }
        std::this_thread::sleep_for(k_poll);
    }
}

} // namespace

SentinelGroup::SentinelGroup() : SentinelGroup(Options{}) {}

SentinelGroup::SentinelGroup(Options options) : m_options(std::move(options)) {
    // A replica that needs a full copy after a failover gets it at once, not 5s later.
    const std::vector<std::string> quick_sync{"--repl-diskless-sync-delay", "0"};
    RedisServer::Options master;
    master.tcp = true;
    master.extra_args = quick_sync;
    m_servers.push_back(std::make_unique<RedisServer>(master));
    const int master_port = m_servers.front()->port();
    for (int i = 0; i < m_options.replicas; ++i) {
        RedisServer::Options replica;
        replica.tcp = true;
        replica.new_data_set = true; // read-only: the master's epoch key reaches it
        replica.extra_args = quick_sync;
        replica.extra_args.insert(replica.extra_args.end(),
                                  {"--replicaof", "127.0.0.1", std::to_string(master_port)});
        m_servers.push_back(std::make_unique<RedisServer>(replica));
    }
    m_sentinels.resize(3);
    for (Sentinel& sentinel : m_sentinels) {
        sentinel.dir = make_temp_dir();
        start_sentinel(sentinel);
    }
    wait_until_ready();
}

SentinelGroup::~SentinelGroup() {
    for (Sentinel& sentinel : m_sentinels) {
        if (sentinel.pid > 0) {
            ::kill(sentinel.pid, SIGKILL);
            int status = 0;
            waitpid(sentinel.pid, &status, 0);
        }
        std::error_code ignored;
        std::filesystem::remove_all(sentinel.dir, ignored);
    }
}

void SentinelGroup::start_sentinel(Sentinel& sentinel) {
    for (int attempt = 1;; ++attempt) {
        sentinel.port = free_port();
        if (launch_sentinel(sentinel)) {
            return;
        }
        if (attempt == k_port_attempts) {
            throw std::runtime_error("sentinel test group: each free port was taken");
        }
    }
}

bool SentinelGroup::launch_sentinel(Sentinel& sentinel) {
    const std::string config = sentinel.dir + "/sentinel.conf";
    const std::string log = sentinel.dir + "/sentinel.log";
    std::filesystem::remove(log); // what it says now is about this start
    {
        std::ofstream file(config);
        file << "port " << sentinel.port << "\n"
             << "bind 127.0.0.1\n"
             << "dir " << sentinel.dir << "\n"
             << "logfile " << sentinel.dir << "/sentinel.log\n"
             << "sentinel monitor " << k_master_name << " 127.0.0.1 " << m_servers.front()->port()
             << " 2\n"
             << "sentinel down-after-milliseconds " << k_master_name << " 1000\n"
             << "sentinel failover-timeout " << k_master_name << " 10000\n"
             << "sentinel parallel-syncs " << k_master_name << " 5\n";
        if (!m_options.sentinel_password.empty()) {
            file << "requirepass " << m_options.sentinel_password << "\n";
        }
    }
    sentinel.pid = fork();
    if (sentinel.pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        const int null = open("/dev/null", O_RDWR);
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        execlp("redis-server", "redis-server", config.c_str(), "--sentinel", nullptr);
        _exit(127);
    }
    // Up when it answers; a sentinel that found its port taken exits at once.
    bool up = false;
    await(
        [&] {
            int status = 0;
            if (waitpid(sentinel.pid, &status, WNOHANG) == sentinel.pid) {
                sentinel.pid = -1;
                return true;
            }
            ConnectOptions options{
                parse_redis_url("redis://127.0.0.1:" + std::to_string(sentinel.port))};
            if (!m_options.sentinel_password.empty()) {
                options.url.password = m_options.sentinel_password;
            }
            Connection connection(options);
            up = connection.call({"PING"}).as_string() == "PONG";
            return up;
        },
        k_ready_timeout, "a sentinel to answer PING");
    if (!up && !port_was_taken(log)) {
        throw std::runtime_error("a sentinel exited at start; see " + log);
    }
    return up;
}

void SentinelGroup::signal_sentinels(int signal) const {
    for (const Sentinel& sentinel : m_sentinels) {
        ::kill(sentinel.pid, signal);
    }
}

std::string SentinelGroup::url() const {
    std::string hosts;
    for (const Sentinel& sentinel : m_sentinels) {
        hosts +=
            (hosts.empty() ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinel.port);
    }
    return "redis-sentinel://" + hosts + "#" + k_master_name;
}

Connection SentinelGroup::sentinel(std::size_t index) const {
    ConnectOptions options{
        parse_redis_url("redis://127.0.0.1:" + std::to_string(m_sentinels.at(index).port))};
    if (!m_options.sentinel_password.empty()) {
        options.url.password = m_options.sentinel_password;
    }
    return Connection(options);
}

std::size_t SentinelGroup::master_index() const {
    Connection connection = sentinel(0);
    const Reply address = connection.call({"SENTINEL", "get-master-addr-by-name", k_master_name});
    const int port = std::stoi(address.at(1).as_string());
    for (std::size_t i = 0; i < m_servers.size(); ++i) {
        if (m_servers[i]->port() == port) {
            return i;
        }
    }
    throw std::runtime_error("the sentinels name a master outside the group");
}

void SentinelGroup::wait_until_ready() {
    const auto replicas = static_cast<std::size_t>(m_options.replicas);
    await(
        [&] {
            for (std::size_t i = 0; i < m_sentinels.size(); ++i) {
                Connection connection = sentinel(i);
                const Reply known = connection.call({"SENTINEL", "replicas", k_master_name});
                std::size_t linked = 0;
                for (const Reply& replica : known.as_array()) {
                    // Each replica is a flat list of field, value pairs.
                    const auto& fields = replica.as_array();
                    for (std::size_t f = 0; f + 1 < fields.size(); f += 2) {
                        if (fields[f].as_string() == "master-link-status" &&
                            fields[f + 1].as_string() == "ok") {
                            ++linked;
                        }
                    }
                }
                const Reply others = connection.call({"SENTINEL", "sentinels", k_master_name});
                if (linked < replicas || others.as_array().size() < m_sentinels.size() - 1) {
                    return false;
                }
            }
            return true;
        },
        k_ready_timeout, "the sentinels to know the replicas and each other");
}

std::size_t SentinelGroup::failover() {
    const std::size_t old_master = master_index();
    Connection connection = sentinel(0);
    connection.call({"SENTINEL", "FAILOVER", k_master_name});
    return wait_for_new_master(old_master);
}

std::size_t SentinelGroup::wait_for_new_master(std::size_t old_master,
                                               std::chrono::milliseconds timeout) {
    std::size_t new_master = old_master;
    await(
        [&] {
            std::size_t named = old_master;
            for (std::size_t i = 0; i < m_sentinels.size(); ++i) {
                Connection connection = sentinel(i);
                const Reply address =
                    connection.call({"SENTINEL", "get-master-addr-by-name", k_master_name});
                const int port = std::stoi(address.at(1).as_string());
                std::size_t index = old_master;
                for (std::size_t s = 0; s < m_servers.size(); ++s) {
                    if (m_servers[s]->port() == port) {
                        index = s;
                    }
                }
                if (index == old_master || (i > 0 && index != named)) {
                    return false;
                }
                named = index;
            }
            Connection master = m_servers.at(named)->admin();
            if (master.call({"ROLE"}).at(0).as_string() != "master") {
                return false;
            }
            new_master = named;
            return true;
        },
        timeout, "a new master");
    return new_master;
}

} // namespace redsem::test

#pragma once

#include <memory>
#include <string>
#include <vector>

#include "redis/connection.hpp"
#include "support/redis_server.hpp"

namespace redsem::test {

// A Redis Sentinel deployment for one test, on loopback: a master, its replicas and three
// sentinels (redis-server --sentinel, quorum 2) with short timeouts (down-after-milliseconds
// 1000), each in a temporary directory of its own. Ready when every sentinel knows the master,
// every replica and the other two sentinels. Stopped and removed by the destructor.
class SentinelGroup {
public:
    static constexpr const char* k_master_name = "redsem-test";

    struct Options {
        int replicas = 1;
        std::string sentinel_password; // requirepass of the sentinels; empty: none
    };

    SentinelGroup();
    explicit SentinelGroup(Options options);
    ~SentinelGroup();
    SentinelGroup(const SentinelGroup&) = delete;
    SentinelGroup& operator=(const SentinelGroup&) = delete;

    // redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3#redsem-test
    std::string url() const;
    // The data servers: 0 is the first master, then the replicas.
    RedisServer& server(std::size_t index) { return *m_servers.at(index); }
    std::size_t server_count() const { return m_servers.size(); }
    // The server the sentinels name as the master now (the first sentinel is asked).
    std::size_t master_index() const;
    int sentinel_port(std::size_t index) const { return m_sentinels.at(index).port; }
    // A connection to sentinel `index`, authenticated when the sentinels have a password.
    Connection sentinel(std::size_t index) const;
    // Sends `signal` to every sentinel process (SIGSTOP: sentinels that do not answer).
    void signal_sentinels(int signal) const;

    // SENTINEL FAILOVER, then waits until every sentinel names another server as the master
    // and that server says it is one. Returns the new master's index.
    std::size_t failover();
    // Waits until every sentinel names a master other than `old_master` and it says it is one
    // (after the old one was killed); returns the new master's index.
    std::size_t wait_for_new_master(std::size_t old_master,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30));

private:
    struct Sentinel {
        int port = 0;
        int pid = -1;
        std::string dir;
    };

    // Starts `sentinel` on a free port, and on another if that one was taken meanwhile.
    void start_sentinel(Sentinel& sentinel);
    // False when its port was taken.
    bool launch_sentinel(Sentinel& sentinel);
    void wait_until_ready();

    Options m_options;
    std::vector<std::unique_ptr<RedisServer>> m_servers;
    std::vector<Sentinel> m_sentinels;
};

} // namespace redsem::test

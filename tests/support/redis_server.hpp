#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "redis/connection.hpp"

namespace redsem::test {

// A private redis-server for one test: started in a fresh temporary directory, listening on
// a Unix socket there (and, when asked, on a free loopback TCP port; never 6379), ready when
// it answers PING, stopped and removed by the destructor.
class RedisServer {
public:
    struct Options {
        bool tcp = false;
        bool ipv6 = false;                   // listen on [::1] instead of 127.0.0.1
        std::vector<std::string> extra_args; // e.g. {"--requirepass", "secret"}
        std::string admin_password;          // what admin() authenticates with
        std::string admin_user;
        // A server redsem has never used: its first admissions wait for the loss grace, as
        // after a loss of data. By default the server is marked as long in use (mark_in_use).
        bool new_data_set = false;
        // Options that take a port of their own, e.g. "--tls-port" or "--cluster-port": each
        // is given a free port (port_of() says which).
        std::vector<std::string> port_options;
    };

    RedisServer();
    explicit RedisServer(Options options);
    ~RedisServer();
    RedisServer(const RedisServer&) = delete;
    RedisServer& operator=(const RedisServer&) = delete;

    // unix:///tmp/.../redis.sock (no credentials).
    std::string socket_url() const;
    // redis://127.0.0.1:PORT or redis://[::1]:PORT; only with Options::tcp.
    std::string tcp_url() const;
    int port() const { return m_port; }
    // The port given to one of Options::port_options.
    int port_of(const std::string& option) const;
    const std::string& dir() const { return m_dir; }

    // A new connection with the admin credentials, for setting up and observing.
    Connection admin() const;

    // Stops the server (SIGTERM: with --appendonly yes it keeps its data) and starts it again
    // on the same socket, port and directory, after it stayed down for `down`.
    void restart(std::chrono::milliseconds down = std::chrono::milliseconds{0});
    // SIGKILL: the server dies at once, as in a crash, and stays down.
    void kill();
    // Sends signal `number` to the server process (SIGSTOP, SIGCONT: a server that hangs).
    void signal(int number) const;

    // Writes redsem's epoch key under `prefix` in database `db` (see lua/lib/epoch.lua) as a
    // long-used Redis has it: this server process, no possible loss of data. Without it the
    // first admissions wait for the loss grace.
    void mark_in_use(const std::string& prefix = "redsem", int db = 0) const;

private:
    enum class Started { ready, port_taken };
    // The first start: free ports are chosen, and chosen again if one was taken in between.
    void start_on_free_ports();
    Started start();
    void stop();

    Options m_options;
    std::string m_dir;
    std::string m_socket;
    int m_port = 0;
    std::vector<int> m_option_ports; // one per Options::port_options
    int m_pid = -1;
};

// A TCP port on 127.0.0.1 that nothing listened on a moment ago, and that no other call of
// free_port() in any test process hands out while this process lives (a lock file in the
// temporary directory reserves it). Something else may still take it: whoever binds it
// retries with a fresh port on EADDRINUSE (as RedisServer and SentinelGroup do).
int free_port();

// Whether a redis-server log file says that it could not listen: a port was taken.
bool port_was_taken(const std::string& log);

} // namespace redsem::test

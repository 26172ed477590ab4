#pragma once

#include <atomic>
#include <functional>
#include <thread>

namespace redsem::test {

// A socket listening on a free port of 127.0.0.1 (stored in `port`), for the fake servers and
// proxies of the tests; throws when none can be had.
int listen_on_loopback(int& port);

// A loopback TCP proxy in front of a server's port on 127.0.0.1: it relays every connection
// both ways, and a filter decides what becomes of the bytes the server sends.
class LoopbackProxy {
public:
    // Given `size` bytes (`data`) that the server sent on the proxy's `connection`th
    // connection (0 for the first), returns how many of the first of them to pass on to the
    // client (the rest are dropped, the connection stays open), or -1 to close the
    // connection instead.
    using Filter = std::function<long long(int connection, const char* data, long long size)>;

    LoopbackProxy(int server_port, Filter filter);
    ~LoopbackProxy();
    LoopbackProxy(const LoopbackProxy&) = delete;
    LoopbackProxy& operator=(const LoopbackProxy&) = delete;

    int port() const { return m_port; }

private:
    void serve();
    void relay(int client, int connection);

    int m_server_port;
    Filter m_filter;
    int m_listener = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::thread m_thread;
};

// On the first connection it passes the client's requests on, but when Redis answers with
// anything other than an error it closes the client's connection instead of passing the
// answer on: the request ran, the reply was lost. Later connections are passed through
// untouched.
class CuttingProxy {
public:
    explicit CuttingProxy(int redis_port);

    int port() const { return m_proxy.port(); }
    // How many replies were swallowed.
    int cuts() const { return m_cuts.load(); }

private:
    std::atomic<int> m_cuts{0};
    LoopbackProxy m_proxy; // after what its filter uses: its threads end first
};

// Passes connections through until the server has sent `budget` more bytes (counted over all
// connections; -1: no limit), then stops passing the server's bytes on (in the middle of a TLS
// record, most likely) while keeping the connections open: a reply that stops arriving
// half-way.
class StallingProxy {
public:
    StallingProxy(int server_port, long long budget);

    int port() const { return m_proxy.port(); }
    // From now on pass `budget` more bytes from the server, then stall.
    void stall_after(long long budget) { m_left = budget; }

private:
    std::atomic<long long> m_left; // -1: no limit
    LoopbackProxy m_proxy;         // after what its filter uses: its threads end first
};

} // namespace redsem::test

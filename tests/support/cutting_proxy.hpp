#pragma once

#include <atomic>
#include <thread>

namespace redsem::test {

// A loopback TCP proxy in front of a Redis port. On the first connection it passes the
// client's requests on, but when Redis answers with anything other than an error it closes
// the client's connection instead of passing the answer on: the request ran, the reply was
// lost. Later connections are passed through untouched.
class CuttingProxy {
public:
    explicit CuttingProxy(int redis_port);
    ~CuttingProxy();
    CuttingProxy(const CuttingProxy&) = delete;
    CuttingProxy& operator=(const CuttingProxy&) = delete;

    int port() const { return m_port; }
    // How many replies were swallowed.
    int cuts() const { return m_cuts.load(); }

private:
    void serve();
    void relay(int client, bool cut);

    int m_redis_port;
    int m_listener = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_cuts{0};
    std::thread m_thread;
};

} // namespace redsem::test

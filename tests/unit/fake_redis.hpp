#pragma once

// Scripted Redis servers behind the transport seam (ConnectOptions::open_transport), so that
// unit tests drive Connection and its topologies without a server: each fake answers the
// commands it receives with what the test's function returns, in RESP.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "redis/server_connection.hpp"

namespace redsem::test {

using Words = std::vector<std::string>;

// RESP encodings of replies, for the fakes' answers.
std::string simple(const std::string& status);
std::string error(const std::string& text);
std::string bulk(const std::string& text);
std::string integer(long long value);
std::string array(const std::vector<std::string>& encoded);

// One fake server: answers each command with `answer` (RESP), and keeps what it was sent.
struct FakeServer {
    std::function<std::string(const Words&)> answer;
    std::vector<Words> received;
};

// The fake servers by "host:port", and the transport opener that reaches them. Opening an
// address that has no fake (or one marked down) fails as an unreachable server does.
class FakeNetwork {
public:
    FakeServer& add(const std::string& address, std::function<std::string(const Words&)> answer);
    FakeServer& at(const std::string& address) { return *m_servers.at(address); }
    void take_down(const std::string& address) { m_down.push_back(address); }
    TransportOpener opener();
    // Every address opened, in order.
    const std::vector<std::string>& opened() const { return m_opened; }

private:
    std::map<std::string, std::unique_ptr<FakeServer>> m_servers;
    std::vector<std::string> m_down;
    std::vector<std::string> m_opened;
};

} // namespace redsem::test

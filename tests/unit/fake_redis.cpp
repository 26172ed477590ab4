#include "fake_redis.hpp"

#include "util/errors.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace redsem::test {

std::string simple(const std::string& status) {
    return "+" + status + "\r\n";
}
std::string error(const std::string& text) {
    return "-" + text + "\r\n";
}
std::string bulk(const std::string& text) {
    return fmt::format("${}\r\n{}\r\n", text.size(), text);
}
std::string integer(long long value) {
    return fmt::format(":{}\r\n", value);
}
std::string array(const std::vector<std::string>& encoded) {
    std::string out = fmt::format("*{}\r\n", encoded.size());
    for (const std::string& item : encoded) {
        out += item;
    }
    return out;
}

namespace {

// Parses the commands in `bytes` (RESP arrays of bulk strings, as hiredis formats them).
std::vector<Words> parse_commands(const std::string& bytes) {
    std::vector<Words> commands;
    std::size_t at = 0;
    auto number_after = [&](char kind) {
        if (bytes.at(at) != kind) {
            throw std::logic_error("not a RESP command");
        }
        const std::size_t end = bytes.find("\r\n", at);
        const long long value = std::stoll(bytes.substr(at + 1, end - at - 1));
        at = end + 2;
        return static_cast<std::size_t>(value);
    };
    while (at < bytes.size()) {
        Words words(number_after('*'));
        for (std::string& word : words) {
            const std::size_t length = number_after('$');
            word = bytes.substr(at, length);
            at += length + 2;
        }
        commands.push_back(std::move(words));
    }
    return commands;
}

class FakeTransport final : public Transport {
public:
    explicit FakeTransport(FakeServer& server) : m_server(server) {}

    void write_all(std::string_view data, Clock::time_point /*deadline*/) override {
        for (const Words& command : parse_commands(std::string(data))) {
            m_server.received.push_back(command);
            m_pending += m_server.answer(command);
        }
    }

    ReadResult read_some(char* buffer, std::size_t size, Clock::time_point /*deadline*/,
                         int /*interrupt_fd*/) override {
        if (m_pending.empty()) {
            return ReadResult{.status = ReadResult::Status::timed_out};
        }
        const std::size_t n = std::min(size, m_pending.size());
        std::memcpy(buffer, m_pending.data(), n);
        m_pending.erase(0, n);
        return ReadResult{.status = ReadResult::Status::data, .size = n};
    }

private:
    FakeServer& m_server;
    std::string m_pending;
};

} // namespace

FakeServer& FakeNetwork::add(const std::string& address,
                             std::function<std::string(const Words&)> answer) {
    auto server = std::make_unique<FakeServer>();
    server->answer = std::move(answer);
    FakeServer& added = *server;
    m_servers[address] = std::move(server);
    return added;
}

TransportOpener FakeNetwork::opener() {
    return
        [this](const RedisUrl& url, const TlsOptions&, Milliseconds) -> std::unique_ptr<Transport> {
            const std::string address = fmt::format("{}:{}", url.host, url.port);
            m_opened.push_back(address);
            const auto found = m_servers.find(address);
            if (found == m_servers.end() ||
                std::find(m_down.begin(), m_down.end(), address) != m_down.end()) {
                throw UnavailableError(fmt::format("cannot connect to Redis at {}", address));
            }
            return std::make_unique<FakeTransport>(*found->second);
        };
}

} // namespace redsem::test

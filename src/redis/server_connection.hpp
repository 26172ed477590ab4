#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"
#include "redis/transport.hpp"
#include "redis/url.hpp"

struct redisReader;

namespace redsem {

struct ReplyBudget; // server_connection.cpp

using Milliseconds = std::chrono::milliseconds;

inline constexpr Milliseconds k_default_connect_timeout{2000};
// How long a command may take to answer, beyond any time it is meant to block.
inline constexpr Milliseconds k_default_command_timeout{5000};

// Opens the byte stream to one server: Transport::open, or a fake in unit tests (the seam
// below every connection, as ninja tests through its DiskInterface).
using TransportOpener = std::function<std::unique_ptr<Transport>(
    const RedisUrl& server, const TlsOptions& tls, Milliseconds connect_timeout)>;

struct ConnectOptions {
    RedisUrl url;
    Milliseconds connect_timeout = k_default_connect_timeout;
    Milliseconds command_timeout = k_default_command_timeout;
    TlsOptions tls = {};                               // for a rediss:// URL
    std::optional<std::string> sentinel_password = {}; // a sentinel URL: AUTH to the sentinels
    TransportOpener open_transport = Transport::open;
    // redsem's scripts are called as functions of its library (FCALL, Redis 7), where the
    // server and the user allow; false: by EVALSHA and EVAL only (REDSEM_FUNCTIONS=0).
    bool functions = true;
};

// One connection to one Redis server: commands formatted and replies parsed by hiredis, the
// bytes carried by a Transport (plain or TLS), AUTH and SELECT at connect, and the deadlines.
// Knows nothing of Sentinel or Cluster: a Topology decides which server it talks to.
//
// After any I/O error the transport and the parser's state are thrown away (is_open() turns
// false); the owner opens it anew.
class ServerConnection {
public:
    explicit ServerConnection(const ConnectOptions& options);
    ~ServerConnection();
    ServerConnection(ServerConnection&&) noexcept;
    ServerConnection& operator=(ServerConnection&&) noexcept;
    ServerConnection(const ServerConnection&) = delete;
    ServerConnection& operator=(const ServerConnection&) = delete;

    // Connects to `server` within the connect timeout, then authenticates and selects the
    // database. Throws UnavailableError when it cannot be reached, DeniedError when AUTH is
    // refused, UsageError for a database the server does not have.
    void open(const RedisUrl& server);
    // The same, within `connect_timeout` instead of the options' (one seed's share of it).
    void open(const RedisUrl& server, Milliseconds connect_timeout);
    void close() noexcept;
    bool is_open() const noexcept { return m_transport != nullptr; }

    // The server opened last, for messages.
    const RedisUrl& server() const noexcept { return m_server; }
    Endpoint endpoint() const { return Endpoint{m_server.host, m_server.port}; }
    Milliseconds command_timeout() const noexcept { return m_command_timeout; }
    void set_command_timeout(Milliseconds timeout) noexcept { m_command_timeout = timeout; }
    // No reply is waited for past `latest` (none: the timeouts alone decide): a caller's
    // bounded wait (acquire -w) is not stretched by a server that stopped answering.
    void set_latest_reply(std::optional<std::chrono::steady_clock::time_point> latest) noexcept {
        m_latest_reply = latest;
    }

    // Sends one command and reads its reply, error replies included. Waits up to the command
    // timeout plus `blocking_for` (for BLPOP). When `interrupt_fd` (>= 0) becomes readable
    // first, closes and throws WaitInterrupted. Throws ConnectionLost when the connection broke
    // after sending, UnavailableError when a new connection's server never answered.
    Reply exchange(const std::vector<std::string>& argv,
                   Milliseconds blocking_for = Milliseconds{0}, int interrupt_fd = -1);

    // A batch: append() formats commands, flush() sends them in one write, read_reply() reads
    // one reply each, in order, with the deadlines of exchange().
    void append(const std::vector<std::string>& argv);
    void flush();
    Reply read_reply(Milliseconds blocking_for, int interrupt_fd);

    // A field of the server's HELLO reply ("mode": standalone, cluster or sentinel; "role":
    // master or replica); nullopt when the server does not answer HELLO (renamed away). Every
    // user may send HELLO, whatever its ACL rules, unlike ROLE (@dangerous) or CLUSTER.
    std::optional<std::string> hello_field(std::string_view field);

    // Before a blocking command on a connection whose server has not answered yet: a PING, so
    // that a server that never answers is reported within the connect timeout.
    void check_answers(Milliseconds blocking_for, int interrupt_fd);

private:
    using ReaderPtr = std::unique_ptr<redisReader, void (*)(redisReader*)>;
    using Clock = std::chrono::steady_clock;

    void handshake();
    // When a reply to a command sent now must have come: the command timeout plus
    // `blocking_for`, or sooner while the connect timeout runs (see m_first_reply_by).
    Clock::time_point reply_deadline(Milliseconds blocking_for) const;
    // Added to a connection closed before its first answer: what may have closed it.
    std::string_view closed_hint() const;
    // Fails a reply larger than any redsem's commands get: a broken or hostile server.
    [[noreturn]] void refuse_reply(std::string_view what);
    // After data was fed to the reader: refuses what is unparsed when it is too much.
    void check_unparsed();

    Milliseconds m_connect_timeout;
    Milliseconds m_command_timeout;
    TlsOptions m_tls;
    TransportOpener m_open_transport;
    RedisUrl m_server;
    std::unique_ptr<Transport> m_transport;
    ReaderPtr m_reader;
    std::unique_ptr<ReplyBudget> m_budget; // the reader's privdata: its address stays
    std::string m_output;                  // commands formatted, not sent yet
    // Set from open() until the server's first reply: the connect timeout covers the whole
    // handshake, up to the first reply, so a server that accepts connections but never
    // answers is reported as unreachable within it.
    std::optional<Clock::time_point> m_first_reply_by;
    std::optional<Clock::time_point> m_latest_reply; // see set_latest_reply()
};

// The hiredis version redsem was built with, "MAJOR.MINOR.PATCH" (for --version): only
// src/redis/ includes hiredis.
std::string hiredis_version();

} // namespace redsem

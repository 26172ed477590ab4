#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "redis/cluster.hpp"
#include "redis/command.hpp"
#include "redis/reply.hpp"
#include "redis/script.hpp"
#include "redis/sentinel.hpp"
#include "redis/transport.hpp"
#include "redis/url.hpp"

struct redisReader;

namespace redsem {

using Milliseconds = std::chrono::milliseconds;

inline constexpr Milliseconds k_default_connect_timeout{2000};
// How long a command may take to answer, beyond any time it is meant to block.
inline constexpr Milliseconds k_default_command_timeout{5000};

// How long an acquire keeps reconnecting after Redis became unreachable (a restart, a blip)
// before it gives up: inside the waiters' liveness (5s), so a queued waiter keeps its place.
inline constexpr Milliseconds k_reconnect_window{4'000};
// Through sentinels, how long an outage of the master is ridden out (retried with the same
// token) before it counts as one: a failover takes Sentinel's down-after-milliseconds (30s by
// default) and an election.
inline constexpr Milliseconds k_failover_window{60'000};
// Through sentinels, how often a connection in use asks a sentinel again whether its server
// is still the master: after a failover the old master may go on accepting writes (that will
// be lost) until the sentinels turn it into a replica, seconds later.
inline constexpr Milliseconds k_master_recheck{1'000};
// ... and before a release, unless a sentinel named the master within this.
inline constexpr Milliseconds k_release_recheck{100};
// ... asking one sentinel, and waiting at most this for it (the connect timeout if shorter).
inline constexpr Milliseconds k_recheck_timeout{500};

struct ConnectOptions {
    RedisUrl url;
    Milliseconds connect_timeout = k_default_connect_timeout;
    Milliseconds command_timeout = k_default_command_timeout;
    TlsOptions tls = {}; // for a rediss:// URL
    std::optional<std::string> sentinel_password = {}; // a sentinel URL: AUTH to the sentinels
};

// The hiredis version redsem was built with, "MAJOR.MINOR.PATCH" (for --version): only
// src/redis/ includes hiredis.
std::string hiredis_version();

// The error a script's error reply stands for: a refusal (NOPERM, OOM, READONLY, ...) keeps
// its meaning inside a script; anything else from a script is a bug in it (InternalError).
[[noreturn]] void throw_script_error(const Script& script, const std::string& error);

// One connection to Redis, the only code that talks hiredis (its protocol: commands are
// formatted and replies parsed by hiredis; the bytes travel over a Transport, plain or TLS).
// Connects lazily, authenticates and selects the database; after any I/O error the transport
// and the parser's state are thrown away and the next command connects anew.
//
// Through sentinels (a redis-sentinel:// URL), connecting first asks the sentinels where the
// master is and confirms with ROLE that it is one; a master that cannot be reached or is not
// one is a failover under way (a transient error). A connection in use asks a sentinel again
// at most every k_master_recheck, before a command, and moves to the new master when there is
// one. A READONLY or UNBLOCKED reply means the server stopped being the master and nothing
// ran: the command is sent once more to the master found anew.
//
// On a Redis Cluster (found lazily: the first MOVED reply, or cluster_primaries()), every
// command goes to the primary that serves its routing key's hash slot, over this connection's
// one transport, which moves between nodes as needed (redsem's commands mostly concern one
// semaphore, so one node). MOVED updates the slot map and resends; ASK resends to the
// migration's target after ASKING; TRYAGAIN and CLUSTERDOWN (a migration half done, a failover
// under way) are resent after a pause that doubles, until the command timeout runs out. None
// of those replies means the command ran, so resending is safe. A node that cannot be reached
// makes the next command ask the nodes for the slot map anew (a replica may have taken over).
// A server that is not a cluster pays nothing for this: no command is added.
class Connection {
public:
    explicit Connection(ConnectOptions options);
    ~Connection();
    Connection(Connection&&) noexcept;
    Connection& operator=(Connection&&) noexcept;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // redsem's calls: each names the key it routes by (see Command), so that a router for
    // Redis Cluster can send it to the right node.

    // Sends one command and returns its reply, error replies included. Waits up to the command
    // timeout plus `blocking_for` (for BLPOP). When `interrupt_fd` (>= 0) becomes readable
    // first, drops the connection and throws WaitInterrupted. Throws UnavailableError when
    // Redis cannot be reached, ConnectionLost when the connection broke after sending.
    Reply command(const Command& command, Milliseconds blocking_for = Milliseconds{0},
                  int interrupt_fd = -1);

    // Like command(), but an error reply becomes the Error that classify_reply_error() names.
    Reply call(const Command& command);

    // Sends all `commands` in one write and returns their replies in order, error replies
    // included: one round trip for a batch of reads.
    std::vector<Reply> pipeline(const std::vector<Command>& commands);

    // Runs a script: EVALSHA, and on NOSCRIPT the body with EVAL (which also caches it).
    // Appends one last argument, "1" when sent with EVAL, else "0": a script learns that it
    // may be the first to run in this server process (see lua/lib/epoch.lua). An error reply is
    // thrown by throw_script_error().
    Reply eval(ScriptCall call);

    // Runs every call in one round trip (two when the server lacks the script), as eval()
    // does, and returns the replies in order, error replies included.
    std::vector<Reply> eval_pipeline(const std::vector<ScriptCall>& calls);

    // The same without a routing key, to this connection's server: for tests and tools that
    // speak to one known server.
    Reply command(const std::vector<std::string>& argv, Milliseconds blocking_for = Milliseconds{0},
                  int interrupt_fd = -1);
    Reply call(const std::vector<std::string>& argv);

    // Connects now (normally done by the first command); throws as command() does.
    void connect();
    void disconnect() noexcept;
    bool connected() const noexcept { return m_transport != nullptr; }
    const ConnectOptions& options() const noexcept { return m_options; }
    void set_command_timeout(Milliseconds timeout) noexcept {
        m_options.command_timeout = timeout;
    }
    // The server connected to last (through sentinels: the master they named), for messages.
    std::string server() const { return m_server.describe(); }
    bool through_sentinels() const noexcept {
        return m_options.url.kind == RedisUrl::Kind::sentinel;
    }
    // Through sentinels: asks a sentinel whether the server this connection uses is still
    // the master, unless one said so within `fresh`; when it is not (a failover), drops the
    // connection, so that the next command goes to the new master, and returns true. False
    // otherwise, also when no sentinel answers.
    bool master_moved(Milliseconds fresh = Milliseconds{0});
    // How long a caller rides out Redis being unreachable before giving up: longer through
    // sentinels (a failover) than to one server (a restart, a blip).
    Milliseconds outage_window() const noexcept;
    // How many replicas have received every write this connection has made, waiting up to
    // `timeout` for `replicas` of them (WAIT).
    long long wait_for_replicas(long long replicas, Milliseconds timeout);

    // The primaries of the Redis Cluster this connection's server belongs to (asking it with
    // CLUSTER SLOTS unless the slot map is known); empty when it is not a cluster.
    std::vector<Endpoint> cluster_primaries();
    // Sends the commands without a routing key to `node` from now on (a cluster's primary,
    // for SCAN and TIME over its keys).
    void use_node(const Endpoint& node);

private:
    using ReaderPtr = std::unique_ptr<redisReader, void (*)(redisReader*)>;
    using Clock = std::chrono::steady_clock;

    // One command of a batch: the key it routes by (empty: this connection's server) and its
    // words.
    struct Outgoing {
        const std::string* key;
        const std::vector<std::string>* argv;
    };

    Reply exchange(const std::vector<std::string>& args, Milliseconds budget, int interrupt_fd);
    // Sends `batch` and returns the replies in order, following redirects (see the class
    // comment); each destination's share goes in one write. `budget` as for command().
    std::vector<Reply> send_all(const std::vector<Outgoing>& batch,
                                Milliseconds budget = Milliseconds{0}, int interrupt_fd = -1);
    // Where a redirect sends one command of a batch next: to `to`, after ASKING when `asking`.
    struct Hop {
        Endpoint to;
        bool asking;
    };
    // Sends `indices` of `batch` to the server connected to, ASKING first where their `hops`
    // say so, and reads their replies.
    std::vector<Reply> send_group(const std::vector<Outgoing>& batch,
                                  const std::vector<std::size_t>& indices,
                                  const std::vector<std::optional<Hop>>& hops, Milliseconds budget,
                                  int interrupt_fd);
    // Where a command goes: where a redirect sent it; without a key, the node use_node()
    // named; else the slot's primary when known; else nullopt (the server connected to, or
    // where connect() goes).
    std::optional<Endpoint> destination(const Outgoing& command,
                                        const std::optional<Hop>& hop) const;
    // Connects to `node` unless connected there (nullopt: connect()).
    void go_to(const std::optional<Endpoint>& node);
    // Asks the seed, then every node the map names, for the slot map; keeps the old one when
    // none answers.
    void refresh_slots();
    Endpoint endpoint() const { return Endpoint{m_server.host, m_server.port}; }
    void append(const std::vector<std::string>& args);
    void flush();
    Reply read_reply(Clock::time_point deadline, int interrupt_fd);
    // When a reply to a command sent now must have come: the command timeout plus `budget`,
    // or sooner while the connect timeout runs (see m_first_reply_by).
    Clock::time_point reply_deadline(Milliseconds budget) const;
    void open(const RedisUrl& server);
    void open_master(const Endpoint& master);
    // Through sentinels: the master now, as the sentinels say (see ask_sentinels()).
    Endpoint find_master(std::size_t tries, Milliseconds timeout);
    void handshake();
    // Whether `reply` came from a server that is no longer a primary (READONLY, UNBLOCKED)
    // where the sentinels or the slot map can name another: then the connection is dropped
    // (and the slot map marked stale), to find the primary anew.
    bool from_former_master(const Reply& reply);
    // Added to a failure at first contact over plain TCP.
    std::string_view plain_to_tls_hint() const;

    ConnectOptions m_options;
    RedisUrl m_server;               // the server connected to (through sentinels: the master)
    SentinelChoice m_sentinel;       // whom to ask where the master is
    Clock::time_point m_checked_at;  // when a sentinel last named m_server as the master
    std::optional<SlotMap> m_slots; // a Redis Cluster's: which primary serves each slot
    bool m_slots_stale = false;     // a node could not be reached: ask for the map anew
    std::optional<Endpoint> m_home; // in a cluster, where commands without a key go
    std::unique_ptr<Transport> m_transport;
    ReaderPtr m_reader;
    std::string m_output; // commands formatted, not sent yet
    // Set from connect() until the server's first reply: the connect timeout covers the whole
    // handshake, up to the first reply, so a server that accepts connections but never
    // answers is reported as unreachable within it.
    std::optional<Clock::time_point> m_first_reply_by;
};

} // namespace redsem

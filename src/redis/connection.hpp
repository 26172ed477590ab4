#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "redis/command.hpp"
#include "redis/reply.hpp"
#include "redis/script.hpp"
#include "redis/server_connection.hpp"
#include "redis/transport.hpp"
#include "redis/url.hpp"
#include "util/boot_clock.hpp"

namespace redsem {

class Topology;

// Before a release, the primary is confirmed (Topology::primary_changed()) unless it was
// within this: a release must not go to a former master that still takes writes.
inline constexpr Milliseconds k_release_recheck{100};

// The error a script's error reply stands for: a refusal (NOPERM, OOM, READONLY, ...) keeps
// its meaning inside a script; anything else from a script is a bug in it (InternalError).
[[noreturn]] void throw_script_error(const Script& script, const std::string& error);

// A connection to Redis, whatever its topology: one server, a master found through sentinels,
// or a Redis Cluster (see topology.hpp; which one is decided here and nowhere above). Connects
// lazily; sends each command where its topology routes it, and follows what the topology
// makes of an error reply on the way (a redirect, a pause, a master found anew); none of
// those replies means the command ran, so resending is safe. After any I/O error the next
// command connects anew.
class Connection {
public:
    explicit Connection(ConnectOptions options);
    ~Connection();
    Connection(Connection&&) noexcept;
    Connection& operator=(Connection&&) noexcept;
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // While it lives, the connection's own retries (a cluster's TRYAGAIN and CLUSTERDOWN
    // pauses) end at `deadline` (none: the command timeout bounds them alone), and no reply is
    // waited for past `deadline` and one connect timeout: a caller's bounded wait (acquire -w)
    // is not stretched by them, nor by a server that stopped answering.
    class RetriesUntil {
    public:
        RetriesUntil(Connection& connection, std::optional<BootClock::time_point> deadline)
            : m_connection(connection), m_before(connection.m_retries_until) {
            m_connection.m_retries_until = deadline;
        }
        ~RetriesUntil() {
            m_connection.m_retries_until = m_before;
            m_connection.bound_replies();
        }
        RetriesUntil(const RetriesUntil&) = delete;
        RetriesUntil& operator=(const RetriesUntil&) = delete;

    private:
        Connection& m_connection;
        std::optional<BootClock::time_point> m_before;
    };

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

    // Runs a script: as a function of redsem's library (FCALL), loading the library where the
    // server lacks it (FUNCTION LOAD); where functions are refused (Redis before 7, an ACL
    // without FCALL or FUNCTION LOAD, ConnectOptions::functions off) by EVALSHA, and on
    // NOSCRIPT by its body with EVAL (which also caches it); or as call.send says (a call
    // that is not sha_then_body is never an FCALL).
    // Appends the argument "flags" and its value (see lua/lib/call.lua). An error reply is thrown
    // by throw_script_error().
    Reply eval(ScriptCall call);

    // Runs every call in one round trip (more when the server lacks the script), as eval()
    // does, and returns the replies in order, error replies included.
    std::vector<Reply> eval_pipeline(const std::vector<ScriptCall>& calls);

    // Runs the calls as one transaction (MULTI ... EXEC) on the server of the first call's
    // first key: nothing runs between them. Returns the replies in order, error replies
    // included; when the transaction did not run (a call was refused: NOPERM, OOM, ...), each
    // reply is that refusal. A call that the server lacks is resent (see eval()) with
    // the whole transaction, so the calls before it run again: each must be harmless to
    // repeat.
    std::vector<Reply> eval_atomically(const std::vector<ScriptCall>& calls);

    // The same without a routing key, to this connection's server: for tests and tools that
    // speak to one known server.
    Reply command(const std::vector<std::string>& argv, Milliseconds blocking_for = Milliseconds{0},
                  int interrupt_fd = -1);
    Reply call(const std::vector<std::string>& argv);

    // Connects now (normally done by the first command); throws as command() does.
    void connect();
    void disconnect() noexcept;
    bool connected() const noexcept;
    const ConnectOptions& options() const noexcept { return m_options; }
    void set_command_timeout(Milliseconds timeout) noexcept;
    // The server connected to last (through sentinels: the master they named), for messages.
    std::string server() const;
    // What the connection talks to, as its topology describes itself (status, doctor).
    std::string describe() const;
    // Whether the primary commands go to has changed since it was confirmed, asking anew
    // unless it was confirmed within `fresh` (a failover: the next command goes to the new
    // one). False where the topology cannot tell or never changes (see Topology).
    bool primary_changed(Milliseconds fresh = Milliseconds{0});
    // How long a caller rides out Redis being unreachable before giving up: longer where a
    // failover can happen (Sentinel, Cluster) than for one server (a restart, a blip). It may
    // grow once the connection finds out that it talks to a Redis Cluster.
    Milliseconds outage_window() const noexcept;
    // How many replicas have received every write this connection has made, waiting up to
    // `timeout` for `replicas` of them (WAIT).
    long long wait_for_replicas(long long replicas, Milliseconds timeout);

    // Calls `visit` once for each primary that holds keys (one server, the master, or every
    // primary of a cluster); meanwhile the commands without a routing key go to that primary.
    // A `visit` that takes a `const Endpoint*` is given the primary of a cluster, or null for
    // the one server.
    template <typename Visit> void for_each_primary(Visit visit) {
        const std::vector<Endpoint> nodes = primaries();
        if (nodes.empty()) {
            visit_primary(visit, nullptr);
            return;
        }
        for (const Endpoint& node : nodes) {
            pin(node);
            visit_primary(visit, &node);
        }
    }

private:
    template <typename Visit> static void visit_primary(Visit& visit, const Endpoint* node) {
        if constexpr (std::is_invocable_v<Visit&, const Endpoint*>) {
            visit(node);
        } else {
            visit();
        }
    }

    // One command of a batch: the key it routes by (empty: no key) and its words; or, when
    // `atomic` is set, commands that run as one transaction (a batch of their own), whose
    // reply is EXEC's, or the first refusal that kept the transaction from running.
    struct Outgoing {
        const std::string* key;
        const std::vector<std::string>* argv;
        const std::vector<std::vector<std::string>>* atomic = nullptr;
    };
    // Where a redirect sends one command of a batch next: to `to`, after ASKING when `asking`.
    struct Hop {
        Endpoint to;
        bool asking;
    };

    // Sends `batch` and returns the replies in order, following redirects (see the class
    // comment); each destination's share goes in one write. `blocking_for` as for command().
    std::vector<Reply> send_all(const std::vector<Outgoing>& batch,
                                Milliseconds blocking_for = Milliseconds{0}, int interrupt_fd = -1);
    // Sends `indices` of `batch` over the link, ASKING first where their `hops` say so, and
    // reads their replies.
    std::vector<Reply> send_group(const std::vector<Outgoing>& batch,
                                  const std::vector<std::size_t>& indices,
                                  const std::vector<std::optional<Hop>>& hops,
                                  Milliseconds blocking_for, int interrupt_fd);
    // Sends the transaction `commands` over the link, after ASKING when `asking`, and returns
    // its reply (see Outgoing::atomic).
    Reply send_transaction(const std::vector<std::vector<std::string>>& commands, bool asking,
                           int interrupt_fd);
    std::vector<Endpoint> primaries();
    void pin(const Endpoint& node);
    // How one script call was sent last (see eval_pipeline()).
    struct Attempt;
    // After `reply` to `call`, sent as `attempt` says, whether to send it again, and how
    // (`attempt` is updated): FCALL after loading the library (routed by `route`) where the
    // server lacks it, EVALSHA where functions are refused or loading does not help, EVAL
    // after NOSCRIPT.
    bool retry_script(const ScriptCall& call, Attempt& attempt, const Reply& reply,
                      const std::string& route);
    // Loads `library` on the server of `route`; false when it could not be loaded (and, when
    // the user or the server refuses Functions, no FCALL is tried again).
    bool load_library(const FunctionLibrary& library, const std::string& route);
    // The latest time a reply is waited for (see RetriesUntil); none without a deadline.
    std::optional<std::chrono::steady_clock::time_point> latest_reply() const;
    // Tells the link latest_reply() (when a RetriesUntil ends: no bound left behind).
    void bound_replies() noexcept;
    // The topology, replaced by its successor when it found out that it is another.
    Topology& topology();

    ConnectOptions m_options;
    std::unique_ptr<Topology> m_topology;
    std::optional<BootClock::time_point> m_retries_until; // see RetriesUntil
    bool m_functions;                                     // scripts go by FCALL first
};

} // namespace redsem

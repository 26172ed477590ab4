#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"
#include "redis/server_connection.hpp"
#include "redis/url.hpp"

namespace redsem {

// How long a caller rides out Redis being unreachable before giving up. One server: a
// restart, a blip, inside the waiters' liveness (5s), so a queued waiter keeps its place.
inline constexpr Milliseconds k_reconnect_window{4'000};
// Through sentinels or on a cluster: a failover takes Sentinel's down-after-milliseconds (30s
// by default) or the cluster-node-timeout, and an election.
inline constexpr Milliseconds k_failover_window{60'000};

// What an error reply means for the command that got it. Every kind but `stands` means the
// command did not run, so sending it again is safe.
struct ReplyVerdict {
    enum class Kind {
        stands,   // the reply is the command's answer
        resend,   // send it again, to wherever the topology routes it now
        redirect, // send it again to `to`, after ASKING when `asking`
        pause,    // send it again after a pause (the retry policy's cluster pauses)
    };
    Kind kind = Kind::stands;
    Endpoint to = {};
    bool asking = false;
};

// Where commands go, and what the servers' error replies mean on the way: one server, a
// master found through sentinels, or the primaries of a Redis Cluster (each in a file of its
// own). A topology owns the one ServerConnection that commands travel over and moves it
// between servers as needed. Only Connection (connection.hpp) uses topologies; nothing above
// src/redis/ knows which one it has.
class Topology {
public:
    explicit Topology(const ConnectOptions& options);
    Topology(const ConnectOptions& options, ServerConnection link);
    virtual ~Topology();
    Topology(const Topology&) = delete;
    Topology& operator=(const Topology&) = delete;

    // What this is, for messages, `status` and `doctor`: "Redis at HOST:PORT", "the master
    // 'NAME' of the sentinels at ..." or "a Redis Cluster (seed HOST:PORT, N primaries)".
    virtual std::string describe() const = 0;

    // Called once before each batch of commands (Sentinel counts former masters anew).
    virtual void begin_batch() {}
    // Called before each round of sending, the batch's first and each resend (a cluster asks
    // for a slot map it knows to be stale).
    virtual void begin_round() {}

    // Where a command routed by `key` goes: a node, or nullopt for the server connect() goes
    // to. An empty key is a command about no key (SCAN, INFO, TIME of the server).
    virtual std::optional<Endpoint> destination(std::string_view key) const = 0;

    // Opens the link to the server commands go to by default, unless it is open and still the
    // right one (Sentinel: a master confirmed within k_master_recheck).
    virtual void connect() = 0;

    // Opens the link to `node` (nullopt: connect()), unless it is open there already.
    void go_to(const std::optional<Endpoint>& node);

    // What an error reply from the server the link is open to means. May close the link (a
    // former master) or throw (Sentinel: the master named anew is not one either).
    virtual ReplyVerdict judge(const Reply& reply) = 0;

    // Called from a catch block, when talking to `node` (nullopt: the default server) failed:
    // rethrows the error, or throws what it means in this topology.
    [[noreturn]] virtual void failed(const std::optional<Endpoint>& node);

    // Whether the primary that commands go to has changed since it was confirmed, asking anew
    // unless it was confirmed within `fresh`; when it has, closes the link, so that the next
    // command goes to the new one. False where the topology cannot tell or does not change.
    virtual bool primary_changed(Milliseconds fresh);

    // How long a caller rides out this topology's servers being unreachable.
    virtual Milliseconds outage_window() const = 0;

    // Every primary that holds keys; empty: just the server connect() goes to. May ask the
    // server (a cluster's slot map).
    virtual std::vector<Endpoint> primaries() = 0;

    // Sends the commands about no key to `node`, one of primaries(), from now on.
    virtual void pin(const Endpoint& node);

    // Whether scripts must keep their keys in one hash slot (their cluster keys).
    virtual bool wants_cluster_keys() const { return false; }

    // The topology to use from now on, once, when this one found out that it is another (a
    // server that answers MOVED is a cluster node); else null.
    std::unique_ptr<Topology> take_successor() { return std::move(m_successor); }

    ServerConnection& link() noexcept { return m_link; }
    const ServerConnection& link() const noexcept { return m_link; }
    const ConnectOptions& options() const noexcept { return m_options; }
    void set_command_timeout(Milliseconds timeout) noexcept {
        m_options.command_timeout = timeout;
        m_link.set_command_timeout(timeout);
    }

protected:
    // Opens the link to the URL's server; with several seeds (a Redis Cluster), to the first
    // that answers and is a cluster node, the seeds sharing one connect timeout. Throws
    // UsageError when a seed is no cluster node, or not a node of the same cluster (several
    // independent servers would each admit their own holders).
    void open_url();
    // With several seeds: throws UsageError unless CLUSTER NODES at `reached`, the seed the
    // link is open to, lists every seed of the URL.
    void check_seeds_known(const Endpoint& reached);

    ConnectOptions m_options;
    ServerConnection m_link;
    std::unique_ptr<Topology> m_successor;
};

// The topology of `options.url`: Sentinel for a sentinel URL, else one server (which hands
// over to the Cluster topology as soon as the server shows that it is a cluster node).
std::unique_ptr<Topology> make_topology(const ConnectOptions& options);

} // namespace redsem

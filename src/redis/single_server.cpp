#include "redis/single_server.hpp"

#include "redis/cluster_topology.hpp"

#include "util/errors.hpp"

#include <fmt/format.h>

namespace redsem {

std::string SingleServer::describe() const {
    return fmt::format("Redis at {}", m_options.url.describe());
}

std::optional<Endpoint> SingleServer::destination(std::string_view /*key*/) const {
    return std::nullopt;
}

void SingleServer::connect() {
    if (!m_link.is_open()) {
        open_url();
    }
}

Topology& SingleServer::become_cluster() {
    m_successor = std::make_unique<ClusterTopology>(m_options, std::move(m_link));
    m_link = ServerConnection(m_options);
    return *m_successor;
}

ReplyVerdict SingleServer::judge(const Reply& reply) {
    // Only a cluster node gives these.
    if (is_error_code(reply, "MOVED") || is_error_code(reply, "ASK") ||
        is_error_code(reply, "TRYAGAIN") || is_error_code(reply, "CLUSTERDOWN") ||
        is_error_code(reply, "CROSSSLOT")) {
        return become_cluster().judge(reply);
    }
    if (reply.text.rfind("ERR unknown command", 0) == 0 && m_link.is_open()) {
        // A sentinel knows none of the commands on data: say what it is, and the URL to use.
        // (The batch's replies are all read: the link is free for one more question.)
        std::optional<std::string> mode;
        try {
            mode = m_link.hello_field("mode");
        } catch (const Error&) {
        }
        if (mode == "sentinel") {
            throw UsageError(fmt::format(
                "{} is a Redis Sentinel, which keeps no data: use {}://{}#MASTER, with the "
                "master's name (SENTINEL MASTERS lists them)",
                m_options.url.describe(), m_options.url.tls ? "rediss-sentinel" : "redis-sentinel",
                m_link.endpoint().describe()));
        }
    }
    return {};
}

std::vector<Endpoint> SingleServer::primaries() {
    if (m_options.url.kind == RedisUrl::Kind::unix_socket) {
        return {}; // cluster nodes talk TCP to each other
    }
    connect();
    // Asked without CLUSTER, which a user or the server may not allow: a standalone server,
    // or a sentinel (which `doctor` points out), holds no slot map.
    if (const auto mode = m_link.hello_field("mode"); mode && *mode != "cluster") {
        return {};
    }
    const Reply reply = m_link.exchange({"CLUSTER", "SLOTS"});
    if (reply.is_error()) {
        if (reply.text.find("cluster support disabled") != std::string::npos) {
            return {};
        }
        throw_reply_error(reply.text);
    }
    SlotMap slots = SlotMap::from_cluster_slots(reply, m_link.endpoint());
    auto cluster =
        std::make_unique<ClusterTopology>(m_options, std::move(m_link), std::move(slots));
    m_link = ServerConnection(m_options);
    std::vector<Endpoint> nodes = cluster->primaries();
    m_successor = std::move(cluster);
    return nodes;
}

} // namespace redsem

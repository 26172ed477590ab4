#include "redis/cluster_topology.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace redsem {

ClusterTopology::ClusterTopology(const ConnectOptions& options, ServerConnection link,
                                 std::optional<SlotMap> slots)
    : Topology(options, std::move(link)), m_complete(slots.has_value()) {
    if (slots) {
        m_slots = std::move(*slots);
    }
}

std::string ClusterTopology::describe() const {
    const std::size_t primaries = m_slots.primaries().size();
    return fmt::format("a Redis Cluster (seed {}, {} primar{} known)", m_options.url.describe(),
                       primaries, primaries == 1 ? "y" : "ies");
}

void ClusterTopology::begin_round() {
    if (m_stale) {
        refresh_slots();
    }
}

std::optional<Endpoint> ClusterTopology::destination(std::string_view key) const {
    if (key.empty()) {
        return m_home;
    }
    if (const Endpoint* owner = m_slots.owner(key_slot(key))) {
        return *owner;
    }
    return std::nullopt;
}

void ClusterTopology::connect() {
    if (m_link.is_open()) {
        return;
    }
    if (m_home) {
        m_link.open(m_options.url.at(*m_home));
    } else {
        open_url();
    }
}

ReplyVerdict ClusterTopology::judge(const Reply& reply) {
    if (const auto redirect = parse_redirect(reply.text, m_link.endpoint())) {
        const bool moved = redirect->kind == Redirect::Kind::moved;
        if (moved) {
            m_slots.assign(redirect->slot, redirect->to);
        }
        return {.kind = ReplyVerdict::Kind::redirect, .to = redirect->to, .asking = !moved};
    }
    if (is_error_code(reply, "TRYAGAIN") || is_error_code(reply, "CLUSTERDOWN")) {
        return {.kind = ReplyVerdict::Kind::pause};
    }
    if (is_error_code(reply, "READONLY") || is_error_code(reply, "UNBLOCKED")) {
        // A primary demoted by a failover: nothing ran; the new map names its successor.
        m_link.close();
        m_stale = true;
        return {.kind = ReplyVerdict::Kind::resend};
    }
    return {};
}

void ClusterTopology::failed(const std::optional<Endpoint>& node) {
    m_stale = true; // a replica may have taken over
    try {
        throw;
    } catch (const Error& error) {
        if (node && error.transience() == Transience::unreachable) {
            // A node the cluster named (the seed was reached): it died, and a replica will
            // take over, or the map is being refreshed.
            throw Error(ExitCode::unavailable,
                        fmt::format("{} (a Redis Cluster failover under way?)", error.what()),
                        Transience::transient);
        }
        throw;
    }
}

std::vector<Endpoint> ClusterTopology::primaries() {
    if (m_stale) {
        refresh_slots();
    }
    if (!m_complete) {
        connect();
        const Reply reply = m_link.exchange({"CLUSTER", "SLOTS"});
        if (reply.is_error()) {
            throw_reply_error(reply.text);
        }
        m_slots = SlotMap::from_cluster_slots(reply, m_link.endpoint());
        m_complete = true;
    }
    return m_slots.primaries();
}

void ClusterTopology::pin(const Endpoint& node) {
    m_home = node; // the next command about no key connects there (a node that is down fails it)
}

void ClusterTopology::refresh_slots() {
    // The URL's nodes first (every seed), then those the cluster named.
    std::vector<Endpoint> candidates = m_options.url.seeds;
    if (candidates.empty()) {
        candidates.push_back(Endpoint{m_options.url.host, m_options.url.port});
    }
    for (const Endpoint& node : m_slots.nodes()) {
        if (std::none_of(candidates.begin(), candidates.end(),
                         [&](const Endpoint& known) { return same_node(node, known); })) {
            candidates.push_back(node);
        }
    }
    for (const Endpoint& node : candidates) {
        try {
            go_to(node);
            const Reply reply = m_link.exchange({"CLUSTER", "SLOTS"});
            if (!reply.is_error()) {
                m_slots = SlotMap::from_cluster_slots(reply, node);
                m_complete = true;
                m_stale = false;
                return;
            }
        } catch (const Error&) {
            m_link.close(); // this node is down too: ask the next
        }
    }
}

} // namespace redsem

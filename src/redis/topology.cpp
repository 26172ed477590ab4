#include "redis/topology.hpp"

#include "redis/cluster.hpp"
#include "redis/sentinel_topology.hpp"
#include "redis/single_server.hpp"

namespace redsem {

Topology::Topology(const ConnectOptions& options) : m_options(options), m_link(options) {}

Topology::Topology(const ConnectOptions& options, ServerConnection link)
    : m_options(options), m_link(std::move(link)) {}

Topology::~Topology() = default;

void Topology::go_to(const std::optional<Endpoint>& node) {
    if (!node) {
        connect();
        return;
    }
    if (m_link.is_open() && same_node(m_link.endpoint(), *node)) {
        return;
    }
    m_link.open(m_options.url.at(*node));
}

void Topology::failed(const std::optional<Endpoint>& /*node*/) {
    throw;
}

bool Topology::primary_changed(Milliseconds /*fresh*/) {
    return false;
}

void Topology::pin(const Endpoint& node) {
    go_to(node);
}

std::unique_ptr<Topology> make_topology(const ConnectOptions& options) {
    if (options.url.kind == RedisUrl::Kind::sentinel) {
        return std::make_unique<SentinelTopology>(options);
    }
    return std::make_unique<SingleServer>(options);
}

} // namespace redsem

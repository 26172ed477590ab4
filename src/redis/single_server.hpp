#pragma once

#include "redis/topology.hpp"

namespace redsem {

// One Redis server, at the URL's address or Unix socket. It pays nothing for the other
// topologies: no command is added. When the server shows that it is a Redis Cluster node (a
// MOVED, ASK, TRYAGAIN, CLUSTERDOWN or CROSSSLOT reply, or CLUSTER SLOTS asked by primaries()),
// the Cluster topology takes over, with this connection.
class SingleServer final : public Topology {
public:
    explicit SingleServer(const ConnectOptions& options) : Topology(options) {}

    std::string describe() const override;
    std::optional<Endpoint> destination(std::string_view key) const override;
    void connect() override;
    ReplyVerdict judge(const Reply& reply) override;
    Milliseconds outage_window() const override { return k_reconnect_window; }
    std::vector<Endpoint> primaries() override;

private:
    // Hands over to the Cluster topology; returns it.
    Topology& become_cluster();
};

} // namespace redsem

#pragma once

#include <optional>

#include "redis/cluster.hpp"
#include "redis/topology.hpp"

namespace redsem {

// The primaries of a Redis Cluster. Every command goes to the primary that serves its routing
// key's hash slot, over the one link, which moves between nodes as needed (redsem's commands
// mostly concern one semaphore, so one node). MOVED updates the slot map and resends; ASK
// resends to the migration's target after ASKING; TRYAGAIN and CLUSTERDOWN (a migration half
// done, a failover under way) are resent after the retry policy's cluster pauses. A node that
// cannot be reached, or that stopped being a primary (READONLY, UNBLOCKED), makes the next
// batch ask the nodes for the slot map anew (a replica may have taken over).
class ClusterTopology final : public Topology {
public:
    // `slots`: the whole map, from CLUSTER SLOTS; without it the map is learnt from MOVED
    // replies, and asked for whole when primaries() needs it.
    ClusterTopology(const ConnectOptions& options, ServerConnection link,
                    std::optional<SlotMap> slots = std::nullopt);

    std::string describe() const override;
    void begin_round() override;
    std::optional<Endpoint> destination(std::string_view key) const override;
    void connect() override;
    ReplyVerdict judge(const Reply& reply) override;
    [[noreturn]] void failed(const std::optional<Endpoint>& node) override;
    Milliseconds outage_window() const override { return k_failover_window; }
    std::vector<Endpoint> primaries() override;
    void pin(const Endpoint& node) override;
    bool wants_cluster_keys() const override { return true; }

private:
    // Asks the seed, then every node the map names, for the slot map; keeps the old one when
    // none answers.
    void refresh_slots();

    SlotMap m_slots;
    bool m_complete = false;        // m_slots came whole from CLUSTER SLOTS
    bool m_stale = false;           // a node could not be reached: ask for the map anew
    std::optional<Endpoint> m_home; // where commands without a key go (pin())
};

} // namespace redsem

#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"
#include "redis/url.hpp"

namespace redsem {

// Redis Cluster shards keys over 16384 hash slots, each served by one primary.
inline constexpr int k_cluster_slots = 16384;

// The hash slot of `key`: CRC16 (XMODEM) of its hash tag (the text between the first '{' and
// the next '}', when not empty) or else of the whole key, modulo 16384.
int key_slot(std::string_view key);

// A MOVED or ASK error reply: "MOVED 3999 127.0.0.1:6381". The slot lives elsewhere for good
// (moved) or, for this one command during a migration, at `to` (ask: send ASKING first).
struct Redirect {
    enum class Kind { moved, ask };
    Kind kind;
    int slot;
    Endpoint to;
};

// The redirect an error reply stands for, or nullopt. An empty or "?" host (a node that does
// not know its own address) is `from`'s.
std::optional<Redirect> parse_redirect(std::string_view error, const Endpoint& from);

bool same_node(const Endpoint& a, const Endpoint& b);

// Which primary serves each slot, as far as known: loaded whole from CLUSTER SLOTS, or slot by
// slot from MOVED replies.
class SlotMap {
public:
    SlotMap();

    // Parses a CLUSTER SLOTS reply from `asked`; throws InternalError when it is malformed.
    static SlotMap from_cluster_slots(const Reply& reply, const Endpoint& asked);

    const Endpoint* owner(int slot) const;
    void assign(int slot, const Endpoint& node);
    // Every primary that serves a slot, each once.
    std::vector<Endpoint> primaries() const;
    // Every node named (primaries, then replicas): whom to ask for a new map.
    const std::vector<Endpoint>& nodes() const noexcept { return m_nodes; }

private:
    std::size_t index_of(const Endpoint& node);

    std::vector<Endpoint> m_nodes;
    std::array<std::int16_t, k_cluster_slots> m_owner; // index into m_nodes, -1: unknown
};

} // namespace redsem

#include "redis/cluster.hpp"

#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace redsem {

namespace {

std::uint16_t crc16_xmodem(std::string_view data) {
    std::uint16_t crc = 0;
    for (const char c : data) {
        crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(c) << 8);
        for (int bit = 0; bit < 8; ++bit) {
            crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                      : static_cast<std::uint16_t>(crc << 1);
        }
    }
    return crc;
}

// "host:port", the host possibly an IPv6 address (the port follows the last ':').
std::optional<Endpoint> parse_host_port(std::string_view text, const Endpoint& from) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
        return std::nullopt;
    }
    const auto port = parse_integer(text.substr(colon + 1), 1, 65535);
    if (!port) {
        return std::nullopt;
    }
    std::string host(text.substr(0, colon));
    if (host.empty() || host == "?") {
        host = from.host;
    }
    if (!is_host_name(host)) {
        return std::nullopt;
    }
    return Endpoint{.host = std::move(host), .port = static_cast<int>(*port)};
}

} // namespace

int key_slot(std::string_view key) {
    if (const std::size_t open = key.find('{'); open != std::string_view::npos) {
        const std::size_t close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) {
            key = key.substr(open + 1, close - open - 1);
        }
    }
    return crc16_xmodem(key) % k_cluster_slots;
}

std::optional<Redirect> parse_redirect(std::string_view error, const Endpoint& from) {
    Redirect::Kind kind;
    if (error.rfind("MOVED ", 0) == 0) {
        kind = Redirect::Kind::moved;
        error.remove_prefix(6);
    } else if (error.rfind("ASK ", 0) == 0) {
        kind = Redirect::Kind::ask;
        error.remove_prefix(4);
    } else {
        return std::nullopt;
    }
    const std::size_t space = error.find(' ');
    if (space == std::string_view::npos) {
        return std::nullopt;
    }
    const auto slot = parse_integer(error.substr(0, space), 0, k_cluster_slots - 1);
    auto to = parse_host_port(error.substr(space + 1), from);
    if (!slot || !to) {
        return std::nullopt;
    }
    return Redirect{.kind = kind, .slot = static_cast<int>(*slot), .to = std::move(*to)};
}

bool same_node(const Endpoint& a, const Endpoint& b) {
    return a.port == b.port && a.host == b.host;
}

SlotMap::SlotMap() {
    m_owner.fill(-1);
}

SlotMap SlotMap::from_cluster_slots(const Reply& reply, const Endpoint& asked) {
    // A broken or hostile server, not a bug of redsem's.
    const auto malformed = [&] {
        return Error(ExitCode::unavailable,
                     fmt::format("the Redis Cluster node at {} answered CLUSTER SLOTS with "
                                 "something that is not a slot map",
                                 asked.describe()),
                     Transience::permanent);
    };
    if (reply.type != Reply::Type::array) {
        throw malformed();
    }
    const auto node_at = [&](const Reply& entry) {
        if (entry.type != Reply::Type::array || entry.elements.size() < 2 ||
            entry.elements[0].type != Reply::Type::string ||
            entry.elements[1].type != Reply::Type::integer || entry.elements[1].integer < 1 ||
            entry.elements[1].integer > 65535) {
            throw malformed();
        }
        std::string host = entry.elements[0].text;
        if (host.empty() || host == "?") {
            host = asked.host;
        }
        if (!is_host_name(host)) {
            throw Error(ExitCode::unavailable,
                        fmt::format("the Redis Cluster node at {} names a node '{}' in CLUSTER "
                                    "SLOTS, which is not a host name",
                                    asked.describe(), printable(host, 100)),
                        Transience::permanent);
        }
        return Endpoint{.host = std::move(host),
                        .port = static_cast<int>(entry.elements[1].integer)};
    };
    SlotMap map;
    for (const Reply& range : reply.elements) {
        if (range.type != Reply::Type::array || range.elements.size() < 3 ||
            range.elements[0].type != Reply::Type::integer ||
            range.elements[1].type != Reply::Type::integer) {
            throw malformed();
        }
        const long long first = range.elements[0].integer;
        const long long last = range.elements[1].integer;
        if (first < 0 || last < first || last >= k_cluster_slots) {
            throw malformed();
        }
        const std::size_t primary = map.index_of(node_at(range.elements[2]));
        for (std::size_t i = 3; i < range.elements.size(); ++i) {
            map.index_of(node_at(range.elements[i])); // replicas: asked for maps later
        }
        for (long long slot = first; slot <= last; ++slot) {
            map.m_owner[static_cast<std::size_t>(slot)] = static_cast<std::int16_t>(primary);
        }
    }
    return map;
}

const Endpoint* SlotMap::owner(int slot) const {
    const int index = m_owner.at(static_cast<std::size_t>(slot));
    return index < 0 ? nullptr : &m_nodes[static_cast<std::size_t>(index)];
}

void SlotMap::assign(int slot, const Endpoint& node) {
    m_owner.at(static_cast<std::size_t>(slot)) = static_cast<std::int16_t>(index_of(node));
}

std::vector<Endpoint> SlotMap::primaries() const {
    std::vector<bool> serves(m_nodes.size(), false);
    for (const std::int16_t index : m_owner) {
        if (index >= 0) {
            serves[static_cast<std::size_t>(index)] = true;
        }
    }
    std::vector<Endpoint> out;
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
        if (serves[i]) {
            out.push_back(m_nodes[i]);
        }
    }
    return out;
}

std::size_t SlotMap::index_of(const Endpoint& node) {
    const auto found = std::find_if(m_nodes.begin(), m_nodes.end(),
                                    [&](const Endpoint& known) { return same_node(known, node); });
    if (found != m_nodes.end()) {
        return static_cast<std::size_t>(found - m_nodes.begin());
    }
    if (m_nodes.size() >= 0x7fff) {
        throw InternalError("a Redis Cluster with more than 32767 nodes");
    }
    m_nodes.push_back(node);
    return m_nodes.size() - 1;
}

} // namespace redsem

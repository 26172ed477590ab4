#include "redis/topology.hpp"

#include "redis/cluster.hpp"
#include "redis/sentinel_topology.hpp"
#include "redis/single_server.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

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

void Topology::open_url() {
    const RedisUrl& url = m_options.url;
    if (url.seeds.size() <= 1) {
        m_link.open(url);
        return;
    }
    using Clock = std::chrono::steady_clock;
    const auto give_up_at = Clock::now() + m_options.connect_timeout;
    std::vector<std::string> failures;
    for (std::size_t i = 0; i < url.seeds.size(); ++i) {
        const Endpoint& seed = url.seeds[i];
        // What is left, shared by the seeds not tried yet: a seed that never answers cannot
        // use up the others' time.
        const auto left = std::chrono::duration_cast<Milliseconds>(give_up_at - Clock::now());
        const auto share = left / static_cast<long long>(url.seeds.size() - i);
        if (share <= Milliseconds{0}) {
            failures.push_back(fmt::format("{}: not tried, the connect timeout ({}) ran out",
                                           seed.describe(),
                                           format_duration(m_options.connect_timeout)));
            continue;
        }
        std::optional<std::string> mode;
        try {
            m_link.open(url.at(seed), share);
            mode = m_link.hello_field("mode"); // nullopt where HELLO is refused: not checked
        } catch (const Error& error) {
            if (error.transience() == Transience::permanent) {
                throw; // a refused login, a TLS file: the same at every node
            }
            m_link.close();
            failures.push_back(error.what());
            continue;
        }
        if (mode && *mode != "cluster") {
            m_link.close();
            throw UsageError(fmt::format("{} names several servers, which only the nodes of one "
                                         "Redis Cluster may be; {} is a {} server (give one "
                                         "server, or redis-sentinel://...#MASTER)",
                                         url.describe(), seed.describe(), *mode));
        }
        check_seeds_known(seed);
        return;
    }
    throw UnavailableError(
        fmt::format("no node of {} answered: {}", url.describe(), fmt::join(failures, "; ")));
}

namespace {

// The addresses CLUSTER NODES gives for each node: "ip:port@cport[,hostname]" (Redis 7 adds
// the announced hostname), as endpoints (the hostname with the same port).
std::vector<Endpoint> cluster_node_addresses(const std::string& nodes) {
    std::vector<Endpoint> addresses;
    std::istringstream lines(nodes);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream fields(line);
        std::string id;
        std::string address;
        if (!(fields >> id >> address)) {
            continue;
        }
        const std::size_t at = address.find('@');
        const std::size_t comma = address.find(',');
        const std::string host_port = address.substr(0, std::min(at, comma));
        const std::size_t colon = host_port.rfind(':');
        if (colon == std::string::npos) {
            continue;
        }
        const auto port = parse_integer(host_port.substr(colon + 1), 0, 65535);
        if (!port) {
            continue;
        }
        addresses.push_back(Endpoint{host_port.substr(0, colon), static_cast<int>(*port)});
        if (comma != std::string::npos && comma + 1 < address.size()) {
            addresses.push_back(Endpoint{address.substr(comma + 1), static_cast<int>(*port)});
        }
    }
    return addresses;
}

} // namespace

void Topology::check_seeds_known(const Endpoint& reached) {
    const RedisUrl& url = m_options.url;
    const Reply reply = m_link.exchange({"CLUSTER", "NODES"});
    if (reply.type != Reply::Type::string) {
        m_link.close();
        throw UsageError(fmt::format(
            "{} names several seeds, which redsem checks are nodes of one Redis Cluster with "
            "CLUSTER NODES; {} refused it ({}): give one seed, or allow +cluster|nodes",
            url.describe(), reached.describe(),
            printable(reply.text.substr(0, reply.text.find(", with args")), 120)));
    }
    const std::vector<Endpoint> known = cluster_node_addresses(reply.text);
    for (const Endpoint& seed : url.seeds) {
        if (std::none_of(known.begin(), known.end(),
                         [&](const Endpoint& node) { return same_node(node, seed); })) {
            m_link.close();
            // Two clusters (or a cluster and another server) would each admit their own
            // holders: never fall through from one to the other.
            throw UsageError(fmt::format(
                "{} names several seeds, and {} is no node of the Redis Cluster that {} belongs "
                "to (CLUSTER NODES there does not list it); list the nodes of one cluster, as "
                "CLUSTER NODES names them",
                url.describe(), seed.describe(), reached.describe()));
        }
    }
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

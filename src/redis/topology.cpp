#include "redis/topology.hpp"

#include "redis/cluster.hpp"
#include "redis/sentinel_topology.hpp"
#include "redis/single_server.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

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
        return;
    }
    throw UnavailableError(
        fmt::format("no node of {} answered: {}", url.describe(), fmt::join(failures, "; ")));
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

#include "support/redis_cluster.hpp"

#include "redis/cluster.hpp"
#include "support/process.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace redsem::test {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto k_settle_timeout = std::chrono::seconds(30);
constexpr auto k_poll = std::chrono::milliseconds(50);

// Polls `done` until it holds or `timeout` passes (then throws, naming `what`).
template <typename Condition>
void await(Condition done, std::chrono::milliseconds timeout, const std::string& what) {
    const auto give_up = Clock::now() + timeout;
    std::string last_error;
    for (;;) {
        try {
            if (done()) {
                return;
            }
        } catch (const std::exception& error) {
            last_error = error.what(); // a node not up yet, or down
        }
        if (Clock::now() > give_up) {
            throw std::runtime_error(
                "test cluster: timed out waiting for " + what +
                (last_error.empty() ? "" : " (last error: " + last_error + ")"));
        }
        std::this_thread::sleep_for(k_poll);
    }
}

} // namespace

RedisCluster::RedisCluster() : RedisCluster(Options{}) {}

RedisCluster::RedisCluster(Options options) : m_options(options) {
    const int count = m_options.primaries * (1 + m_options.replicas);
    for (int i = 0; i < count; ++i) {
        RedisServer::Options node;
        node.tcp = true;
        node.new_data_set = true; // mark_in_use() per semaphore: the epoch key is its own
        node.port_options = {"--cluster-port"};
        node.extra_args = {"--cluster-enabled",
                           "yes",
                           "--cluster-config-file",
                           "nodes.conf",
                           "--cluster-node-timeout",
                           "1000",
                           "--repl-diskless-sync-delay",
                           "0",
                           "--cluster-require-full-coverage",
                           m_options.full_coverage ? "yes" : "no"};
        m_nodes.push_back(std::make_unique<RedisServer>(node));
    }
    m_killed.assign(m_nodes.size(), false);
    std::string create = "redis-cli --cluster create";
    for (const auto& node : m_nodes) {
        create += " 127.0.0.1:" + std::to_string(node->port());
    }
    create += " --cluster-replicas " + std::to_string(m_options.replicas) + " --cluster-yes";
    const ProcessResult created = Child::shell(create)->wait(std::chrono::seconds(60));
    if (created.exit_code != 0) {
        throw std::runtime_error("redis-cli --cluster create failed: " + created.out + created.err);
    }
    wait_until_settled(k_settle_timeout);
    m_was_primary.assign(m_nodes.size(), false);
    for (const std::size_t index : primaries()) {
        m_was_primary[index] = true;
    }
    if (m_options.replicas > 0) {
        await(
            [&] {
                for (std::size_t i = 0; i < m_nodes.size(); ++i) {
                    const std::string info = admin(i).call({"INFO", "replication"}).as_string();
                    if (info.find("role:slave") != std::string::npos &&
                        info.find("master_link_status:up") == std::string::npos) {
                        return false;
                    }
                }
                return true;
            },
            k_settle_timeout, "the replicas to sync");
    }
}

RedisCluster::~RedisCluster() = default;

std::string RedisCluster::url(std::size_t index) const {
    return m_nodes.at(index)->tcp_url();
}

std::string RedisCluster::node_id(std::size_t index) const {
    return admin(index).call({"CLUSTER", "MYID"}).as_string();
}

std::size_t RedisCluster::index_of_port(long long port) const {
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
        if (m_nodes[i]->port() == port) {
            return i;
        }
    }
    throw std::runtime_error("test cluster: no node on port " + std::to_string(port));
}

std::size_t RedisCluster::owner(int slot) const {
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
        if (m_killed[i]) {
            continue;
        }
        const Reply slots = admin(i).call({"CLUSTER", "SLOTS"});
        for (const Reply& range : slots.as_array()) {
            if (range.at(0).as_integer() <= slot && slot <= range.at(1).as_integer()) {
                return index_of_port(range.at(2).at(1).as_integer());
            }
        }
        throw std::runtime_error("test cluster: nobody serves slot " + std::to_string(slot));
    }
    throw std::runtime_error("test cluster: every node is down");
}

std::vector<std::size_t> RedisCluster::primaries() const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
        if (m_killed[i]) {
            continue;
        }
        const Reply slots = admin(i).call({"CLUSTER", "SLOTS"});
        for (const Reply& range : slots.as_array()) {
            const std::size_t index = index_of_port(range.at(2).at(1).as_integer());
            if (std::find(out.begin(), out.end(), index) == out.end()) {
                out.push_back(index);
            }
        }
        return out;
    }
    throw std::runtime_error("test cluster: every node is down");
}

std::string RedisCluster::name_on(std::size_t index, const std::string& stem) const {
    for (int n = 0; n < 100000; ++n) {
        const std::string name = stem + std::to_string(n);
        if (owner(key_slot("{" + name + "}")) == index) {
            return name;
        }
    }
    throw std::runtime_error("test cluster: no name found for node " + std::to_string(index));
}

void RedisCluster::mark_in_use(const std::string& name, const std::string& prefix) const {
    const std::string key = prefix + ":{" + name + "}:epoch";
    Connection connection = admin(owner(key_slot(key)));
    const std::string info = connection.call({"INFO", "server"}).as_string();
    const std::size_t at = info.find("run_id:");
    if (at == std::string::npos) {
        throw std::runtime_error("INFO server has no run_id");
    }
    const std::string node = connection.call({"CLUSTER", "MYID"}).as_string();
    connection.call({"HSET", key, "run", info.substr(at + 7, 40), "lost_at", "0", "node", node});
}

void RedisCluster::migrate_slot(int slot, std::size_t to, std::size_t batch,
                                std::chrono::milliseconds pause, std::chrono::milliseconds hold,
                                const std::function<void()>& keys_moved) {
    const std::size_t from = owner(slot);
    if (from == to) {
        return;
    }
    const std::string slot_text = std::to_string(slot);
    const std::string from_id = node_id(from);
    const std::string to_id = node_id(to);
    Connection source = admin(from);
    Connection target = admin(to);
    target.call({"CLUSTER", "SETSLOT", slot_text, "IMPORTING", from_id});
    source.call({"CLUSTER", "SETSLOT", slot_text, "MIGRATING", to_id});
    // Scripts whose declared keys are all still here run here meanwhile; keys they build
    // themselves that do not exist here already count as the target's.
    std::this_thread::sleep_for(hold);
    for (;;) {
        const Reply keys =
            source.call({"CLUSTER", "GETKEYSINSLOT", slot_text, std::to_string(batch)});
        if (keys.as_array().empty()) {
            break;
        }
        std::vector<std::string> migrate{
            "MIGRATE", "127.0.0.1", std::to_string(m_nodes[to]->port()), "", "0", "5000", "KEYS"};
        for (const Reply& key : keys.as_array()) {
            migrate.push_back(key.as_string());
        }
        const Reply moved = source.command(migrate);
        if (moved.is_error()) {
            throw std::runtime_error("test cluster: MIGRATE failed: " + moved.text);
        }
        std::this_thread::sleep_for(pause);
    }
    if (keys_moved) {
        keys_moved(); // the slot still open: the source answers ASK, the target after ASKING
    }
    // The target first, as redis-cli does: then the source's clients are sent there.
    target.call({"CLUSTER", "SETSLOT", slot_text, "NODE", to_id});
    source.call({"CLUSTER", "SETSLOT", slot_text, "NODE", to_id});
    for (std::size_t i = 0; i < m_nodes.size(); ++i) {
        if (i != from && i != to && !m_killed[i]) {
            admin(i).command({"CLUSTER", "SETSLOT", slot_text, "NODE", to_id});
        }
    }
    wait_until_settled(k_settle_timeout);
}

void RedisCluster::wait_until_failed(std::size_t dead, std::chrono::milliseconds timeout) {
    m_killed.at(dead) = true;
    const std::string address = "127.0.0.1:" + std::to_string(m_nodes.at(dead)->port()) + "@";
    await(
        [&] {
            for (std::size_t i = 0; i < m_nodes.size(); ++i) {
                if (m_killed[i]) {
                    continue;
                }
                // A line of CLUSTER NODES: ID IP:PORT@CPORT FLAGS ..., the flags comma-separated.
                std::istringstream nodes(admin(i).call({"CLUSTER", "NODES"}).as_string());
                std::string line;
                bool failed = false;
                while (std::getline(nodes, line)) {
                    std::istringstream fields(line);
                    std::string id, at, flags;
                    fields >> id >> at >> flags;
                    failed = failed || (at.rfind(address, 0) == 0 &&
                                        ("," + flags + ",").find(",fail,") != std::string::npos);
                }
                if (!failed) {
                    return false;
                }
            }
            return true;
        },
        timeout, "every node to flag the killed one as failed");
}

std::size_t RedisCluster::wait_for_failover(std::size_t dead, std::chrono::milliseconds timeout) {
    m_killed.at(dead) = true;
    std::size_t successor = dead;
    await(
        [&] {
            for (std::size_t i = 0; i < m_nodes.size(); ++i) {
                if (m_killed[i]) {
                    continue;
                }
                const Reply slots = admin(i).call({"CLUSTER", "SLOTS"});
                for (const Reply& range : slots.as_array()) {
                    if (index_of_port(range.at(2).at(1).as_integer()) == dead) {
                        return false;
                    }
                }
            }
            const std::vector<std::size_t> now = primaries();
            for (const std::size_t index : now) {
                const Reply role = admin(index).call({"ROLE"});
                if (role.at(0).as_string() != "master") {
                    return false;
                }
            }
            for (const std::size_t index : now) {
                if (!m_was_primary[index]) {
                    successor = index; // a replica until now
                }
            }
            for (const std::size_t index : now) {
                const std::string nodes = admin(index).call({"CLUSTER", "INFO"}).as_string();
                if (nodes.find("cluster_state:ok") == std::string::npos) {
                    return false;
                }
            }
            return true;
        },
        timeout, "a replica to take over from the killed primary");
    wait_until_settled(timeout);
    m_was_primary.at(successor) = true;
    return successor;
}

void RedisCluster::revive(std::size_t index) {
    m_nodes.at(index)->restart();
    m_killed.at(index) = false;
    await(
        [&] {
            const std::string info = admin(index).call({"INFO", "replication"}).as_string();
            return info.find("role:slave") != std::string::npos &&
                   info.find("master_link_status:up") != std::string::npos;
        },
        k_settle_timeout, "the revived node to replicate its new primary");
    wait_until_settled(k_settle_timeout);
}

void RedisCluster::wait_until_settled(std::chrono::milliseconds timeout) {
    await(
        [&] {
            std::string agreed;
            for (std::size_t i = 0; i < m_nodes.size(); ++i) {
                if (m_killed[i]) {
                    continue;
                }
                Connection connection = admin(i);
                if (connection.call({"CLUSTER", "INFO"}).as_string().find("cluster_state:ok") ==
                    std::string::npos) {
                    return false;
                }
                std::string owners;
                const Reply slots = connection.call({"CLUSTER", "SLOTS"});
                for (const Reply& range : slots.as_array()) {
                    owners += std::to_string(range.at(0).as_integer()) + "-" +
                              std::to_string(range.at(1).as_integer()) + "@" +
                              std::to_string(range.at(2).at(1).as_integer()) + " ";
                }
                if (owners.empty() || (!agreed.empty() && owners != agreed)) {
                    return false;
                }
                agreed = owners;
            }
            return true;
        },
        timeout, "every node to agree on the slots (cluster_state:ok)");
}

} // namespace redsem::test

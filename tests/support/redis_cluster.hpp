#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "redis/connection.hpp"
#include "support/redis_server.hpp"

namespace redsem::test {

// A Redis Cluster for one test, on loopback: `primaries` redis-servers with cluster-enabled
// (and `replicas` replicas of each), joined with `redis-cli --cluster create`, with a short
// cluster-node-timeout (1000 ms), each in a temporary directory of its own. Ready when every
// node reports cluster_state:ok and agrees on who serves every slot. Stopped and removed by
// the destructor.
class RedisCluster {
public:
    struct Options {
        int primaries = 3;
        int replicas = 0; // per primary
        // cluster-require-full-coverage: with `false`, the primaries left serve their slots
        // once the cluster has marked a primary without replicas as failed.
        bool full_coverage = true;
    };

    RedisCluster();
    explicit RedisCluster(Options options);
    ~RedisCluster();
    RedisCluster(const RedisCluster&) = delete;
    RedisCluster& operator=(const RedisCluster&) = delete;

    // redis://127.0.0.1:PORT of node `index` (the first node by default).
    std::string url(std::size_t index = 0) const;
    RedisServer& node(std::size_t index) { return *m_nodes.at(index); }
    std::size_t size() const { return m_nodes.size(); }
    // The node serving `slot` now, as the first live node answering CLUSTER SLOTS says.
    std::size_t owner(int slot) const;
    // The primaries now, by node index, in the order of the slots they serve.
    std::vector<std::size_t> primaries() const;
    // A semaphore name, starting with `stem`, whose keys live on node `index`.
    std::string name_on(std::size_t index, const std::string& stem) const;
    // Writes semaphore `name`'s own epoch key as a long-used Redis has it (see
    // RedisServer::mark_in_use): without it its first admissions wait for the loss grace.
    void mark_in_use(const std::string& name, const std::string& prefix = "redsem") const;

    // Moves `slot` to node `to`, as `redis-cli --cluster reshard` does: IMPORTING on the
    // target, MIGRATING on the source (held so for `hold` before the first MIGRATE), MIGRATE of
    // its keys `batch` at a time with `pause` after each, `keys_moved()` once they all have,
    // then SETSLOT NODE everywhere. Throws when a MIGRATE fails.
    void migrate_slot(int slot, std::size_t to, std::size_t batch = 10,
                      std::chrono::milliseconds pause = std::chrono::milliseconds(0),
                      std::chrono::milliseconds hold = std::chrono::milliseconds(0),
                      const std::function<void()>& keys_moved = {});
    // After node `dead` was killed: waits until its slots are served by a node that says it
    // is a primary; returns that node's index.
    std::size_t wait_for_failover(std::size_t dead,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // After node `dead` was killed: waits until every live node flags it as failed.
    void wait_until_failed(std::size_t dead,
                           std::chrono::milliseconds timeout = std::chrono::seconds(30));
    // Starts killed node `index` again (with its nodes.conf, without data): it rejoins as a
    // replica. Waits until its link to its primary is up.
    void revive(std::size_t index);

private:
    Connection admin(std::size_t index) const { return m_nodes.at(index)->admin(); }
    std::string node_id(std::size_t index) const;
    std::size_t index_of_port(long long port) const;
    // Every live node reports cluster_state:ok and the same owner for each slot.
    void wait_until_settled(std::chrono::milliseconds timeout);

    Options m_options;
    std::vector<std::unique_ptr<RedisServer>> m_nodes;
    std::vector<bool> m_killed;
    std::vector<bool> m_was_primary; // served slots at some time
};

} // namespace redsem::test

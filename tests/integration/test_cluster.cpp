// Redis Cluster: routing by hash slot, redirects, status and gc across primaries, a slot
// migrated and a primary failed over under load, against real cluster nodes on loopback
// (tests/support/redis_cluster.hpp).
#include <catch2/catch.hpp>

#include "redis/cluster.hpp"
#include "support/helpers.hpp"
#include "support/redis_cluster.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

std::string first_line(const std::string& text) {
    return text.substr(0, text.find('\n'));
}

} // namespace

TEST_CASE("cluster: every subcommand works on names that live on each of the three primaries, "
          "through any node",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    for (std::size_t k = 0; k < primaries.size(); ++k) {
        const std::size_t home = primaries[k];
        // Through another primary than the one that serves the name: the first reply is MOVED.
        const EnvChanges env{{"REDSEM_URL", cluster.url(primaries[(k + 1) % 3])}};
        const std::string name = cluster.name_on(home, "c");
        cluster.mark_in_use(name);
        INFO("semaphore " << name << " on node " << home);
        Connection owner = cluster.node(home).admin();

        const auto acquired = run_redsem({"acquire", name, "-n", "2", "--ttl", "30s"}, env);
        REQUIRE(acquired.exit_code == 0);
        const std::string token = first_line(acquired.out);
        CHECK(zcard(owner, "redsem:{" + name + "}:holders") == 1); // on the node that owns it

        CHECK(run_redsem({"renew", name, token, "--ttl", "40s"}, env).exit_code == 0);
        const auto status = run_redsem({"status", name, "--json"}, env);
        REQUIRE(status.exit_code == 0);
        CHECK(json::parse(status.out)["holders"][0]["token"] == token);

        CHECK(run_redsem({"limit", name, "3"}, env).exit_code == 0);
        const auto ran = run_redsem({"run", name, "--", "sh", "-c", "echo $REDSEM_LIMIT"}, env);
        CHECK(ran.exit_code == 0);
        CHECK(ran.out == "3\n");

        // A waiter queued behind a full semaphore is woken on the node that owns it.
        CHECK(run_redsem({"limit", name, "1"}, env).exit_code == 0);
        auto waiter = std::make_unique<Child>(
            std::vector<std::string>{"acquire", name, "-w", "20s", "--ttl", "30s"}, env);
        REQUIRE(wait_until([&] { return zcard(owner, "redsem:{" + name + "}:queue") == 1; }, 10s));
        CHECK(run_redsem({"release", name, token}, env).exit_code == 0);
        const ProcessResult woken = waiter->wait(20s);
        CHECK(woken.exit_code == 0);
        CHECK(run_redsem({"release", name, first_line(woken.out)}, env).exit_code == 0);
        CHECK(zcard(owner, "redsem:{" + name + "}:holders") == 0);
        CHECK(run_redsem({"gc", name}, env).exit_code == 0);
    }
}

// Redis Cluster: routing by hash slot, redirects, status and gc across primaries, a slot
// migrated and a primary failed over under load, against real cluster nodes on loopback
// (tests/support/redis_cluster.hpp).
#include <catch2/catch.hpp>

#include "redis/cluster.hpp"
#include "support/helpers.hpp"
#include "support/redis_cluster.hpp"

#include <algorithm>
#include <csignal>
#include <map>
#include <set>
#include <sstream>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

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

        // A freeze: drain waits for the holder, woken on the node that owns the name; the
        // pause stays until resumed.
        const auto held = run_redsem({"acquire", name, "--ttl", "30s"}, env);
        REQUIRE(held.exit_code == 0);
        auto draining = std::make_unique<Child>(
            std::vector<std::string>{"drain", name, "--reason", "c", "-w", "20s"}, env);
        REQUIRE(wait_until(
            [&] {
                return owner.call({"HEXISTS", "redsem:{" + name + "}:state", "paused"})
                           .as_integer() == 1;
            },
            10s));
        CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 73);
        CHECK(run_redsem({"release", name, first_line(held.out)}, env).exit_code == 0);
        CHECK(draining->wait(20s).exit_code == 0);
        const auto paused = run_redsem({"status", name, "--json"}, env);
        CHECK(json::parse(paused.out)["paused"]["reason"] == "c");
        CHECK(run_redsem({"resume", name}, env).exit_code == 0);
        const auto after = run_redsem({"acquire", name, "-w", "0"}, env);
        CHECK(after.exit_code == 0);
        CHECK(run_redsem({"release", name, first_line(after.out)}, env).exit_code == 0);
        CHECK(run_redsem({"gc", name}, env).exit_code == 0);
    }
}

TEST_CASE("cluster: the scripts probe for a slot migration on a cluster node, and not on a "
          "single server",
          "[cluster]") {
    // (The probe is one EXISTS of a key the script builds; see lua/lib/cluster.lua.)
    RedisCluster cluster;
    const std::size_t home = cluster.primaries().front();
    const std::string name = cluster.name_on(home, "probe");
    cluster.mark_in_use(name);
    Connection owner = cluster.node(home).admin();
    const EnvChanges on_cluster{{"REDSEM_URL", cluster.url(home)}};
    REQUIRE(run_redsem({"acquire", name, "-n", "2", "--ttl", "30s"}, on_cluster).exit_code == 0);
    owner.call({"CONFIG", "RESETSTAT"});
    const auto acquired = run_redsem({"acquire", name, "-n", "2", "--ttl", "30s"}, on_cluster);
    REQUIRE(acquired.exit_code == 0);
    CHECK(script_calls(owner) >= 1);
    CHECK(command_calls(owner, "exists") == script_calls(owner));

    RedisServer single;
    Connection admin = single.admin();
    const auto env = env_for(single);
    REQUIRE(run_redsem({"acquire", "probe", "-n", "2", "--ttl", "30s"}, env).exit_code == 0);
    admin.call({"CONFIG", "RESETSTAT"});
    const auto held = run_redsem({"acquire", "probe", "-n", "2", "--ttl", "30s"}, env);
    REQUIRE(held.exit_code == 0);
    CHECK(run_redsem({"release", "probe", first_line(held.out)}, env).exit_code == 0);
    CHECK(script_calls(admin) == 2);
    CHECK(command_calls(admin, "exists") == 0);
}

TEST_CASE("cluster: status and gc see the semaphores of every primary", "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries[0])}};
    std::set<std::string> names;
    std::map<std::string, std::string> tokens;
    for (const std::size_t home : primaries) {
        const std::string name = cluster.name_on(home, "all");
        cluster.mark_in_use(name);
        names.insert(name);
        // A long lease first, so that it is surely held when status looks however busy the
        // machine; replaced below by one that dies, so that gc has something to collect.
        const auto acquired = run_redsem({"acquire", name, "--ttl", "10m"}, env);
        REQUIRE(acquired.exit_code == 0);
        tokens[name] = first_line(acquired.out);
    }

    const auto listed = run_redsem({"status", "--names"}, env);
    REQUIRE(listed.exit_code == 0);
    std::set<std::string> seen;
    std::istringstream lines(listed.out);
    for (std::string line; std::getline(lines, line);) {
        seen.insert(line);
    }
    CHECK(seen == names);

    const auto all = run_redsem({"status", "--json"}, env);
    REQUIRE(all.exit_code == 0);
    const json summaries = json::parse(all.out);
    REQUIRE(summaries.size() == 3);
    for (const json& summary : summaries) {
        CHECK(names.contains(summary["name"].get<std::string>()));
        CHECK(summary["held"] == 1);
        CHECK(summary["oldest_holder"]["held_for_ms"].get<long long>() >= 0);
        CHECK(summary["oldest_holder"]["held_for_ms"].get<long long>() < 60000);
    }

    // Holders that die: released, then taken again with a lease of a second that nobody
    // renews (a renew never shortens a lease).
    for (auto& [name, token] : tokens) {
        REQUIRE(run_redsem({"release", name, token}, env).exit_code == 0);
        const auto again = run_redsem({"acquire", name, "--ttl", "1s"}, env);
        REQUIRE(again.exit_code == 0);
        token = first_line(again.out);
    }
    // Once the leases ran out (by each node's clock), gc collects them on every node.
    REQUIRE(wait_until(
        [&] {
            const auto now = run_redsem({"status", "--json"}, env);
            const json rows = json::parse(now.out);
            return std::all_of(rows.begin(), rows.end(),
                               [](const json& row) { return row["expired_holders"] == 1; });
        },
        30s));
    const auto collected = run_redsem({"gc", "--json"}, env);
    REQUIRE(collected.exit_code == 0);
    const auto after = run_redsem({"status", "--json"}, env);
    REQUIRE(after.exit_code == 0);
    const json rows = json::parse(after.out);
    CHECK(std::none_of(rows.begin(), rows.end(), [](const json& row) {
        return row["held"] != 0 || row["expired_holders"] != 0;
    }));
    for (const std::string& name : names) {
        // gc deleted each semaphore, left empty, on the node that serves it.
        Connection owner = cluster.node(cluster.owner(key_slot("{" + name + "}"))).admin();
        CHECK(owner.call({"EXISTS", "redsem:{" + name + "}:state"}).as_integer() == 0);
    }
    INFO("gc said: " << collected.out);
    const json report = json::parse(collected.out);
    std::set<std::string> removed;
    for (const json& entry : report["removed"]) {
        CHECK(entry["kind"] == "holder");
        removed.insert(entry["name"].get<std::string>());
    }
    CHECK(removed == names);
}

TEST_CASE("cluster: a busy semaphore's slot migrated to another primary and on to a third under "
          "24 clients: never more than the limit inside, and no client fails",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const std::string name = cluster.name_on(primaries[0], "busy");
    const int slot = key_slot("{" + name + "}");
    cluster.mark_in_use(name);

    const int limit = 2;
    // The clients start at a node that does not serve the name.
    // (A lease of 10s: a migration stalls the semaphore for seconds, longer on a loaded
    // machine or under a sanitizer, and a lease shorter than the stall is lost.)
    RunLoops loops(24, name, "-n 2 --ttl 10s", {{"REDSEM_URL", cluster.url(primaries[2])}});
    const auto entries = [&] { return loops.entries(); };
    REQUIRE(wait_until([&] { return entries() >= 20; }, 30s));

    // Key by key, with pauses: first the slot is migrating with all its keys still on the
    // source, then its keys are split between the two nodes for a while (TRYAGAIN, ASK);
    // then all at once to the third.
    cluster.migrate_slot(slot, primaries[1], 1, 30ms, 1500ms);
    CHECK(cluster.owner(slot) == primaries[1]);
    long long before = entries();
    CHECK(wait_until([&] { return entries() >= before + 20; }, 30s));
    cluster.migrate_slot(slot, primaries[2], 100);
    CHECK(cluster.owner(slot) == primaries[2]);
    before = entries();
    CHECK(wait_until([&] { return entries() >= before + 20; }, 30s));

    loops.stop();
    const InsideLog seen = loops.seen();
    const std::string statuses = loops.exits();
    INFO("exit statuses of redsem run, one per line: " << statuses);
    CHECK(seen.most_inside <= limit);
    CHECK(seen.most_inside == limit); // the load did fill the semaphore
    std::istringstream lines(statuses);
    long long runs = 0;
    for (std::string status; std::getline(lines, status); ++runs) {
        CHECK(status == "0");
    }
    CHECK(runs >= 60);
    // Every key of the semaphore went along: none is left on the nodes it came from.
    for (const std::size_t index : {primaries[0], primaries[1]}) {
        Connection node = cluster.node(index).admin();
        CHECK(node.call({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).as_integer() == 0);
    }
}

TEST_CASE("cluster: a run holds its slot through a migration (its heartbeat follows the slot), "
          "and waiters queued meanwhile get the slot in the order they came",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const std::string name = cluster.name_on(primaries[0], "fifo");
    const int slot = key_slot("{" + name + "}");
    cluster.mark_in_use(name);
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries[1])}};
    Connection observer = cluster.node(primaries[2]).admin(); // follows MOVED to the owner
    const std::string queue = "redsem:{" + name + "}:queue";

    // A holder whose lease (3s) must be renewed several times while the slot moves.
    std::string done = (std::filesystem::temp_directory_path() / "redsem-done-XXXXXX").string();
    REQUIRE(mkdtemp(done.data()) != nullptr);
    const std::string release = done + "/release";
    Child holder({"run", name, "--ttl", "3s", "--", "sh", "-c",
                  "while [ ! -e " + release + " ]; do sleep 0.05; done; exit 7"},
                 env);
    const std::string holders = "redsem:{" + name + "}:holders";
    REQUIRE(wait_until([&] { return zcard(observer, holders) == 1; }, 10s));
    std::vector<std::unique_ptr<Child>> waiters;
    for (int i = 0; i < 4; ++i) {
        waiters.push_back(std::make_unique<Child>(
            std::vector<std::string>{"acquire", name, "-w", "60s", "--ttl", "60s"}, env));
        // One at a time, so that the order they came in is known.
        REQUIRE(wait_until([&] { return zcard(observer, queue) == i + 1; }, 10s));
    }

    cluster.migrate_slot(slot, primaries[1], 1, 30ms, 300ms);
    REQUIRE(cluster.owner(slot) == primaries[1]);
    CHECK(zcard(observer, queue) == 4); // the queue went along
    std::this_thread::sleep_for(3s);    // a whole ttl on the new node: renewed there
    CHECK_FALSE(holder.finished());
    std::ofstream(release).put('\n');
    CHECK(holder.wait(20s).exit_code == 7); // its command's status: the lease was never lost
    std::filesystem::remove_all(done);

    std::string token;
    for (std::size_t k = 0; k < waiters.size(); ++k) {
        if (k > 0) {
            REQUIRE(run_redsem({"release", name, token}, env).exit_code == 0);
        }
        const ProcessResult got = waiters[k]->wait(20s);
        INFO("waiter " << k << ": " << got.err);
        REQUIRE(got.exit_code == 0);
        for (std::size_t later = k + 1; later < waiters.size(); ++later) {
            CHECK_FALSE(waiters[later]->finished());
        }
        token = first_line(got.out);
    }
    CHECK(run_redsem({"release", name, token}, env).exit_code == 0);
}

TEST_CASE("cluster: a release served by the node importing the slot (after ASK) completes, and "
          "the waiter it hands the slot to gets it",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const std::string name = cluster.name_on(primaries[0], "asked");
    const int slot = key_slot("{" + name + "}");
    cluster.mark_in_use(name);
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries[2])}};
    Connection observer = cluster.node(primaries[2]).admin();

    const auto held = run_redsem({"acquire", name, "--ttl", "60s"}, env);
    REQUIRE(held.exit_code == 0);
    Child waiter({"acquire", name, "-w", "30s", "--ttl", "60s"}, env);
    REQUIRE(wait_until([&] { return zcard(observer, "redsem:{" + name + "}:queue") == 1; }, 10s));
    ProcessResult released;
    cluster.migrate_slot(slot, primaries[1], 100, 0ms, 0ms, [&] {
        // Every key is on the target and the slot still migrating: the source answers ASK,
        // and the release script runs on the target after ASKING, where a command on several
        // keys of which some are missing fails (TRYAGAIN) inside the script.
        released = run_redsem({"release", name, first_line(held.out)}, env);
    });
    INFO("release said: " << released.err);
    CHECK(released.exit_code == 0);
    const ProcessResult woken = waiter.wait(20s);
    INFO("waiter said: " << woken.err);
    REQUIRE(woken.exit_code == 0);
    CHECK(run_redsem({"release", name, first_line(woken.out)}, env).exit_code == 0);
    CHECK(zcard(observer, "redsem:{" + name + "}:holders") == 0);
}

TEST_CASE("cluster: a primary killed under 24 clients with --replicas 1 and no loss grace: never "
          "more than the limit inside, and the clients carry on with its replica once that has "
          "a replica again",
          "[cluster]") {
    RedisCluster cluster(RedisCluster::Options{.primaries = 3, .replicas = 1});
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const std::string name = cluster.name_on(primaries[0], "fail");
    const int slot = key_slot("{" + name + "}");
    cluster.mark_in_use(name);

    const int limit = 2;
    RunLoops loops(24, name, "-n 2 --replicas 1 --ttl 3s --loss-grace 0",
                   {{"REDSEM_URL", cluster.url(primaries[1])}});
    const auto entries = [&] { return loops.entries(); };
    REQUIRE(wait_until([&] { return entries() >= 20; }, 30s));

    cluster.node(primaries[0]).kill();
    const long long killed_ns = real_now_ns();
    const std::size_t successor = cluster.wait_for_failover(primaries[0], 40s);
    CHECK(cluster.owner(slot) == successor);
    // The new primary has no replica: --replicas 1 cannot be met, and nobody is admitted
    // (acquire gives the slot back, exit 69) until the dead node is back as its replica.
    cluster.revive(primaries[0]);
    const long long before = entries();
    CHECK(wait_until([&] { return entries() >= before + 20; }, 40s));
    loops.stop();

    const InsideLog seen = loops.seen(killed_ns);
    INFO("exit statuses of redsem run, one per line: " << loops.exits());
    CHECK(seen.most_inside <= limit);
    CHECK(seen.most_inside == limit); // the load did fill the semaphore
    CHECK(seen.entries_after >= 20);
}

TEST_CASE("cluster: a takeover while the old primary still looks healthy closes admission: it "
          "is not taken for a slot migration",
          "[cluster]") {
    RedisCluster cluster(RedisCluster::Options{.primaries = 3, .replicas = 1});
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const std::size_t old_primary = primaries[0];
    const std::string name = cluster.name_on(old_primary, "takeover");
    cluster.mark_in_use(name);
    // Used on the old primary (its epoch then names its replication history), and copied to
    // its replica.
    const auto used = run_redsem({"acquire", name, "-w", "0", "-u", cluster.url(old_primary)});
    REQUIRE(used.exit_code == 0);
    REQUIRE(run_redsem({"release", name, first_line(used.out), "-u", cluster.url(old_primary)})
                .exit_code == 0);
    Connection old_admin = cluster.node(old_primary).admin();
    std::size_t replica = cluster.size();
    for (std::size_t i = 0; i < cluster.size(); ++i) {
        Connection admin = cluster.node(i).admin();
        if (info_field(admin, "replication", "master_port") ==
            std::to_string(cluster.node(old_primary).port())) {
            replica = i;
        }
    }
    REQUIRE(replica < cluster.size());
    // (WAIT on a connection that wrote nothing would not wait for redsem's writes.)
    Connection replica_admin = cluster.node(replica).admin();
    REQUIRE(wait_until(
        [&] {
            return info_field(replica_admin, "replication", "slave_repl_offset") ==
                   info_field(old_admin, "replication", "master_repl_offset");
        },
        20s));

    // The old primary is stopped, so it cannot hear that it was replaced: in the new
    // primary's CLUSTER NODES it is still a primary, and not failing (until the node timeout).
    // The epoch key names it, as after a slot migration from it.
    cluster.node(old_primary).signal(SIGSTOP);
    Connection new_admin = cluster.node(replica).admin();
    new_admin.call({"CLUSTER", "FAILOVER", "TAKEOVER"});
    REQUIRE(
        wait_until([&] { return info_field(new_admin, "replication", "role") == "master"; }, 10s));
    const auto newcomer = run_redsem({"acquire", name, "-w", "0", "-u", cluster.url(replica)});
    cluster.node(old_primary).signal(SIGCONT);
    INFO(newcomer.err);
    CHECK(newcomer.exit_code == 73); // closed: not taken for a migration
}

TEST_CASE("cluster without INFO: the proving transaction follows MOVED and ASK, and a slot "
          "migration closes admission once",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    for (std::size_t i = 0; i < cluster.size(); ++i) {
        cluster.node(i).admin().call(
            {"ACL", "SETUSER", "app", "on", ">app-pw", "~*", "&*", "+@all", "-@dangerous"});
    }
    const std::string name = cluster.name_on(primaries[0], "lpc");
    const int slot = key_slot("{" + name + "}");
    const std::string epoch_key = "redsem:{" + name + "}:epoch";
    // Through the third primary: every call is redirected (MOVED, then ASK mid-migration).
    const auto as_app = [&](const std::string& grace) {
        EnvChanges env{{"REDSEM_URL", "redis://app@127.0.0.1:" +
                                          std::to_string(cluster.node(primaries[2]).port())},
                       {"REDSEM_PASSWORD", "app-pw"}};
        if (!grace.empty()) {
            env["REDSEM_LOSS_GRACE"] = grace;
        }
        return env;
    };
    Connection source = cluster.node(primaries[0]).admin();

    const auto first = run_redsem({"acquire", name, "-n", "3", "--ttl", "60s"}, as_app("0"));
    // (-n 3: two more holders and a waiter follow)
    REQUIRE(first.exit_code == 0);
    const std::string marker = source.call({"HGET", epoch_key, "cache_marker"}).as_string();
    REQUIRE(marker.size() == 32);
    source.call({"HSET", epoch_key, "lost_at", std::to_string(server_time_ms(source) - 61000)});
    const auto second = run_redsem({"acquire", name, "--ttl", "60s", "-w", "0"}, as_app(""));
    INFO("second acquire said: " << second.err);
    REQUIRE(second.exit_code == 0);
    CHECK(zcard(source, "redsem:{" + name + "}:holders") == 2);
    CHECK(source.call({"HGET", epoch_key, "cache_marker"}).as_string() == marker);

    // A waiter (its own grace 0), so that every key of the semaphore exists: the importing
    // node refuses a call on several keys of which some are missing (TRYAGAIN).
    REQUIRE(run_redsem({"acquire", name, "--ttl", "60s", "-w", "0"}, as_app("0")).exit_code == 0);
    Child waiter({"acquire", name, "-w", "30s", "--ttl", "60s"}, as_app("0"));
    REQUIRE(wait_until([&] { return zcard(source, "redsem:{" + name + "}:queue") == 1; }, 10s));
    ProcessResult released;
    cluster.migrate_slot(slot, primaries[1], 100, 0ms, 0ms, [&] {
        // The slot is migrating, its keys moved: the transaction goes to the importing node
        // after ASKING. That process never ran the marker's script: a possible loss.
        released = run_redsem({"release", name, first_line(first.out)}, as_app(""));
    });
    INFO("release said: " << released.err);
    CHECK(released.exit_code == 0);
    const ProcessResult woken = waiter.wait(20s);
    INFO("waiter said: " << woken.err);
    CHECK(woken.exit_code == 0);
    Connection target = cluster.node(primaries[1]).admin();
    CHECK(zcard(target, "redsem:{" + name + "}:holders") == 3);
    CHECK(target.call({"HGET", epoch_key, "cause"}).as_string() == "unproven");
    CHECK(target.call({"HGET", epoch_key, "cache_marker"}).as_string() != marker);
    CHECK(target.call({"HEXISTS", epoch_key, "proof"}).as_integer() == 0);

    // Closed once, for the grace, to whoever does not opt out.
    const auto closed_out = run_redsem({"limit", name, "4"}, as_app(""));
    CHECK(closed_out.exit_code == 0);
    CHECK(run_redsem({"acquire", name, "-w", "0"}, as_app("")).exit_code == 73);
    const auto opted_out = run_redsem({"acquire", name, "-w", "0", "--ttl", "60s"}, as_app("0"));
    CHECK(opted_out.exit_code == 0);
    CHECK(zcard(target, "redsem:{" + name + "}:holders") == 4);
}

TEST_CASE("cluster: a database in the URL is refused with what the node answered (69)",
          "[cluster]") {
    RedisCluster cluster;
    const std::string url = cluster.url(cluster.primaries().at(0)) + "/2";
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"acquire", "db", "-w", "0"},
          std::vector<std::string>{"status"}}) {
        const ProcessResult result = run_redsem(args, {{"REDSEM_URL", url}});
        INFO(result.err);
        CHECK(result.exit_code == 69);
        CHECK(result.err.find("is a Redis Cluster node, which has only database 0: leave /2 out "
                              "of the URL") != std::string::npos);
    }
}

TEST_CASE("cluster: acquire -w 0 while the cluster is down answers at once with 69", "[cluster]") {
    RedisCluster cluster;
    const std::size_t home = cluster.primaries().at(0);
    const std::string name = cluster.name_on(home, "down");
    cluster.mark_in_use(name);
    Connection owner = cluster.node(home).admin();
    // The node gives up the name's slot: with cluster-require-full-coverage (the default) it
    // answers CLUSTERDOWN to every command.
    const long long slot = owner.call({"CLUSTER", "KEYSLOT", name}).as_integer();
    REQUIRE(owner.call({"CLUSTER", "DELSLOTS", std::to_string(slot)}).is_error() == false);
    auto down_replies = [&] {
        const std::string stats = owner.call({"INFO", "errorstats"}).as_string();
        const std::string field = "errorstat_CLUSTERDOWN:count=";
        const std::size_t at = stats.find(field);
        return at == std::string::npos ? 0LL : std::stoll(stats.substr(at + field.size()));
    };
    const long long before = down_replies();
    const ProcessResult result =
        run_redsem({"acquire", name, "-w", "0"}, {{"REDSEM_URL", cluster.url(home)}});
    INFO(result.err);
    CHECK(result.exit_code == 69);
    CHECK(result.err.find("CLUSTERDOWN") != std::string::npos);
    // Asked once: -w 0 is no time to wait for the cluster (pauses and retries asked it again
    // and again for up to 9s).
    CHECK(down_replies() - before == 1);
}

TEST_CASE("cluster: status and gc without a name list what they reach, warn of a primary that "
          "is down, and exit 69",
          "[cluster]") {
    // The primaries left serve their slots once the cluster has seen the loss: a cluster that
    // requires full coverage refuses them all (CLUSTERDOWN) a moment after the kill.
    RedisCluster cluster(RedisCluster::Options{.full_coverage = false});
    const std::vector<std::size_t> primaries = cluster.primaries();
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries.at(0))}};
    std::vector<std::string> names;
    for (const std::size_t primary : primaries) {
        names.push_back(cluster.name_on(primary, "part"));
        cluster.mark_in_use(names.back());
        REQUIRE(run_redsem({"acquire", names.back(), "--ttl", "10m"}, env).exit_code == 0);
    }
    const std::string down_port = std::to_string(cluster.node(primaries.at(2)).port());
    cluster.node(primaries.at(2)).kill();
    cluster.wait_until_failed(primaries.at(2));
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"status"}, std::vector<std::string>{"status", "--json"},
          std::vector<std::string>{"status", "--format", "prometheus"},
          std::vector<std::string>{"status", "--names"},
          std::vector<std::string>{"gc", "--dry-run"}}) {
        const ProcessResult result = run_redsem(args, env);
        INFO(args.front() << ": " << result.err);
        CHECK(result.exit_code == 69);
        CHECK(result.err.rfind("redsem: warning: the semaphores of the cluster primary "
                               "127.0.0.1:" +
                                   down_port + " are not listed: ",
                               0) == 0);
        CHECK(line_count(result.err) == 1);
        if (args.front() == "status") {
            CHECK(result.out.find(names.at(0)) != std::string::npos);
            CHECK(result.out.find(names.at(1)) != std::string::npos);
            CHECK(result.out.find(names.at(2)) == std::string::npos);
        }
    }
}

TEST_CASE("cluster: log --follow of all or several semaphores is refused before printing",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries.at(0))}};
    const std::string a = cluster.name_on(primaries.at(0), "f");
    const std::string b = cluster.name_on(primaries.at(1), "f");
    for (const std::string& name : {a, b}) {
        cluster.mark_in_use(name);
        REQUIRE(run_redsem({"acquire", name, "--ttl", "10m"}, env).exit_code == 0);
    }
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"log", "-f"}, std::vector<std::string>{"log", "-f", a, b}}) {
        const ProcessResult result = run_redsem(args, env);
        INFO(result.err);
        CHECK(result.exit_code == 64);
        CHECK(result.out.empty());
        CHECK(result.err.find("on a Redis Cluster, --follow takes one NAME") != std::string::npos);
    }
    // Without --follow, its history is read as usual.
    const ProcessResult one = run_redsem({"log", a}, env);
    CHECK(one.exit_code == 0);
    CHECK(one.out.find("acquired") != std::string::npos);
}

TEST_CASE("cluster: a node that refuses the login after a MOVED is named", "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    // The user exists on the seed's node only.
    cluster.node(primaries.at(0))
        .admin()
        .call({"ACL", "SETUSER", "seedonly", "on", ">pw", "~*", "&*", "+@all"});
    const std::string port = std::to_string(cluster.node(primaries.at(1)).port());
    const std::string name = cluster.name_on(primaries.at(1), "pw");
    const EnvChanges env{{"REDSEM_URL", "redis://seedonly@127.0.0.1:" +
                                            std::to_string(cluster.node(primaries.at(0)).port())},
                         {"REDSEM_PASSWORD", "pw"}};
    const ProcessResult result = run_redsem({"acquire", name, "-w", "0"}, env);
    INFO(result.err);
    CHECK(result.exit_code == 77);
    CHECK(result.err.rfind("redsem: error: redis://seedonly@127.0.0.1:" + port + ": ", 0) == 0);
    CHECK(result.err.find("pw\n") == std::string::npos);
}

TEST_CASE("cluster: a URL with several seeds goes on past a seed that is down, and names "
          "only nodes of one cluster",
          "[cluster]") {
    RedisCluster cluster(RedisCluster::Options{.primaries = 3, .replicas = 1});
    const std::vector<std::size_t> primaries = cluster.primaries();
    const std::size_t seed = primaries.at(0);
    const std::string seed_address = "127.0.0.1:" + std::to_string(cluster.node(seed).port());
    const std::string other_address =
        "127.0.0.1:" + std::to_string(cluster.node(primaries.at(1)).port());
    const std::string url = "redis://" + seed_address + "," + other_address;
    const EnvChanges env{{"REDSEM_URL", url}};
    const std::string name = cluster.name_on(primaries.at(2), "seeds");
    cluster.mark_in_use(name);
    // The first seed dies, and its replica takes over.
    cluster.node(seed).kill();
    cluster.wait_for_failover(seed);
    const ProcessResult acquired = run_redsem({"acquire", name, "--ttl", "10m"}, env);
    INFO(acquired.err);
    REQUIRE(acquired.exit_code == 0);
    const ProcessResult status = run_redsem({"status"}, env);
    CHECK(status.exit_code == 0);
    CHECK(status.out.find(name) != std::string::npos);
    CHECK(run_redsem({"release", name, first_line(acquired.out)}, env).exit_code == 0);

    // A seed the cluster does not know (another server, another cluster) is refused, whichever
    // seed answers: falling through to it would let another set of holders in.
    RedisServer::Options tcp;
    tcp.tcp = true;
    RedisServer stranger(tcp);
    const std::string stranger_address = "127.0.0.1:" + std::to_string(stranger.port());
    for (const std::string& mixed :
         {"redis://" + other_address + "," + stranger_address,
          "redis://" + seed_address + "," + other_address + "," + stranger_address}) {
        const ProcessResult refused =
            run_redsem({"acquire", name, "-w", "0"}, {{"REDSEM_URL", mixed}});
        INFO(mixed << ": " << refused.err);
        CHECK(refused.exit_code == 64);
        CHECK(refused.err.find(stranger_address + " is no node of the Redis Cluster") !=
              std::string::npos);
    }
    CHECK(stranger.admin().call({"EXISTS", "redsem:{" + name + "}:state"}).as_integer() == 0);

    // Every seed down: one line naming each.
    const std::string dead = "redis://" + seed_address + "," + seed_address;
    const ProcessResult none = run_redsem({"acquire", name, "-w", "0"}, {{"REDSEM_URL", dead}});
    CHECK(none.exit_code == 69);
    CHECK(none.err.rfind("redsem: error: no node of " + dead + " answered: ", 0) == 0);
}

TEST_CASE("several hosts in a redis:// URL that are no cluster nodes are refused") {
    RedisServer::Options tcp;
    tcp.tcp = true;
    RedisServer one(tcp);
    RedisServer two(tcp);
    const std::string url = "redis://127.0.0.1:" + std::to_string(one.port()) +
                            ",127.0.0.1:" + std::to_string(two.port());
    const ProcessResult result = run_redsem({"acquire", "x", "-w", "0"}, {{"REDSEM_URL", url}});
    CHECK(result.exit_code == 64);
    CHECK(result.err.find("names several servers, which only the nodes of one Redis Cluster may "
                          "be") != std::string::npos);
    CHECK(one.admin().call({"EXISTS", "redsem:{x}:state"}).as_integer() == 0);
}

TEST_CASE("cluster: `redsem lost` closes admission to the semaphores of every primary",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries[0])}};
    std::vector<std::string> names;
    for (const std::size_t home : primaries) {
        const std::string name = cluster.name_on(home, "lost");
        cluster.mark_in_use(name);
        REQUIRE(
            run_redsem({"acquire", name, "-n", "2", "--ttl", "10m", "-w", "0"}, env).exit_code ==
            0);
        names.push_back(name);
    }
    const auto declared = run_redsem({"lost", "--json"}, env);
    REQUIRE(declared.exit_code == 0);
    const auto answer = nlohmann::json::parse(declared.out);
    std::sort(names.begin(), names.end());
    CHECK(answer["semaphores"] == nlohmann::json(names));
    for (const std::string& name : names) {
        const auto refused = run_redsem({"acquire", name, "-n", "2", "-w", "0"}, env);
        INFO(name << ": " << refused.err);
        CHECK(refused.exit_code == 73);
        CHECK(refused.err.find("an operator declared") != std::string::npos);
    }
}

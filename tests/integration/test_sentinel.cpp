// Redis Sentinel: redis-sentinel:// URLs, failovers and --replicas, against a real master,
// replicas and three sentinels on loopback (tests/support/sentinel_group.hpp).
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/sentinel_group.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <csignal>
#include <map>
#include <memory>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

EnvChanges env_for(const SentinelGroup& group) {
    return {{"REDSEM_URL", group.url()}};
}

// A TCP port that accepts connections (into its backlog) and never answers: a sentinel that
// hangs.
struct SilentPort {
    int fd = -1;
    int port = 0;
    SilentPort() {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof(address);
        bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
        listen(fd, 16);
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
        port = ntohs(address.sin_port);
    }
    ~SilentPort() { close(fd); }
};

} // namespace

TEST_CASE("sentinel: every subcommand works through the sentinels, and status also on a replica",
          "[sentinel]") {
    SentinelGroup group;
    const EnvChanges env = env_for(group);
    Connection master = group.server(0).admin();

    const auto acquired = run_redsem({"acquire", "s1", "-n", "2", "--ttl", "30s"}, env);
    REQUIRE(acquired.exit_code == 0);
    const std::string token = first_line(acquired.out);
    CHECK(zcard(master, "redsem:{s1}:holders") == 1); // on the master the sentinels name

    CHECK(run_redsem({"renew", "s1", token, "--ttl", "40s"}, env).exit_code == 0);
    const auto status = run_redsem({"status", "s1", "--json"}, env);
    REQUIRE(status.exit_code == 0);
    CHECK(json::parse(status.out)["holders"][0]["token"] == token);

    // status only reads: it may be pointed at a replica, once the replica has the lease.
    Connection replica = group.server(1).admin();
    REQUIRE(wait_until([&] { return zcard(replica, "redsem:{s1}:holders") == 1; }, 10s));
    const auto on_replica =
        run_redsem({"status", "s1", "--json"}, {{"REDSEM_URL", group.server(1).tcp_url()}});
    REQUIRE(on_replica.exit_code == 0);
    CHECK(json::parse(on_replica.out)["holders"][0]["token"] == token);

    const auto limit = run_redsem({"limit", "s1", "3"}, env);
    CHECK(limit.exit_code == 0);
    const auto ran = run_redsem({"run", "s1", "--", "sh", "-c", "echo $REDSEM_LIMIT"}, env);
    CHECK(ran.exit_code == 0);
    CHECK(ran.out == "3\n");
    CHECK(run_redsem({"release", "s1", token}, env).exit_code == 0);
    CHECK(zcard(master, "redsem:{s1}:holders") == 0);
    CHECK(run_redsem({"gc", "--dry-run"}, env).exit_code == 0);

    // A pause is written to the master and shows on a replica; resume ends it.
    CHECK(run_redsem({"pause", "s1", "--reason", "freeze"}, env).exit_code == 0);
    CHECK(run_redsem({"acquire", "s1", "-w", "0"}, env).exit_code == 73);
    REQUIRE(wait_until(
        [&] {
            return replica.call({"HEXISTS", "redsem:{s1}:state", "paused"}).as_integer() == 1;
        },
        10s));
    const auto paused_on_replica =
        run_redsem({"status", "s1", "--json"}, {{"REDSEM_URL", group.server(1).tcp_url()}});
    CHECK(json::parse(paused_on_replica.out)["paused"]["reason"] == "freeze");
    CHECK(run_redsem({"drain", "s1", "-w", "5s"}, env).exit_code == 0); // nobody holds it
    CHECK(run_redsem({"resume", "s1"}, env).exit_code == 0);
    const auto open = run_redsem({"acquire", "s1", "-w", "0"}, env);
    CHECK(open.exit_code == 0);
    CHECK(run_redsem({"release", "s1", first_line(open.out)}, env).exit_code == 0);

    // --replicas: one replica has it; two cannot, and the slot is given back.
    const auto replicated = run_redsem({"acquire", "s2", "--replicas", "1"}, env);
    CHECK(replicated.exit_code == 0);
    CHECK(run_redsem({"release", "s2", first_line(replicated.out)}, env).exit_code == 0);
    const auto too_many = run_redsem({"acquire", "s2", "--replicas", "2", "--ttl", "2s"}, env);
    CHECK(too_many.exit_code == 69);
    CHECK(line_count(too_many.err) == 1);
    CHECK(too_many.err.find("only 1 of 2 replicas of redis://127.0.0.1:") != std::string::npos);
    CHECK(too_many.err.find("given back") != std::string::npos);
    CHECK(zcard(master, "redsem:{s2}:holders") == 0);
    // renew --replicas says the same of a renewal, and REDSEM_REPLICAS is read.
    const auto held = run_redsem({"acquire", "s3"}, env);
    REQUIRE(held.exit_code == 0);
    EnvChanges two = env;
    two["REDSEM_REPLICAS"] = "2";
    const auto renewed = run_redsem({"renew", "s3", first_line(held.out), "--ttl", "2s"}, two);
    CHECK(renewed.exit_code == 69);
    CHECK(renewed.err.find("only 1 of 2 replicas of") != std::string::npos);
}

TEST_CASE("sentinel: sentinels unreachable or silent, an unknown master: one-line errors, 69, "
          "within one connect timeout for all",
          "[sentinel]") {
    const int refused_a = free_port();
    const int refused_b = free_port();
    const auto refused =
        run_redsem({"acquire", "x"},
                   {{"REDSEM_URL", "redis-sentinel://127.0.0.1:" + std::to_string(refused_a) +
                                       ",127.0.0.1:" + std::to_string(refused_b) + "#mymaster"}});
    CHECK(refused.exit_code == 69);
    CHECK(line_count(refused.err) == 1);
    CHECK(refused.err.rfind("redsem: error: no sentinel of redis-sentinel://", 0) == 0);
    CHECK(refused.err.find(std::to_string(refused_b)) != std::string::npos);

    SilentPort silent_a;
    SilentPort silent_b;
    const auto started = std::chrono::steady_clock::now();
    const auto silent = run_redsem(
        {"status", "--connect-timeout", "300ms"},
        {{"REDSEM_URL", "redis-sentinel://127.0.0.1:" + std::to_string(silent_a.port) +
                            ",127.0.0.1:" + std::to_string(silent_b.port) + "#mymaster"}});
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(silent.exit_code == 69);
    CHECK(line_count(silent.err) == 1);
    CHECK(silent.err.find("did not answer within 300ms") != std::string::npos);
    CHECK(took < 5s); // 2 x 300ms, with room for a loaded machine

    // Six silent sentinels share one connect timeout: not six times it (6s here).
    {
        std::vector<std::unique_ptr<SilentPort>> ports;
        std::string sentinels;
        for (int i = 0; i < 6; ++i) {
            ports.push_back(std::make_unique<SilentPort>());
            sentinels += (i == 0 ? "" : ",") + ("127.0.0.1:" + std::to_string(ports.back()->port));
        }
        const auto asked = std::chrono::steady_clock::now();
        const auto none =
            run_redsem({"acquire", "x", "-w", "0", "--connect-timeout", "1s"},
                       {{"REDSEM_URL", "redis-sentinel://" + sentinels + "#mymaster"}});
        CHECK(none.exit_code == 69);
        CHECK(line_count(none.err) == 1);
        CHECK(std::chrono::steady_clock::now() - asked < 4s);
    }

    SentinelGroup group;
    std::string url = group.url();
    url = url.substr(0, url.find('#')) + "#no-such-master";
    const auto unknown = run_redsem({"run", "x", "--", "true"}, {{"REDSEM_URL", url}});
    CHECK(unknown.exit_code == 69);
    CHECK(line_count(unknown.err) == 1);
    CHECK(unknown.err.find("know no master named 'no-such-master'") != std::string::npos);

    // A first "sentinel" that is a plain Redis (an error reply) is passed over for the next.
    const std::string with_plain_first =
        "redis-sentinel://127.0.0.1:" + std::to_string(group.server(0).port()) + "," +
        group.url().substr(std::string("redis-sentinel://").size());
    const auto passed_over = run_redsem({"status"}, {{"REDSEM_URL", with_plain_first}});
    CHECK(passed_over.exit_code == 0);
    CHECK(passed_over.err == "redsem: no semaphores under prefix 'redsem'\n"); // no error

    const auto bad_url = run_redsem({"status"}, {{"REDSEM_URL", "redis-sentinel://h1,h2"}});
    CHECK(bad_url.exit_code == 64);
    CHECK(bad_url.err.find("needs the master's name after '#'") != std::string::npos);
}

TEST_CASE("sentinel: sentinels with a password of their own", "[sentinel]") {
    const std::string password = "s3ntinel-pw";
    SentinelGroup group(SentinelGroup::Options{.replicas = 1, .sentinel_password = password});
    Scratch scratch;

    const auto without = run_redsem({"acquire", "p", "-w", "0"}, env_for(group));
    CHECK(without.exit_code == 77);
    CHECK(line_count(without.err) == 1);
    CHECK(without.err.find("--sentinel-password-file") != std::string::npos);

    EnvChanges wrong = env_for(group);
    wrong["REDSEM_SENTINEL_PASSWORD"] = "not-it";
    const auto refused = run_redsem({"acquire", "p", "-w", "0"}, wrong);
    CHECK(refused.exit_code == 77);
    CHECK(refused.err.find("not-it") == std::string::npos);

    EnvChanges right = env_for(group);
    right["REDSEM_SENTINEL_PASSWORD"] = password;
    // The command run under `run` never sees the sentinels' password.
    const auto ran = run_redsem({"run", "p", "--", "sh", "-c", "env"}, right);
    CHECK(ran.exit_code == 0);
    CHECK(ran.out.find(password) == std::string::npos);
    CHECK(ran.err.find(password) == std::string::npos);

    const std::string file = scratch.path("sentinel-password");
    std::ofstream(file) << password << "\n";
    std::filesystem::permissions(file, std::filesystem::perms::owner_read |
                                           std::filesystem::perms::owner_write);
    const auto from_file =
        run_redsem({"--sentinel-password-file", file, "acquire", "p"}, env_for(group));
    CHECK(from_file.exit_code == 0);
    CHECK(from_file.err.empty());

    const auto not_sentinel = run_redsem({"--sentinel-password-file", file, "status"},
                                         {{"REDSEM_URL", group.server(0).tcp_url()}});
    CHECK(not_sentinel.exit_code == 64);
    CHECK(not_sentinel.err.find("needs a redis-sentinel:// URL") != std::string::npos);
}

TEST_CASE("sentinel: a failover while a run holds the slot and waiters queue: the run ends with "
          "its command's status, the waiters get their slots in order",
          "[sentinel]") {
    // Two replicas: after the failover the new master has one, so --replicas 1 can be met.
    SentinelGroup group(SentinelGroup::Options{.replicas = 2, .sentinel_password = ""});
    const EnvChanges env = env_for(group);
    Scratch scratch;
    const std::string ready = scratch.path("ready");
    const std::string go = scratch.path("go");
    const std::string order = scratch.path("order");
    // A 6s lease renewed every 2s rides out the failover (about a second here). With
    // --replicas 1 nothing counts that only the old master has: after the failover it has no
    // replica left, while it goes on taking writes until the sentinels make it a replica.
    const std::vector<std::string> options{"--ttl", "6s", "--loss-grace", "1s", "--replicas", "1"};
    std::vector<std::string> holder_args{"run", "f"};
    holder_args.insert(holder_args.end(), options.begin(), options.end());
    holder_args.insert(holder_args.end(), {"--", "sh", "-c",
                                           "touch " + ready + "; while [ ! -e " + go +
                                               " ]; do sleep 0.05; done; "
                                               "exit 7"});
    Child holder(holder_args, env);
    REQUIRE(wait_for_file(ready, 15s));
    Connection master = group.server(0).admin();
    std::vector<std::unique_ptr<Child>> waiters;
    for (int i = 1; i <= 3; ++i) {
        std::vector<std::string> args{"run", "f"};
        args.insert(args.end(), options.begin(), options.end());
        args.insert(args.end(), {"--", "sh", "-c", "echo " + std::to_string(i) + " >> " + order});
        waiters.push_back(std::make_unique<Child>(args, env));
        REQUIRE(wait_until([&] { return zcard(master, "redsem:{f}:queue") == i; }, 15s));
    }
    // The queue reached the replicas before the failover (a planned one waits for that too).
    for (std::size_t replica = 1; replica < group.server_count(); ++replica) {
        Connection connection = group.server(replica).admin();
        REQUIRE(wait_until([&] { return zcard(connection, "redsem:{f}:queue") == 3; }, 15s));
    }

    const std::size_t new_master = group.failover();
    CHECK(new_master != 0);
    INFO("servers " << group.server(0).port() << " " << group.server(1).port() << " "
                    << group.server(2).port() << ", new master " << new_master);
    INFO(group.server(new_master).admin().call({"INFO", "replication"}).as_string());
    std::ofstream(go).put('\n');

    const auto held = holder.wait(60s);
    INFO(held.err);
    CHECK(held.exit_code == 7);
    CHECK(held.err.empty());
    for (auto& waiter : waiters) {
        const auto result = waiter->wait(60s);
        INFO(result.err);
        CHECK(result.exit_code == 0);
        // At most the notice that the new master closed admission for the loss grace.
        CHECK(result.err.find("error") == std::string::npos);
    }
    CHECK(read_file(order) == "1\n2\n3\n");
    // All of it happened on the new master.
    Connection now_master = group.server(new_master).admin();
    INFO(run_redsem({"status", "f"}, env).out);
    CHECK(zcard(now_master, "redsem:{f}:holders") == 0);
    CHECK(zcard(now_master, "redsem:{f}:queue") == 0);
}

TEST_CASE("sentinel: the master killed under 24 clients with --replicas 1 and no loss grace: "
          "never more than the limit inside, and the clients carry on with the new master",
          "[sentinel]") {
    SentinelGroup group(SentinelGroup::Options{.replicas = 2, .sentinel_password = ""});
    const int limit = 2;
    // Each client loops `redsem run`; the command logs its entry and exit with the machine's
    // real clock, and the observer trusts only these lines.
    RunLoops loops(24, "k", "-n 2 --replicas 1 --ttl 3s --loss-grace 0", env_for(group));
    const auto entries = [&] { return loops.entries(); };
    REQUIRE(wait_until([&] { return entries() >= 20; }, 30s));

    const std::size_t old_master = group.master_index();
    group.server(old_master).kill();
    const long long killed_ns = real_now_ns();
    const std::size_t new_master = group.wait_for_new_master(old_master, 40s);
    CHECK(new_master != old_master);
    const long long before = entries();
    CHECK(wait_until([&] { return entries() >= before + 20; }, 40s));
    loops.stop();

    // The observer: never more than the limit inside.
    const InsideLog seen = loops.seen(killed_ns);
    INFO("exit statuses of redsem run, one per line: " << loops.exits());
    CHECK(seen.most_inside <= limit);
    CHECK(seen.most_inside == limit); // the load did fill the semaphore
    CHECK(seen.entries_after >= 20);
}

TEST_CASE("sentinel: sentinels that stop answering do not cost a run its lease on a healthy "
          "master, and a failover that never ends is given up on within --wait",
          "[sentinel]") {
    SentinelGroup group;
    const EnvChanges env = env_for(group);
    Scratch scratch;
    const std::string ready = scratch.path("ready");
    // Renewals every second; each asks a sentinel first whether the master moved.
    Child run({"run", "quiet", "--ttl", "3s", "--", "sh", "-c", "touch " + ready + "; sleep 5"},
              env);
    REQUIRE(wait_for_file(ready, 15s));
    group.signal_sentinels(SIGSTOP);
    const auto result = run.wait(30s);
    group.signal_sentinels(SIGCONT);
    INFO(result.err);
    CHECK(result.exit_code == 0);
    CHECK(result.err.empty());

    // The master and its replica gone: the sentinels keep naming a master nobody can reach.
    group.server(0).kill();
    group.server(1).kill();
    const auto started = std::chrono::steady_clock::now();
    const auto tried = run_redsem({"acquire", "quiet", "-w", "0"}, env);
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(tried.exit_code == 69);
    CHECK(line_count(tried.err) == 1);
    CHECK(tried.err.find("failover under way") != std::string::npos);
    CHECK(took < 20s); // the 4s window of a blip, not the 60s of a failover
}

TEST_CASE("sentinel: a user without @dangerous (no ROLE, no INFO) runs every subcommand through "
          "the sentinels",
          "[sentinel]") {
    SentinelGroup group;
    for (std::size_t i = 0; i < group.server_count(); ++i) {
        group.server(i).admin().call(
            {"ACL", "SETUSER", "app", "on", ">app-pw", "~redsem:*", "&*", "+@all", "-@dangerous"});
    }
    // The sentinels name the master; redsem checks its role as "app", who may not send ROLE.
    const std::string url = group.url();
    EnvChanges env{
        {"REDSEM_URL", "redis-sentinel://app@" + url.substr(url.find("://") + 3)},
        {"REDSEM_PASSWORD", "app-pw"},
        {"REDSEM_LOSS_GRACE", "0"}}; // a new Redis, without INFO: see test_least_privilege
    Connection master = group.server(group.master_index()).admin();
    CHECK(master.call({"ACL", "DRYRUN", "app", "ROLE"}).as_string().find("no permissions") !=
          std::string::npos);

    const auto acquired = run_redsem({"acquire", "lp", "-n", "2", "--ttl", "30s"}, env);
    INFO("acquire said: " << acquired.err);
    REQUIRE(acquired.exit_code == 0);
    const std::string token = first_line(acquired.out);
    CHECK(zcard(master, "redsem:{lp}:holders") == 1);
    CHECK(run_redsem({"renew", "lp", token}, env).exit_code == 0);
    CHECK(run_redsem({"run", "lp", "-w", "0", "--", "true"}, env).exit_code == 0);
    const auto status = run_redsem({"status", "--json"}, env);
    CHECK(status.exit_code == 0);
    CHECK(run_redsem({"limit", "lp", "3"}, env).exit_code == 0);
    CHECK(run_redsem({"log", "lp"}, env).exit_code == 0);
    CHECK(run_redsem({"gc"}, env).exit_code == 0);
    CHECK(run_redsem({"release", "lp", token}, env).exit_code == 0);
    CHECK(zcard(master, "redsem:{lp}:holders") == 0);
}

TEST_CASE("sentinel: one given as a redis:// server is named, with the URL to use", "[sentinel]") {
    SentinelGroup group;
    const std::string sentinel = "127.0.0.1:" + std::to_string(group.sentinel_port(0));
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"acquire", "s", "-w", "0"},
          std::vector<std::string>{"status", "s"}, std::vector<std::string>{"gc", "s"}}) {
        const ProcessResult result = run_redsem(args, {{"REDSEM_URL", "redis://" + sentinel}});
        INFO(args[0] << ": " << result.err);
        CHECK(result.exit_code == 64);
        CHECK(result.err.rfind("redsem: error: redis://" + sentinel +
                                   " is a Redis Sentinel, which keeps no data: use "
                                   "redis-sentinel://" +
                                   sentinel + "#MASTER",
                               0) == 0);
        CHECK(result.err.find("EVALSHA") == std::string::npos); // no script's arguments
    }
}

// Lost data, detected wherever it is met: a Redis restarted from an older snapshot, seen
// through a second prefix or a second database; a node promoted back after another took writes
// it never received (a failback); a read before the admitting call. And the loss grace as one
// rule that clients see alike: the exit code and notice of a closed admission, a per-call grace
// that changes nobody else's admission. Real redis-server processes throughout; the observer
// is an admin connection reading the semaphore's keys.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/loopback_proxy.hpp"

#include <csignal>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

constexpr int k_closed = 73; // ExitCode::closed

// The server's clock, in milliseconds.
long long server_ms(Connection& admin) {
    const Reply time = admin.call({"TIME"});
    return std::stoll(time.at(0).as_string()) * 1000 + std::stoll(time.at(1).as_string()) / 1000;
}

// How many hold `name` under `prefix`, as its holders key says.
long long holders(Connection& admin, const std::string& prefix, const std::string& name) {
    return admin.call({"ZCARD", prefix + ":{" + name + "}:holders"}).as_integer();
}

// Makes the epoch key under `prefix` look checked a moment ago, as it is in a snapshot taken
// just before a restart: the worst case for a rule that trusts a recent check.
void fresh_check(Connection& admin, const std::string& prefix) {
    admin.call({"HSET", prefix + ":epoch", "checked_at", std::to_string(server_ms(admin))});
}

} // namespace

TEST_CASE("a restart from a snapshot closes admission for every prefix and database, whatever "
          "ran first") {
    // Two semaphores that share the server but not the epoch key: one under another prefix,
    // or in another database. The script cache is the server's: after the restart the first
    // call (to the one) loads the scripts, and the next (to the other) finds them cached.
    struct Variant {
        std::vector<std::string> first;  // options of the call that runs first
        std::vector<std::string> second; // options of the semaphore whose holder is forgotten
        std::string second_prefix;
        int second_db;
    };
    const Variant variant = GENERATE(Variant{{"--prefix", "one"}, {"--prefix", "two"}, "two", 0},
                                     Variant{{"--prefix", "one"}, {"--prefix", "one"}, "one", 1});
    RedisServer server;
    const std::string url_first = server.socket_url();
    const std::string url_second = server.socket_url() + "?db=" + std::to_string(variant.second_db);
    auto options = [](std::vector<std::string> args, const std::vector<std::string>& extra,
                      const std::string& url) {
        args.insert(args.end(), extra.begin(), extra.end());
        args.insert(args.end(), {"-u", url});
        return args;
    };
    // Both long in use (their epochs name this server process), then a snapshot.
    server.mark_in_use("one", 0);
    server.mark_in_use(variant.second_prefix, variant.second_db);
    Connection admin = server.admin();
    admin.call({"SAVE"});
    // A holder after the snapshot: the restart forgets it.
    const auto holder = run_redsem(
        options({"acquire", "only", "--ttl", "5m", "-w", "0"}, variant.second, url_second));
    REQUIRE(holder.exit_code == 0);
    server.restart(); // SIGTERM without a save: the snapshot comes back
    admin = server.admin();
    admin.call({"SELECT", std::to_string(variant.second_db)});
    fresh_check(admin, variant.second_prefix);
    CHECK(holders(admin, variant.second_prefix, "only") == 0); // forgotten
    // The first call after the restart: its scripts are cached from now on.
    const auto first =
        run_redsem(options({"acquire", "other", "-w", "0"}, variant.first, url_first));
    CHECK(first.exit_code == k_closed);
    // A newcomer to the semaphore whose holder was forgotten: not admitted.
    const auto newcomer =
        run_redsem(options({"acquire", "only", "-w", "0"}, variant.second, url_second));
    CHECK(newcomer.exit_code == k_closed);
    CHECK(newcomer.err.find("may have lost leases of 'only'") != std::string::npos);
    CHECK(holders(admin, variant.second_prefix, "only") == 0);
}

TEST_CASE("a read first, then `limit N`: no slot is handed out after a restart from a snapshot") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    // A holder and a waiter, then the snapshot. The waiter is stopped, so that none of its
    // calls comes between: it stays in the queue until its liveness runs out.
    const auto holder = run_redsem({"acquire", "lim", "--ttl", "5m", "-w", "0"}, env);
    REQUIRE(holder.exit_code == 0);
    Child waiter({"acquire", "lim", "--ttl", "5m"}, env);
    Connection admin = server.admin();
    REQUIRE(wait_until(
        [&] {
            return admin.call({"ZCARD", "redsem:{lim}:queue"}).as_integer() == 1;
        },
        10s));
    waiter.signal(SIGSTOP);
    admin.call({"SAVE"});
    server.restart();
    admin = server.admin();
    fresh_check(admin, "redsem");
    // A read caches the limit script; raising the limit would hand the waiter a slot.
    CHECK(run_redsem({"limit", "lim"}, env).exit_code == 0);
    CHECK(run_redsem({"limit", "lim", "2"}, env).exit_code == 0);
    CHECK(holders(admin, "redsem", "lim") == 1);
    CHECK(admin.call({"ZCARD", "redsem:{lim}:queue"}).as_integer() == 1);
    waiter.signal(SIGKILL);
}

TEST_CASE("a failback: a node promoted again after its replacement took writes it never got "
          "closes admission") {
    RedisServer::Options tcp;
    tcp.tcp = true;
    RedisServer first(tcp);
    RedisServer second(tcp);
    Connection first_admin = first.admin();
    Connection second_admin = second.admin();
    second_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(first.port())});
    REQUIRE(wait_until(
        [&] { return info_field(second_admin, "replication", "master_link_status") == "up"; },
        20s));
    // In use on the first node (its scripts cached there), a hand-off, then replicated.
    const auto used = run_redsem({"acquire", "fb", "--ttl", "5m", "-w", "0"}, env_for(first));
    REQUIRE(used.exit_code == 0);
    const std::string token = used.out.substr(0, used.out.find('\n'));
    REQUIRE(run_redsem({"release", "fb", token}, env_for(first)).exit_code == 0);
    REQUIRE(first_admin.call({"WAIT", "1", "10000"}).as_integer() == 1);
    // ... all of it, to the last byte of the stream: the second node's promotion then keeps
    // the first node's whole history, and the first node resyncs with it in part.
    REQUIRE(wait_until(
        [&] {
            return info_field(second_admin, "replication", "slave_repl_offset") ==
                   info_field(first_admin, "replication", "master_repl_offset");
        },
        20s));

    // Failover: the second node becomes master, the first its replica, through a proxy that
    // then passes nothing more: the first node never receives what the second one writes.
    second_admin.call({"REPLICAOF", "NO", "ONE"});
    StallingProxy link(second.port(), -1);
    first_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(link.port())});
    REQUIRE(wait_until(
        [&] { return info_field(first_admin, "replication", "master_link_status") == "up"; }, 20s));
    link.stall_after(0);
    const auto on_second =
        run_redsem({"acquire", "fb", "--ttl", "5m", "-w", "0"},
                   {{"REDSEM_URL", second.socket_url()}, {"REDSEM_LOSS_GRACE", "0"}});
    REQUIRE(on_second.exit_code == 0); // a holder the first node never hears of
    CHECK(holders(first_admin, "redsem", "fb") == 0);

    // Failback: the first node is promoted again; its epoch names its own run_id, and the
    // replication history it had as master before, which it left: it has a new one, and the
    // one it followed as its replid2.
    const std::string history = first_admin.call({"HGET", "redsem:epoch", "replid"}).as_string();
    first_admin.call({"REPLICAOF", "NO", "ONE"});
    REQUIRE(info_field(first_admin, "replication", "role") == "master");
    REQUIRE(info_field(first_admin, "replication", "master_replid") != history);
    REQUIRE(info_field(first_admin, "replication", "master_replid2").find_first_not_of('0') !=
            std::string::npos);
    fresh_check(first_admin, "redsem");
    const auto newcomer = run_redsem({"acquire", "fb", "-w", "0"}, env_for(first));
    CHECK(newcomer.exit_code == k_closed);
    CHECK(newcomer.err.find("another server took over") != std::string::npos);
    CHECK(holders(first_admin, "redsem", "fb") == 0);
}

TEST_CASE("without an epoch key, data counts as lost at the server's start, and a caller's "
          "own grace only shortens its wait") {
    RedisServer::Options options;
    options.new_data_set = true; // no epoch key: the server may have started without its data
    RedisServer server(options);
    Connection admin = server.admin();
    REQUIRE(wait_until(
        [&] { return std::stoll(info_field(admin, "server", "uptime_in_seconds")) >= 3; }, 30s));
    // Up for 3s or more: a caller whose own grace is 1s is admitted, the others are not.
    const auto everyone = run_redsem({"acquire", "new", "-w", "0"}, env_for(server));
    CHECK(everyone.exit_code == k_closed);
    CHECK(everyone.err.find("has no record of redsem and started") != std::string::npos);
    const auto hasty =
        run_redsem({"acquire", "new", "-w", "0", "--loss-grace", "1s"}, env_for(server));
    CHECK(hasty.exit_code == 0);
    // A longer grace for one caller would keep out those queued behind it: refused.
    const auto careful =
        run_redsem({"acquire", "other", "-w", "0", "--loss-grace", "5m"}, env_for(server));
    CHECK(careful.exit_code == 64);
    CHECK(careful.err.find("--loss-grace: '5m' is longer than 1m") != std::string::npos);
    CHECK(holders(admin, "redsem", "other") == 0);
}

TEST_CASE("a holder the restored data shows as queued stops within the loss grace") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    const std::string started = server.dir() + "/started";
    // A holds; W queues behind it; the snapshot has W queued. Then A ends and W holds, which
    // the restart from the snapshot forgets: the server has W as a waiter again.
    Child first({"run", "q", "--", "sh", "-c", "sleep 2"}, env);
    Connection admin = server.admin();
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{q}:holders") == 1; }, 10s));
    Child waiter(
        {"run", "q", "--ttl", "10m", "--", "sh", "-c", "touch " + started + "; exec sleep 600"},
        env);
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{q}:queue") == 1; }, 10s));
    admin.call({"SAVE"});
    REQUIRE(wait_for_file(started, 20s)); // W holds now
    server.restart();
    // W's renewals (every 20s at most, however long its ttl) find it queued, which renews
    // nothing: unconfirmed for 30s, W stops, inside the 60s grace.
    const auto result = waiter.wait(60s);
    CHECK(result.exit_code == 76);
}

TEST_CASE("a run that cannot confirm its lease for 30s stops, whatever its ttl") {
    RedisServer server;
    const std::string started = server.dir() + "/started";
    Child holder(
        {"run", "long", "--ttl", "10m", "--", "sh", "-c", "touch " + started + "; exec sleep 600"},
        env_for(server));
    REQUIRE(wait_for_file(started, 20s));
    // Redis answers nothing for 45s (as while it loads a big data set after a restart that
    // may have lost the lease): the run gives the lease up and stops its command in time for
    // the loss grace (60s).
    Connection admin = server.admin();
    admin.call({"CLIENT", "PAUSE", "45000", "WRITE"});
    const auto result = holder.wait(60s);
    admin.call({"CLIENT", "UNPAUSE"});
    CHECK(result.exit_code == 76);
}

TEST_CASE("a first replica attached to a master is no loss of data") {
    RedisServer::Options tcp;
    tcp.tcp = true;
    RedisServer master(tcp);
    RedisServer replica(tcp);
    REQUIRE(run_redsem({"acquire", "r", "-w", "0"}, env_for(master)).exit_code == 0);
    Connection master_admin = master.admin();
    const std::string before = info_field(master_admin, "replication", "master_replid");
    Connection replica_admin = replica.admin();
    replica_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(master.port())});
    REQUIRE(wait_until(
        [&] { return info_field(replica_admin, "replication", "master_link_status") == "up"; },
        20s));
    // The master drew a new replication id for its backlog: not a promotion.
    REQUIRE(info_field(master_admin, "replication", "master_replid") != before);
    const auto next = run_redsem({"acquire", "r2", "-w", "0"}, env_for(master));
    CHECK(next.exit_code == 0);
    CHECK(next.err.empty());
}

TEST_CASE("REDSEM_LOSS_GRACE=0 in one shell admits that caller only: nothing is stored for "
          "others") {
    RedisServer::Options options;
    options.new_data_set = true; // a brand-new Redis: it may have started without its data
    RedisServer server(options);
    EnvChanges throwaway = env_for(server);
    throwaway["REDSEM_LOSS_GRACE"] = "0";
    const auto mine = run_redsem({"acquire", "shared", "-w", "0"}, throwaway);
    REQUIRE(mine.exit_code == 0);
    REQUIRE(run_redsem({"release", "shared", mine.out.substr(0, mine.out.find('\n'))}, throwaway)
                .exit_code == 0);
    // Another client, with nothing set, still waits for the grace; so does `--loss-grace`
    // given once before.
    const auto once =
        run_redsem({"acquire", "other", "-w", "0", "--loss-grace", "0"}, env_for(server));
    REQUIRE(once.exit_code == 0);
    REQUIRE(
        run_redsem({"release", "other", once.out.substr(0, once.out.find('\n'))}, env_for(server))
            .exit_code == 0);
    const auto theirs = run_redsem({"acquire", "shared", "-w", "0"}, env_for(server));
    CHECK(theirs.exit_code == k_closed);
    CHECK(theirs.err.find("nobody is admitted for") != std::string::npos);
    const auto again = run_redsem({"acquire", "other", "-w", "0"}, env_for(server));
    CHECK(again.exit_code == k_closed);
    Connection admin = server.admin();
    CHECK(admin.call({"HEXISTS", "redsem:{shared}:state", "loss_grace"}).as_integer() == 0);
}

TEST_CASE("a caller's -n on a new semaphore is a caller's limit, and only `limit NAME N` makes an "
          "operator's") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    auto limit_json = [&](const std::string& name) {
        const auto shown = run_redsem({"limit", name, "--json"}, env);
        REQUIRE(shown.exit_code == 0);
        return nlohmann::json::parse(shown.out);
    };
    CHECK(limit_json("made")["set_by"].is_null()); // nothing stored yet
    const auto first = run_redsem({"acquire", "made", "-n", "3", "-w", "0"}, env);
    REQUIRE(first.exit_code == 0);
    CHECK(limit_json("made")["limit"] == 3);
    CHECK(limit_json("made")["set_by"] == "caller");
    REQUIRE(run_redsem({"limit", "made", "3"}, env).exit_code == 0);
    CHECK(limit_json("made")["set_by"] == "operator");
    // Reading it, and acquiring under it, change nothing; a caller's other -n is refused even
    // while nobody holds it (a caller's limit on an idle semaphore is the next caller's to
    // change).
    const auto second = run_redsem({"acquire", "made", "-n", "3", "-w", "0"}, env);
    REQUIRE(second.exit_code == 0);
    CHECK(limit_json("made")["set_by"] == "operator");
    for (const auto* holder : {&first, &second}) {
        REQUIRE(run_redsem({"release", "made", first_line(holder->out)}, env).exit_code == 0);
    }
    REQUIRE(limit_json("made")["held"] == 0);
    const auto other = run_redsem({"acquire", "made", "-n", "2", "-w", "0"}, env);
    CHECK(other.exit_code == 65);
    CHECK(other.err.find("redsem limit made 2") != std::string::npos);
    CHECK(limit_json("made")["limit"] == 3);
    const auto idle = run_redsem({"acquire", "idle", "-n", "2", "-w", "0", "--ttl", "1s"}, env);
    REQUIRE(idle.exit_code == 0);
    REQUIRE(run_redsem({"release", "idle", first_line(idle.out)}, env).exit_code == 0);
    CHECK(run_redsem({"acquire", "idle", "-n", "4", "-w", "0"}, env).exit_code == 0);
    CHECK(limit_json("idle")["limit"] == 4);
    CHECK(limit_json("idle")["set_by"] == "caller");
}

TEST_CASE("after a restart every caller gets the same answer, whatever its ttl") {
    RedisServer server; // long in use
    server.admin().call({"SAVE"});
    server.restart(); // a new process, from the snapshot: data may have been lost
    // Closed for the same 60s for a short and a long lease (not "the longer of the ttl and
    // 60s"), and said so.
    for (const char* ttl : {"30m", "5s", "1h"}) {
        INFO(ttl);
        const auto refused = run_redsem(
            {"acquire", std::string("t") + ttl, "-w", "0", "--ttl", ttl}, env_for(server));
        CHECK(refused.exit_code == k_closed);
        CHECK(refused.err.find("it restarted, or another server took over); nobody is admitted "
                               "for") != std::string::npos);
        const bool within_a_minute = refused.err.find("for 1m more") != std::string::npos ||
                                     refused.err.find("s more") != std::string::npos;
        CHECK(within_a_minute);
    }
}

TEST_CASE("a closed admission is shown by status, limit --json, log and the metrics") {
    RedisServer server; // long in use
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"limit", "shown", "2"}, env).exit_code == 0);
    Connection admin = server.admin();
    admin.call({"SAVE"});
    server.restart(); // from the snapshot: data may have been lost

    // Before any call that may admit: status already says that the next one closes it.
    const auto before = run_redsem({"status", "shown"}, env);
    CHECK(before.out.find("admission closes for 1m at the next acquire") != std::string::npos);
    const auto refused = run_redsem({"acquire", "shown", "-w", "0"}, env);
    REQUIRE(refused.exit_code == k_closed);

    const auto table = run_redsem({"status", "shown"}, env);
    CHECK(table.out.find("admission closed for") != std::string::npos);
    CHECK(table.out.find("it restarted, or another server took over") != std::string::npos);
    const auto overview = run_redsem({"status"}, env);
    CHECK(overview.out.find("admission closed for") != std::string::npos);
    const auto status = nlohmann::json::parse(run_redsem({"status", "shown", "--json"}, env).out);
    CHECK(status["admission"]["closed"] == true);
    CHECK(status["admission"]["cause"] == "change");
    CHECK(status["admission"]["opens_in_ms"].get<long long>() > 0);
    CHECK(status["admission"]["opens_in_ms"].get<long long>() <= 60000);
    const auto limit = nlohmann::json::parse(run_redsem({"limit", "shown", "--json"}, env).out);
    CHECK(limit["admission"]["closed"] == true);
    CHECK(limit["admission"]["opens_at_ms"] == status["admission"]["opens_at_ms"]);
    const auto log = run_redsem({"log", "shown", "--json"}, env);
    CHECK(log.out.find("\"event\":\"closed\"") != std::string::npos);
    CHECK(log.out.find("\"cause\":\"change\"") != std::string::npos);
    const auto metrics = run_redsem({"status", "shown", "--format", "prometheus"}, env);
    const std::string sample = "redsem_admission_closed_seconds{prefix=\"redsem\",name=\"shown\"} ";
    const std::size_t at = metrics.out.find(sample);
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(metrics.out.substr(at + sample.size())) > 0.0);

    // A long-used server that lost nothing: open, and said so.
    RedisServer calm;
    const auto open =
        nlohmann::json::parse(run_redsem({"status", "x", "--json"}, env_for(calm)).out);
    CHECK(open["admission"]["closed"] == false);
    CHECK(run_redsem({"status", "x"}, env_for(calm)).out.find("admission") == std::string::npos);
}

TEST_CASE("`redsem lost` closes admission for the loss grace, holders keep renewing, and "
          "status, log and acquire say why") {
    RedisServer server; // long in use: admission is open
    const EnvChanges env = env_for(server);
    Connection admin = server.admin();
    const auto held = run_redsem({"acquire", "dl", "-n", "3", "--ttl", "60s", "-w", "0"}, env);
    REQUIRE(held.exit_code == 0);
    const std::string token = first_line(held.out);

    const long long before_ms = server_ms(admin);
    const auto declared = run_redsem({"lost", "--json"}, env);
    REQUIRE(declared.exit_code == 0);
    const auto answer = nlohmann::json::parse(declared.out);
    CHECK(answer["prefix"] == "redsem");
    CHECK(answer["lost_at_ms"].get<long long>() >= before_ms);
    CHECK(answer["opens_at_ms"].get<long long>() == answer["lost_at_ms"].get<long long>() + 60000);
    CHECK(answer["semaphores"].is_null()); // one server: the prefix's epoch covers them all
    const auto notice = run_redsem({"lost"}, env);
    CHECK(notice.exit_code == 0);
    CHECK(notice.err.find("nobody new is admitted to any semaphore under prefix 'redsem'") !=
          std::string::npos);

    // Nobody new, on this semaphore or any other of the prefix.
    for (const std::string name : {"dl", "other"}) {
        const auto refused = run_redsem({"acquire", name, "-n", "3", "-w", "0"}, env);
        INFO(name << ": " << refused.err);
        CHECK(refused.exit_code == k_closed);
        CHECK(refused.err.find("an operator declared") != std::string::npos);
    }
    CHECK(holders(admin, "redsem", "dl") == 1);
    // The holder keeps its slot and renews.
    CHECK(run_redsem({"renew", "dl", token}, env).exit_code == 0);
    const auto status = nlohmann::json::parse(run_redsem({"status", "dl", "--json"}, env).out);
    CHECK(status["admission"]["closed"] == true);
    CHECK(status["admission"]["cause"] == "declared");
    CHECK(status["admission"]["opens_in_ms"].get<long long>() > 50000);
    CHECK(run_redsem({"status", "dl"}, env).out.find("an operator declared a possible loss") !=
          std::string::npos);
    const auto log = run_redsem({"log", "dl", "--json"}, env);
    CHECK(log.out.find("\"cause\":\"declared\"") != std::string::npos);
    // Another prefix has an epoch of its own: untouched.
    server.mark_in_use("elsewhere");
    CHECK(run_redsem({"acquire", "dl", "--prefix", "elsewhere", "-w", "0"}, env).exit_code == 0);
    // A caller's own grace applies to itself alone.
    EnvChanges throwaway = env;
    throwaway["REDSEM_LOSS_GRACE"] = "0";
    CHECK(run_redsem({"acquire", "dl", "-n", "3", "-w", "0"}, throwaway).exit_code == 0);
    // And the declaration took effect as a restart would: the epoch still names this process.
    const Reply epoch = admin.call({"HMGET", "redsem:epoch", "cause", "run"});
    CHECK(epoch.at(0).as_string() == "declared");
    CHECK(epoch.at(1).as_string() == info_field(admin, "server", "run_id"));
}

TEST_CASE("`redsem lost` on a new Redis, and its bad input") {
    RedisServer::Options options;
    options.new_data_set = true; // no epoch key yet
    RedisServer server(options);
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"lost", "-q"}, env).exit_code == 0);
    EnvChanges throwaway = env;
    throwaway["REDSEM_LOSS_GRACE"] = "0";
    // The epoch names this server process now, with the loss declared: a caller with the
    // grace every client has stays out, whatever the server's uptime.
    CHECK(run_redsem({"acquire", "fresh", "-w", "0"}, env).exit_code == k_closed);
    CHECK(run_redsem({"acquire", "fresh", "-w", "0"}, throwaway).exit_code == 0);
    const auto extra = run_redsem({"lost", "deploy"}, env);
    CHECK(extra.exit_code == 64);
    CHECK(extra.err.rfind("redsem: ", 0) == 0);
    const auto unknown = run_redsem({"lost", "--for", "1m"}, env);
    CHECK(unknown.exit_code == 64);
}

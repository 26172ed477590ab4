// `redsem doctor` against real redis-server processes set up the ways teams run them: each
// setup gets the verdicts it deserves, and the exit status follows the worst one. Findings are
// read from --json; the text output is checked once for its shape.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/redis_cluster.hpp"
#include "support/sentinel_group.hpp"
#include "support/tls_files.hpp"

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int k_warnings = 1;     // ExitCode::warnings
constexpr int k_unavailable = 69; // ExitCode::unavailable
constexpr int k_denied = 77;      // ExitCode::denied
constexpr int k_unsafe = 78;      // ExitCode::unsafe

struct Diagnosis {
    int exit_code = -1;
    json report;
    std::string err;

    // The findings of `check`, in order.
    std::vector<json> of(const std::string& check) const {
        std::vector<json> found;
        for (const json& finding : report.at("findings")) {
            if (finding.at("check") == check) {
                found.push_back(finding);
            }
        }
        return found;
    }
    // The one finding of `check` (fails the test when there is not exactly one).
    json one(const std::string& check) const {
        const auto found = of(check);
        INFO(report.dump(2));
        REQUIRE(found.size() == 1);
        return found.front();
    }
    std::string verdict(const std::string& check) const {
        return one(check).at("verdict").get<std::string>();
    }
    std::string found(const std::string& check) const {
        return one(check).at("found").get<std::string>();
    }
    bool any_unsafe() const { return report.at("verdict") == "unsafe"; }
};

Diagnosis doctor(const EnvChanges& env, std::vector<std::string> args = {}) {
    args.insert(args.begin(), {"doctor", "--json"});
    const ProcessResult result = run_redsem(args, env);
    INFO("doctor said: " << result.out << result.err);
    REQUIRE(result.out.size() > 0);
    return Diagnosis{result.exit_code, json::parse(result.out), result.err};
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// The verdict of every finding of `check` (a cluster has one per primary).
std::vector<std::string> verdicts(const Diagnosis& diagnosis, const std::string& check) {
    std::vector<std::string> all;
    for (const json& finding : diagnosis.of(check)) {
        all.push_back(finding.at("verdict").get<std::string>());
    }
    return all;
}

RedisServer::Options with_args(std::vector<std::string> args, bool tcp = false) {
    RedisServer::Options options;
    options.extra_args = std::move(args);
    options.tcp = tcp;
    return options;
}

} // namespace

TEST_CASE("doctor: a plain test server is ok but for persistence, and the text has one line "
          "per finding") {
    RedisServer server; // no persistence, no maxmemory, a Unix socket
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_warnings);
    CHECK(diagnosis.report.at("verdict") == "warn");
    for (const char* check : {"reachable", "version", "mode", "tls", "acl user", "permissions",
                              "eviction", "replication", "keys"}) {
        CHECK(diagnosis.verdict(check) == "ok");
    }
    // The clock's verdict depends on this machine's load (a round trip over 200 ms warns).
    CHECK(contains(diagnosis.found("clock"), "round trip"));
    CHECK(diagnosis.verdict("persistence") == "warn");
    CHECK(contains(diagnosis.found("persistence"), "none"));
    CHECK(contains(diagnosis.found("mode"), "standalone master"));
    CHECK(contains(diagnosis.found("tls"), "Unix socket"));
    CHECK(diagnosis.one("persistence").at("fix").is_string());
    CHECK(diagnosis.one("mode").at("fix").is_null());

    const ProcessResult text = run_redsem({"doctor"}, env_for(server));
    CHECK(text.exit_code == k_warnings);
    std::istringstream lines(text.out);
    std::vector<std::string> all;
    for (std::string line; std::getline(lines, line);) {
        all.push_back(line);
    }
    REQUIRE(all.size() == diagnosis.report.at("findings").size() + 1);
    for (std::size_t i = 0; i + 1 < all.size(); ++i) {
        const json& finding = diagnosis.report.at("findings")[i];
        INFO(all[i]);
        CHECK(contains(all[i], finding.at("check").get<std::string>()));
        if (finding.at("check") != "clock") {
            CHECK(all[i].substr(0, all[i].find(' ')) == finding.at("verdict"));
        }
    }
    CHECK(contains(all.back(), "0 unsafe, "));
}

TEST_CASE("doctor: persistence, and what it means for REDSEM_LOSS_GRACE=0") {
    SECTION("AOF with appendfsync always loses nothing: all ok, exit 0") {
        RedisServer server(with_args({"--appendonly", "yes", "--appendfsync", "always"}));
        const Diagnosis plain = doctor(env_for(server));
        INFO(plain.report.dump(2));
        CHECK(plain.verdict("persistence") == "ok");
        CHECK(contains(plain.found("persistence"), "appendfsync always"));
        CHECK(plain.exit_code == (plain.verdict("clock") == "ok" ? 0 : k_warnings));
        EnvChanges env = env_for(server);
        env["REDSEM_LOSS_GRACE"] = "0";
        CHECK(doctor(env).verdict("persistence") == "ok");
    }
    SECTION("AOF everysec is ok, but not with REDSEM_LOSS_GRACE=0") {
        RedisServer server(with_args({"--appendonly", "yes", "--appendfsync", "everysec"}));
        CHECK(doctor(env_for(server)).verdict("persistence") == "ok");
        EnvChanges env = env_for(server);
        env["REDSEM_LOSS_GRACE"] = "0";
        const Diagnosis risky = doctor(env);
        CHECK(risky.verdict("persistence") == "warn");
        CHECK(contains(risky.found("persistence"), "REDSEM_LOSS_GRACE=0"));
    }
    SECTION("RDB snapshots only") {
        RedisServer server(with_args({"--save", "3600 1"}));
        const Diagnosis diagnosis = doctor(env_for(server));
        CHECK(diagnosis.verdict("persistence") == "warn");
        CHECK(contains(diagnosis.found("persistence"), "RDB snapshots only"));
    }
}

TEST_CASE("doctor: eviction policies") {
    SECTION("allkeys-lru with a maxmemory is unsafe, and names the fix") {
        RedisServer server(
            with_args({"--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"}));
        const Diagnosis diagnosis = doctor(env_for(server));
        INFO(diagnosis.report.dump(2));
        CHECK(diagnosis.exit_code == k_unsafe);
        CHECK(diagnosis.verdict("eviction") == "unsafe");
        CHECK(contains(diagnosis.found("eviction"), "allkeys-lru"));
        CHECK(contains(diagnosis.one("eviction").at("fix").get<std::string>(), "volatile-lru"));
        // What doctor calls unsafe, acquire refuses.
        EnvChanges env = env_for(server);
        env["REDSEM_LOSS_GRACE"] = "0";
        CHECK(run_redsem({"acquire", "e", "-w", "0"}, env).exit_code == k_unavailable);
    }
    SECTION("allkeys-random without a maxmemory evicts nothing") {
        RedisServer server(with_args({"--maxmemory-policy", "allkeys-random"}));
        CHECK(doctor(env_for(server)).verdict("eviction") == "ok");
    }
    SECTION("volatile-lru is safe: a semaphore in use has no expiry") {
        RedisServer server(
            with_args({"--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"}));
        const Diagnosis diagnosis = doctor(env_for(server));
        CHECK(diagnosis.verdict("eviction") == "ok");
        CHECK(contains(diagnosis.found("eviction"), "volatile-lru"));
    }
    SECTION("noeviction, filled until Redis refused a write: never ok") {
        RedisServer server(with_args({"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"}));
        CHECK(doctor(env_for(server)).verdict("eviction") == "ok");
        Connection admin = server.admin();
        const std::string value(20 * 1024, 'x');
        for (int i = 0; i < 600; ++i) {
            if (admin.command(std::vector<std::string>{"SET", "cache:" + std::to_string(i), value})
                    .is_error()) {
                break; // OOM: full
            }
        }
        const Diagnosis full = doctor(env_for(server));
        INFO(full.report.dump(2));
        // At 90% or more a warning; once used memory is past maxmemory (every write refused)
        // unsafe. Which one depends on what Redis freed since the refusal.
        CHECK(full.verdict("eviction") != "ok");
        CHECK(contains(full.found("eviction"), "full"));
        // A maxmemory lowered below what is used: Redis refuses every write from now on.
        admin.call({"CONFIG", "SET", "maxmemory", "1mb"});
        const Diagnosis over = doctor(env_for(server));
        INFO(over.report.dump(2));
        CHECK(over.exit_code == k_unsafe);
        CHECK(over.verdict("eviction") == "unsafe");
        CHECK(contains(over.found("eviction"), "full, so Redis refuses writes"));
    }
}

TEST_CASE("doctor: a replica given by mistake is unsafe, and its master counts it") {
    RedisServer master(with_args({}, true));
    RedisServer replica;
    Connection replica_admin = replica.admin();
    replica_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(master.port())});
    Connection master_admin = master.admin();
    REQUIRE(wait_until(
        [&] {
            return info_field(replica_admin, "replication", "master_link_status") == "up" &&
                   contains(info_field(master_admin, "replication", "slave0"), "state=online");
        },
        20s));

    const Diagnosis at_replica = doctor(env_for(replica));
    INFO(at_replica.report.dump(2));
    CHECK(at_replica.exit_code == k_unsafe);
    CHECK(at_replica.verdict("mode") == "unsafe");
    CHECK(contains(at_replica.found("mode"),
                   "replica of 127.0.0.1:" + std::to_string(master.port())));

    const Diagnosis at_master = doctor(env_for(master));
    INFO(at_master.report.dump(2));
    CHECK(at_master.verdict("mode") == "ok");
    CHECK(contains(at_master.found("replication"), "1 replica online"));
    CHECK(contains(at_master.found("replication"), "new master has 0"));
    // A restart of this master loses nothing, but a failover to its replica can: a caller's
    // short grace is still warned about.
    master_admin.call({"CONFIG", "SET", "appendonly", "yes"});
    master_admin.call({"CONFIG", "SET", "appendfsync", "always"});
    EnvChanges no_grace = env_for(master);
    no_grace["REDSEM_LOSS_GRACE"] = "0";
    const Diagnosis graceless = doctor(no_grace);
    INFO(graceless.report.dump(2));
    CHECK(graceless.verdict("persistence") == "warn");
    CHECK(contains(graceless.found("persistence"), "after a failover"));
    EnvChanges wants_two = env_for(master);
    wants_two["REDSEM_REPLICAS"] = "2";
    const Diagnosis too_many = doctor(wants_two);
    CHECK(too_many.verdict("replication") == "warn");
    CHECK(contains(too_many.found("replication"), "REDSEM_REPLICAS=2"));
}

TEST_CASE("doctor: ACL users: the README's, one rule short, keys out of reach, no @dangerous") {
    RedisServer server(with_args({}, true));
    Connection admin = server.admin();
    const auto as_user = [&](const std::vector<std::string>& rules) {
        std::vector<std::string> command{"ACL", "SETUSER", "redsem", "reset"};
        command.insert(command.end(), rules.begin(), rules.end());
        admin.call(command);
        return EnvChanges{
            {"REDSEM_URL", "redis://redsem@127.0.0.1:" + std::to_string(server.port())},
            {"REDSEM_PASSWORD", "redsem-pw"}};
    };
    const std::vector<std::string> readme = readme_acl_rules().at(0);

    SECTION("the README's user: nothing unsafe; INFO's absence is a warning that says why") {
        const Diagnosis diagnosis = doctor(as_user(readme));
        INFO(diagnosis.report.dump(2));
        CHECK(diagnosis.exit_code == k_warnings);
        CHECK_FALSE(diagnosis.any_unsafe());
        const auto permissions = verdicts(diagnosis, "permissions");
        CHECK(permissions == std::vector<std::string>{"ok", "warn"});
        CHECK(contains(diagnosis.of("permissions")[1].at("found").get<std::string>(), "+info"));
        CHECK(diagnosis.verdict("eviction") == "warn");
        CHECK(contains(diagnosis.found("eviction"), "unknown"));
        CHECK(contains(diagnosis.found("acl user"), "redsem"));
    }
    SECTION("one needed rule taken away: unsafe, naming the rule") {
        for (const std::string rule : {"+setbit", "+evalsha", "+zpopmin", "+blpop"}) {
            std::vector<std::string> rules = readme;
            std::erase(rules, rule);
            REQUIRE(rules.size() + 1 == readme.size());
            const Diagnosis diagnosis = doctor(as_user(rules));
            INFO(rule << ": " << diagnosis.report.dump(2));
            CHECK(diagnosis.exit_code == k_unsafe);
            const json first = diagnosis.of("permissions").at(0);
            CHECK(first.at("verdict") == "unsafe");
            CHECK(contains(first.at("found").get<std::string>(), rule + ","));
            CHECK(first.at("fix") == "ACL SETUSER redsem " + rule);
        }
    }
    SECTION("a rule that only turns a feature off: a warning") {
        for (const auto& [rule, lost] :
             {std::pair{"+wait", "--replicas"}, std::pair{"+fcall", "by EVAL"},
              std::pair{"+function|load", "by EVAL"}}) {
            std::vector<std::string> rules = readme;
            std::erase(rules, rule);
            REQUIRE(rules.size() + 1 == readme.size());
            const Diagnosis diagnosis = doctor(as_user(rules));
            INFO(rule << ": " << diagnosis.report.dump(2));
            CHECK_FALSE(diagnosis.any_unsafe());
            bool named = false;
            for (const json& finding : diagnosis.of("permissions")) {
                named = named || (finding.at("verdict") == "warn" &&
                                  contains(finding.at("found").get<std::string>(), lost) &&
                                  contains(finding.at("found").get<std::string>(), rule));
            }
            CHECK(named);
        }
    }
    SECTION("keys of another prefix only: unsafe, naming the key pattern") {
        std::vector<std::string> rules = readme;
        std::replace(rules.begin(), rules.end(), std::string("~redsem:*"), std::string("~app:*"));
        const Diagnosis diagnosis = doctor(as_user(rules));
        INFO(diagnosis.report.dump(2));
        CHECK(diagnosis.exit_code == k_unsafe);
        CHECK(diagnosis.of("permissions").at(0).at("fix") == "ACL SETUSER redsem ~redsem:*");
    }
    SECTION("patterns without the shared epoch key: unsafe, naming it") {
        std::vector<std::string> rules = readme;
        std::replace(rules.begin(), rules.end(), std::string("~redsem:*"),
                     std::string("~redsem:{*"));
        const Diagnosis diagnosis = doctor(as_user(rules));
        INFO(diagnosis.report.dump(2));
        CHECK(diagnosis.exit_code == k_unsafe);
        CHECK(diagnosis.of("permissions").at(0).at("fix") == "ACL SETUSER redsem ~redsem:epoch");
    }
    SECTION("patterns that name some semaphores and the epoch key: a warning, not unsafe") {
        std::vector<std::string> rules = readme;
        std::replace(rules.begin(), rules.end(), std::string("~redsem:*"),
                     std::string("~redsem:{deploy}:*"));
        rules.emplace_back("~redsem:epoch");
        const EnvChanges env = as_user(rules);
        const Diagnosis diagnosis = doctor(env);
        INFO(diagnosis.report.dump(2));
        CHECK_FALSE(diagnosis.any_unsafe());
        CHECK(diagnosis.of("permissions").at(0).at("verdict") == "warn");
        EnvChanges fresh = env;
        fresh["REDSEM_LOSS_GRACE"] = "0";
        CHECK(run_redsem({"acquire", "deploy", "-w", "0"}, fresh).exit_code == 0);
    }
    SECTION("+@all -@dangerous, as managed services hand out: nothing unsafe") {
        const Diagnosis diagnosis =
            doctor(as_user({"on", ">redsem-pw", "~redsem:*", "&*", "+@all", "-@dangerous"}));
        INFO(diagnosis.report.dump(2));
        CHECK_FALSE(diagnosis.any_unsafe());
        CHECK(diagnosis.verdict("persistence") == "warn");
        CHECK(contains(diagnosis.found("persistence"), "unknown"));
    }
}

TEST_CASE("doctor: unreachable exits 69, a refused login 77, each with its finding") {
    const int port = free_port();
    const Diagnosis down = doctor({{"REDSEM_URL", "redis://127.0.0.1:" + std::to_string(port)}});
    CHECK(down.exit_code == k_unavailable);
    CHECK(down.verdict("reachable") == "unsafe");
    CHECK(down.report.at("findings").size() == 1);

    RedisServer::Options options = with_args({"--requirepass", "right-pw-5f3a"});
    options.admin_password = "right-pw-5f3a";
    RedisServer server(options);
    const Diagnosis refused =
        doctor({{"REDSEM_URL", server.socket_url()}, {"REDSEM_PASSWORD", "wrong-pw-91c2"}});
    CHECK(refused.exit_code == k_denied);
    CHECK(refused.verdict("reachable") == "unsafe");
    CHECK_FALSE(contains(refused.report.dump(), "wrong-pw-91c2"));
    CHECK_FALSE(contains(refused.err, "wrong-pw-91c2"));
}

TEST_CASE("doctor: commands renamed away (INFO, CONFIG) give unknowns, never an error") {
    RedisServer::Options options =
        with_args({"--rename-command", "INFO", "", "--rename-command", "CONFIG", ""});
    options.new_data_set = true; // mark_in_use() needs INFO
    RedisServer server(options);
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2) << diagnosis.err);
    CHECK(diagnosis.exit_code == k_warnings);
    CHECK(diagnosis.verdict("eviction") == "warn");
    CHECK(contains(diagnosis.found("eviction"), "INFO unavailable"));
    CHECK(diagnosis.verdict("version") == "ok"); // from HELLO
    bool rename_named = false;
    for (const json& finding : diagnosis.of("permissions")) {
        rename_named = rename_named || contains(finding.at("fix").dump(), "rename-command of INFO");
    }
    CHECK(rename_named);
}

TEST_CASE("doctor: redsem's keys: abandoned semaphores and foreign keys are warnings") {
    RedisServer server;
    Connection admin = server.admin();
    const Diagnosis empty = doctor(env_for(server));
    CHECK(contains(empty.found("keys"), "0 semaphores"));
    CHECK_FALSE(contains(empty.found("keys"), "epoch")); // marked in use: it has one

    // A brand-new Redis cannot be told from one that lost its data: doctor says so.
    RedisServer::Options brand_new;
    brand_new.new_data_set = true;
    RedisServer fresh(brand_new);
    const Diagnosis first_use = doctor(env_for(fresh));
    INFO(first_use.report.dump(2));
    CHECK(first_use.verdict("keys") == "ok");
    CHECK(contains(first_use.found("keys"), "no 'redsem:epoch' yet"));

    // A holder that died: its lease runs out, nobody cleans it.
    const json held = acquire_json(server, {"dead", "--ttl", "1s"});
    const long long deadline = held.at("deadline_ms").get<long long>();
    REQUIRE(wait_until([&] { return server_time_ms(admin) > deadline + 10; }, 10s));
    const Diagnosis abandoned = doctor(env_for(server));
    INFO(abandoned.report.dump(2));
    CHECK(abandoned.verdict("keys") == "warn");
    CHECK(contains(abandoned.found("keys"), "1 abandoned"));
    CHECK(contains(abandoned.one("keys").at("fix").get<std::string>(), "redsem gc"));
    REQUIRE(run_redsem({"gc"}, env_for(server)).exit_code == 0);
    CHECK(doctor(env_for(server)).verdict("keys") == "ok");

    // Another application's key where redsem keeps a semaphore's state.
    admin.call({"SET", "redsem:{web}:state", "not a hash"});
    const Diagnosis foreign = doctor(env_for(server));
    INFO(foreign.report.dump(2));
    CHECK(foreign.verdict("keys") == "warn");
    CHECK(contains(foreign.found("keys"), "redsem:{web}:state"));
    CHECK(contains(foreign.found("keys"), "a string"));
}

TEST_CASE("doctor: through sentinels, and a sentinel given as the server", "[sentinel]") {
    SentinelGroup group;
    const Diagnosis diagnosis = doctor({{"REDSEM_URL", group.url()}});
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.verdict("mode") == "ok");
    CHECK(contains(diagnosis.found("mode"), SentinelGroup::k_master_name));
    CHECK(contains(diagnosis.found("replication"), "1 replica online"));

    const std::string one_sentinel =
        "redis-sentinel://127.0.0.1:" + std::to_string(group.sentinel_port(0)) + "#" +
        SentinelGroup::k_master_name;
    CHECK(doctor({{"REDSEM_URL", one_sentinel}}).verdict("mode") == "warn");

    const Diagnosis sentinel_as_server =
        doctor({{"REDSEM_URL", "redis://127.0.0.1:" + std::to_string(group.sentinel_port(0))}});
    INFO(sentinel_as_server.report.dump(2));
    CHECK(sentinel_as_server.exit_code == k_unsafe);
    CHECK(sentinel_as_server.verdict("mode") == "unsafe");
    CHECK(sentinel_as_server.of("permissions").empty()); // nothing else applies to a sentinel
}

TEST_CASE("doctor: a Redis Cluster: its state, and each primary checked", "[cluster]") {
    RedisCluster cluster;
    const Diagnosis diagnosis = doctor({{"REDSEM_URL", cluster.url()}});
    INFO(diagnosis.report.dump(2));
    CHECK(contains(diagnosis.found("mode"), "16384 of 16384 slots served"));
    CHECK(diagnosis.verdict("mode") == "ok");
    const auto eviction = diagnosis.of("eviction");
    REQUIRE(eviction.size() == cluster.primaries().size());
    std::set<std::string> nodes;
    for (const json& finding : eviction) {
        nodes.insert(finding.at("node").get<std::string>());
    }
    CHECK(nodes.size() == eviction.size());
    // Cluster nodes fail over: a primary without a replica is a warning.
    CHECK(verdicts(diagnosis, "replication") ==
          std::vector<std::string>(cluster.primaries().size(), "warn"));
}

TEST_CASE("doctor: TLS verified is ok, --insecure a warning", "[tls]") {
    const TlsFiles files;
    RedisServer::Options options;
    options.port_options = {"--tls-port"};
    options.extra_args = {"--tls-cert-file",    files.path("server.crt"),
                          "--tls-key-file",     files.path("server.key"),
                          "--tls-ca-cert-file", files.path("ca.crt"),
                          "--tls-auth-clients", "no"};
    RedisServer server(options);
    const std::string url = "rediss://127.0.0.1:" + std::to_string(server.port_of("--tls-port"));
    const Diagnosis verified =
        doctor({{"REDSEM_URL", url}, {"REDSEM_CACERT", files.path("ca.crt")}});
    INFO(verified.report.dump(2));
    CHECK(verified.verdict("tls") == "ok");
    CHECK(contains(verified.found("tls"), "verified"));
    const Diagnosis insecure = doctor({{"REDSEM_URL", url}}, {"--insecure"});
    CHECK(insecure.verdict("tls") == "warn");
}

TEST_CASE("doctor: a Redis Cluster with a primary down: unsafe, and the others still checked",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const std::size_t dead = primaries.back();
    const std::size_t seed = primaries.front();
    cluster.node(dead).kill();
    Connection observer = cluster.node(seed).admin();
    REQUIRE(wait_until(
        [&] {
            return contains(observer.call({"CLUSTER", "INFO"}).as_string(), "cluster_state:fail");
        },
        30s));

    const Diagnosis diagnosis = doctor({{"REDSEM_URL", cluster.url(seed)}});
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    CHECK(diagnosis.verdict("mode") == "unsafe");
    const auto reachable = diagnosis.of("reachable");
    REQUIRE(reachable.size() == 2); // the seed, and the node that is down
    CHECK(reachable[1].at("verdict") == "unsafe");
    CHECK(reachable[1].at("node") == "127.0.0.1:" + std::to_string(cluster.node(dead).port()));
    CHECK(diagnosis.of("eviction").size() == primaries.size() - 1);
}

TEST_CASE("doctor writes nothing, for a user with INFO and for one without") {
    RedisServer server(with_args({}, true));
    Connection admin = server.admin();
    // Semaphores in use and abandoned, so that every check has something to read.
    EnvChanges fresh = env_for(server);
    fresh["REDSEM_LOSS_GRACE"] = "0";
    REQUIRE(run_redsem({"acquire", "held", "--ttl", "5m"}, fresh).exit_code == 0);
    REQUIRE(run_redsem({"acquire", "other", "--ttl", "5m"}, fresh).exit_code == 0);
    std::vector<std::string> command{"ACL", "SETUSER", "redsem", "reset"};
    const std::vector<std::string> readme = readme_acl_rules().at(0);
    command.insert(command.end(), readme.begin(), readme.end());
    admin.call(command);
    const EnvChanges as_readme_user{
        {"REDSEM_URL", "redis://redsem@127.0.0.1:" + std::to_string(server.port())},
        {"REDSEM_PASSWORD", "redsem-pw"}};
    const auto changes = [&] {
        return std::stoll(info_field(admin, "persistence", "rdb_changes_since_last_save"));
    };
    for (const EnvChanges& env : {env_for(server), as_readme_user}) {
        const long long before = changes();
        const Diagnosis diagnosis = doctor(env);
        INFO(diagnosis.report.dump(2));
        CHECK(contains(diagnosis.found("keys"), "2 semaphores"));
        CHECK(changes() == before);
    }
}

TEST_CASE("doctor: a foreign key beside a semaphore's real keys is named, the rest still read") {
    RedisServer server;
    Connection admin = server.admin();
    EnvChanges fresh = env_for(server);
    fresh["REDSEM_LOSS_GRACE"] = "0";
    REQUIRE(run_redsem({"acquire", "fine", "--ttl", "5m"}, fresh).exit_code == 0);
    REQUIRE(run_redsem({"acquire", "mixed", "--ttl", "5m"}, fresh).exit_code == 0);
    admin.call({"SET", "redsem:{mixed}:queue", "not a zset"});
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.verdict("keys") == "warn");
    CHECK(contains(diagnosis.found("keys"), "redsem:{mixed}:queue"));
    CHECK(contains(diagnosis.found("keys"), "a string where redsem keeps a zset"));
    CHECK(contains(diagnosis.found("keys"), "2 semaphores"));
}

TEST_CASE("doctor: min-replicas-to-write that no replica meets is unsafe") {
    RedisServer server;
    server.admin().call({"CONFIG", "SET", "min-replicas-to-write", "1"});
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    CHECK(diagnosis.verdict("replication") == "unsafe");
    CHECK(contains(diagnosis.found("replication"), "NOREPLICAS"));
}

TEST_CASE("doctor: a server that never answers, or wants a password none was given") {
    // A port that accepts connections (the kernel completes them) and never answers.
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(listen(listener, 8) == 0);
    REQUIRE(getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const Diagnosis silent =
        doctor({{"REDSEM_URL", "redis://127.0.0.1:" + std::to_string(ntohs(address.sin_port))},
                {"REDSEM_CONNECT_TIMEOUT", "300ms"}});
    close(listener);
    INFO(silent.report.dump(2));
    CHECK(silent.exit_code == k_unavailable);
    REQUIRE(silent.report.at("findings").size() == 1);
    CHECK(silent.verdict("reachable") == "unsafe");
    CHECK(silent.one("reachable").at("fix").is_string());

    RedisServer open_server; // no password: one given anyway is refused, as a login
    EnvChanges with_password = env_for(open_server);
    with_password["REDSEM_PASSWORD"] = "unneeded-pw-2b7c";
    const Diagnosis needless = doctor(with_password);
    INFO(needless.report.dump(2));
    CHECK(needless.exit_code == k_denied);
    CHECK(needless.verdict("reachable") == "unsafe");
    CHECK(contains(needless.one("reachable").at("fix").get<std::string>(), "no password"));

    RedisServer::Options options = with_args({"--requirepass", "needed-pw-8e1d"});
    options.admin_password = "needed-pw-8e1d";
    RedisServer server(options);
    const Diagnosis no_password = doctor(env_for(server));
    INFO(no_password.report.dump(2));
    CHECK(no_password.exit_code == k_denied);
    CHECK(no_password.verdict("reachable") == "unsafe");
    CHECK(contains(no_password.one("reachable").at("fix").get<std::string>(), "password"));
}

TEST_CASE("doctor: a report that cannot be written exits 74") {
    RedisServer server;
    const ProcessResult full =
        Child::shell("exec " + redsem_binary() + " doctor > /dev/full", env_for(server))->wait();
    CHECK(full.exit_code == 74);
    CHECK(contains(full.err, "cannot write to standard output"));
}

TEST_CASE("doctor: a database the user may not SELECT is an unsafe permission, not a login") {
    RedisServer server(with_args({}, true));
    Connection admin = server.admin();
    std::vector<std::string> command{"ACL", "SETUSER", "redsem", "reset"};
    std::vector<std::string> rules = readme_acl_rules().at(0);
    std::erase(rules, std::string("+select"));
    command.insert(command.end(), rules.begin(), rules.end());
    admin.call(command);
    const Diagnosis diagnosis =
        doctor({{"REDSEM_URL", "redis://redsem@127.0.0.1:" + std::to_string(server.port()) + "/3"},
                {"REDSEM_PASSWORD", "redsem-pw"}});
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    CHECK(diagnosis.verdict("permissions") == "unsafe");
    CHECK(contains(diagnosis.found("permissions"), "+select"));
}

TEST_CASE("a closed stdout is a failed write (74), and nothing reaches Redis in its place") {
    RedisServer server;
    Connection admin = server.admin();
    const auto errors = [&] {
        return std::stoll(info_field(admin, "stats", "total_error_replies"));
    };
    for (const std::string command : {"doctor", "status"}) {
        if (command == "status") {
            // Something to list: with nothing, status writes only a notice, on stderr.
            // (And its scripts loaded once: a first EVALSHA's NOSCRIPT is an error reply too.)
            REQUIRE(run_redsem({"acquire", "listed", "-w", "0"}, env_for(server)).exit_code == 0);
            REQUIRE(run_redsem({"status"}, env_for(server)).exit_code == 0);
        }
        const long long before = errors();
        const ProcessResult closed =
            Child::shell("exec " + redsem_binary() + " " + command + " >&-", env_for(server))
                ->wait();
        INFO(command << ": " << closed.err);
        CHECK(closed.exit_code == 74);
        CHECK(contains(closed.err, "cannot write to standard output"));
        CHECK(errors() == before); // the report was not sent to Redis as commands
    }
}

TEST_CASE("doctor: a volatile-* Redis that is full refuses writes: unsafe, not ok") {
    RedisServer server;
    Connection admin = server.admin();
    admin.call({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"});
    const long long used = std::stoll(info_field(admin, "memory", "used_memory"));
    admin.call({"CONFIG", "SET", "maxmemory", std::to_string(used * 9 / 10)});
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    admin.call({"CONFIG", "SET", "maxmemory", "0"});
    CHECK(diagnosis.exit_code == k_unsafe);
    CHECK(diagnosis.verdict("eviction") == "unsafe");
    CHECK(contains(diagnosis.found("eviction"), "nothing left it may evict"));
    // And indeed: an acquire is refused.
    admin.call({"CONFIG", "SET", "maxmemory", std::to_string(used * 9 / 10)});
    CHECK(run_redsem({"acquire", "full", "-w", "0"}, env_for(server)).exit_code == k_unavailable);
    admin.call({"CONFIG", "SET", "maxmemory", "0"});
}

TEST_CASE("doctor: a failed snapshot that makes Redis refuse writes (MISCONF) is unsafe") {
    RedisServer server(with_args({"--enable-protected-configs", "yes", "--save", "3600 1"}));
    Connection admin = server.admin();
    Scratch scratch;
    const std::string gone = scratch.path("gone");
    std::filesystem::create_directory(gone);
    admin.call({"CONFIG", "SET", "dir", gone});
    std::filesystem::remove(gone);
    admin.call({"BGSAVE"});
    REQUIRE(wait_until(
        [&] { return info_field(admin, "persistence", "rdb_last_bgsave_status") == "err"; }, 30s));
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    CHECK(diagnosis.verdict("persistence") == "unsafe");
    CHECK(contains(diagnosis.found("persistence"), "MISCONF"));
    CHECK(run_redsem({"acquire", "misconf", "-w", "0"}, env_for(server)).exit_code ==
          k_unavailable);
    admin.call({"CONFIG", "SET", "dir", server.dir()});
}

TEST_CASE("doctor: min-replicas-to-write met by count but not by lag is unsafe, also for a "
          "user without CONFIG") {
    RedisServer master(with_args({}, true));
    RedisServer replica;
    Connection replica_admin = replica.admin();
    replica_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(master.port())});
    Connection master_admin = master.admin();
    REQUIRE(wait_until(
        [&] { return info_field(master_admin, "replication", "connected_slaves") == "1"; }, 20s));
    master_admin.call({"CONFIG", "SET", "min-replicas-to-write", "1"});
    master_admin.call({"CONFIG", "SET", "min-replicas-max-lag", "1"});
    master_admin.call({"ACL", "SETUSER", "noconfig", "on", ">pw", "~*", "&*", "+@all", "-config"});
    const EnvChanges noconfig{
        {"REDSEM_URL", "redis://noconfig@127.0.0.1:" + std::to_string(master.port())},
        {"REDSEM_PASSWORD", "pw"}};
    REQUIRE(wait_until(
        [&] { return info_field(master_admin, "replication", "min_slaves_good_slaves") == "1"; },
        20s));
    const Diagnosis healthy = doctor(noconfig);
    INFO(healthy.report.dump(2));
    CHECK(healthy.verdict("replication") == "warn"); // set, and its value cannot be read
    CHECK(contains(healthy.found("replication"), "min-replicas-to-write is set"));

    replica.signal(SIGSTOP);
    const bool lagging = wait_until(
        [&] { return info_field(master_admin, "replication", "min_slaves_good_slaves") == "0"; },
        30s);
    const Diagnosis with_config = doctor(env_for(master));
    const Diagnosis without_config = doctor(noconfig);
    replica.signal(SIGCONT);
    REQUIRE(lagging);
    for (const Diagnosis* diagnosis : {&with_config, &without_config}) {
        INFO(diagnosis->report.dump(2));
        CHECK(diagnosis->exit_code == k_unsafe);
        CHECK(diagnosis->verdict("replication") == "unsafe");
        CHECK(contains(diagnosis->found("replication"), "NOREPLICAS"));
    }
}

TEST_CASE("doctor: a foreign key at the shared epoch key is unsafe and named") {
    RedisServer server;
    server.admin().call({"SET", "redsem:epoch", "not-a-hash"});
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    CHECK(diagnosis.verdict("keys") == "unsafe");
    CHECK(contains(diagnosis.found("keys"), "'redsem:epoch' holds a string"));
    CHECK(run_redsem({"acquire", "any", "-w", "0"}, env_for(server)).exit_code == 65);
}

namespace {

// A user `name` (password "pw") with every command, every channel, the shared epoch key, and
// a semaphore's keys by the patterns "redsem:{*}:" + each of `parts`; the environment that
// runs redsem as that user.
EnvChanges user_with_key_parts(const RedisServer& server, const std::string& name,
                               const std::vector<std::string>& parts) {
    Connection admin = server.admin();
    std::vector<std::string> rules{"ACL", "SETUSER",       name, "on",
                                   ">pw", "~redsem:epoch", "&*", "+@all"};
    for (const std::string& part : parts) {
        rules.push_back("~redsem:{*}:" + part);
    }
    admin.call(rules);
    return {{"REDSEM_URL", "redis://" + name + "@127.0.0.1:" + std::to_string(server.port())},
            {"REDSEM_PASSWORD", "pw"}};
}

} // namespace

TEST_CASE("doctor: key patterns that leave out one key of every semaphore are unsafe") {
    RedisServer server(with_args({}, true));
    const EnvChanges env = user_with_key_parts(
        server, "parts", {"state", "holders", "queue", "alive", "slots", "log", "wake:*"});
    const Diagnosis diagnosis = doctor(env); // every part but :info
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    const json first = diagnosis.of("permissions").at(0);
    CHECK(first.at("verdict") == "unsafe");
    CHECK(contains(first.at("found").get<std::string>(), ":info"));
    CHECK(run_redsem({"acquire", "parts", "-w", "0"}, env).exit_code == k_denied);
}

TEST_CASE("doctor: key patterns that leave out a waiter's or a drainer's list are unsafe") {
    // Every key but the lists a waiter for several slots and a draining client block on: a
    // lowered limit or a `drain` would then fail on a NOPERM at run time.
    RedisServer server(with_args({}, true));
    const EnvChanges env = user_with_key_parts(server, "lists",
                                               {"state", "holders", "info", "queue", "alive",
                                                "slots", "log", "wake:" + std::string(32, '?'),
                                                "wake:*:nudge", "wake:*:left", "wake:*:released"});
    const Diagnosis diagnosis = doctor(env);
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.exit_code == k_unsafe);
    const json first = diagnosis.of("permissions").at(0);
    CHECK(first.at("verdict") == "unsafe");
    const std::string found = first.at("found").get<std::string>();
    CHECK(contains(found, ":wake:TOKEN:toolarge :wake:drained"));
    CHECK_FALSE(contains(found, ":nudge"));
    CHECK_FALSE(contains(found, ":info"));

    // And so it is: a drain, which blocks on the drainer's list, is refused.
    const EnvChanges full = env_for(server);
    REQUIRE(run_redsem({"acquire", "lists", "--ttl", "1m"}, full).exit_code == 0);
    REQUIRE(run_redsem({"pause", "lists"}, full).exit_code == 0);
    const ProcessResult drained = run_redsem({"drain", "lists", "-w", "1"}, env);
    INFO(drained.err);
    CHECK(drained.exit_code == k_denied);
}

TEST_CASE("doctor: a password is never shown, whatever the server answers to AUTH") {
    RedisServer server(with_args({"--rename-command", "AUTH", ""}, true));
    Scratch scratch;
    const std::string file = scratch.path("pw");
    std::ofstream(file) << "FileSecret77\n";
    std::filesystem::permissions(file, std::filesystem::perms::owner_read);
    const std::string url = "redis://127.0.0.1:" + std::to_string(server.port());
    const std::vector<std::pair<std::vector<std::string>, EnvChanges>> tries{
        {{"--password-file", file}, {{"REDSEM_URL", url}}},
        {{}, {{"REDSEM_URL", url}, {"REDSEM_PASSWORD", "EnvSecret88"}}},
        {{},
         {{"REDSEM_URL", "redis://alice:LeakMe123@127.0.0.1:" + std::to_string(server.port())}}},
    };
    for (const auto& [args, env] : tries) {
        for (const bool json_output : {true, false}) {
            std::vector<std::string> all{"doctor"};
            if (json_output) {
                all.emplace_back("--json");
            }
            all.insert(all.end(), args.begin(), args.end());
            const ProcessResult result = run_redsem(all, env);
            INFO(result.out << result.err);
            CHECK(result.exit_code == k_unavailable);
            CHECK(contains(result.out, "did not accept AUTH"));
            for (const char* secret : {"FileSecret77", "EnvSecret88", "LeakMe123"}) {
                CHECK_FALSE(contains(result.out + result.err, secret));
            }
        }
        std::vector<std::string> acquire_args{"acquire", "x", "-w", "0"};
        acquire_args.insert(acquire_args.end(), args.begin(), args.end());
        const ProcessResult acquire = run_redsem(acquire_args, env);
        INFO(acquire.err);
        CHECK(acquire.exit_code == k_unavailable);
        for (const char* secret : {"FileSecret77", "EnvSecret88", "LeakMe123"}) {
            CHECK_FALSE(contains(acquire.out + acquire.err, secret));
        }
    }
}

TEST_CASE("doctor: writes paused (CLIENT PAUSE WRITE, as in a failover) do not hold its probes") {
    RedisServer server;
    Connection admin = server.admin();
    admin.call({"CLIENT", "PAUSE", "20000", "WRITE"});
    const Diagnosis diagnosis = doctor(env_for(server));
    admin.call({"CLIENT", "UNPAUSE"});
    INFO(diagnosis.report.dump(2));
    CHECK(diagnosis.verdict("reachable") == "ok");
    CHECK(verdicts(diagnosis, "permissions").at(0) == "ok");
}

TEST_CASE("doctor: an optional command renamed away is not fixed by an ACL rule") {
    RedisServer server(with_args({"--rename-command", "XADD", "hidden-xadd"}));
    const Diagnosis diagnosis = doctor(env_for(server));
    INFO(diagnosis.report.dump(2));
    bool named = false;
    for (const json& finding : diagnosis.of("permissions")) {
        const std::string found = finding.at("found").get<std::string>();
        if (contains(found, "xadd")) {
            named = true;
            CHECK(finding.at("verdict") == "warn");
            CHECK(contains(found, "renamed or disabled"));
            CHECK(contains(finding.at("fix").get<std::string>(), "rename-command"));
            CHECK_FALSE(contains(finding.at("fix").get<std::string>(), "ACL SETUSER"));
        }
    }
    CHECK(named);
}

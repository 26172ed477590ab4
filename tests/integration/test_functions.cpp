// redsem's scripts as a Redis Functions library (FCALL), and the fallback to EVALSHA and EVAL
// wherever functions cannot be used: an ACL without FCALL or FUNCTION, commands renamed away,
// REDSEM_FUNCTIONS=0. Real redis-server processes; the observer is the default user's admin
// connection, reading FUNCTION LIST and INFO commandstats.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/redis_cluster.hpp"

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int k_timeout = 75; // ExitCode::timeout: no slot (busy)
constexpr int k_usage = 64;

// The names of the libraries loaded on the server of `admin` whose name starts with redsem_.
std::vector<std::string> redsem_libraries(Connection& admin) {
    std::vector<std::string> names;
    const Reply libraries = admin.call({"FUNCTION", "LIST"});
    for (const Reply& library : libraries.as_array()) {
        // Each library is a flat list of field, value pairs: library_name NAME engine LUA ...
        for (std::size_t i = 0; i + 1 < library.as_array().size(); i += 2) {
            if (library.at(i).as_string() == "library_name" &&
                library.at(i + 1).as_string().rfind("redsem_", 0) == 0) {
                names.push_back(library.at(i + 1).as_string());
            }
        }
    }
    return names;
}

// A server over TCP with user "app": redsem's keys, every command but what `rule` takes away.
RedisServer::Options with_app_user_without(const std::string& rule) {
    RedisServer::Options options;
    options.tcp = true;
    options.extra_args = {"--user", "app", "on", ">app-pw", "~redsem:*", "&*", "+@all", rule};
    return options;
}

// The environment of a client that connects to `server` as "app", with no loss grace.
EnvChanges as_app(const RedisServer& server) {
    return {{"REDSEM_URL", "redis://app@127.0.0.1:" + std::to_string(server.port())},
            {"REDSEM_PASSWORD", "app-pw"},
            {"REDSEM_LOSS_GRACE", "0"}};
}

// Every subcommand that runs a script, against `env`: each must succeed.
void every_subcommand_works(const EnvChanges& env, const std::string& name) {
    const auto held = run_redsem({"acquire", name, "-n", "2", "--ttl", "5m", "-w", "0"}, env);
    REQUIRE(held.exit_code == 0);
    const std::string token = first_line(held.out);
    CHECK(run_redsem({"run", name, "-w", "0", "--", "true"}, env).exit_code == 0);
    CHECK(run_redsem({"renew", name, token}, env).exit_code == 0);
    const auto status = run_redsem({"status", name, "--json"}, env);
    REQUIRE(status.exit_code == 0);
    CHECK(json::parse(status.out)["held"] == 1);
    CHECK(run_redsem({"limit", name, "3"}, env).exit_code == 0);
    CHECK(run_redsem({"release", name, token}, env).exit_code == 0);
    CHECK(run_redsem({"gc", name}, env).exit_code == 0);
}

} // namespace

TEST_CASE("functions: the scripts run as functions of a library named by its version, loaded "
          "again where it went missing, beside a newer redsem's") {
    RedisServer server;
    Connection admin = server.admin();
    EnvChanges env = env_for(server);
    env["REDSEM_LOSS_GRACE"] = "0";
    env["REDSEM_FUNCTIONS"] = "1"; // (the suite may run with 0: see .ci/run)
    REQUIRE(redsem_libraries(admin).empty());

    admin.call({"CONFIG", "RESETSTAT"});
    const auto held = run_redsem({"acquire", "fn", "-n", "2", "--ttl", "5m", "-w", "0"}, env);
    REQUIRE(held.exit_code == 0);
    const std::vector<std::string> loaded = redsem_libraries(admin);
    REQUIRE(loaded.size() == 1);
    CHECK(loaded.front().size() == std::string("redsem_").size() + 16);
    CHECK(command_calls(admin, "fcall") >= 1);
    CHECK(command_calls(admin, "evalsha") == 0);
    CHECK(command_calls(admin, "eval") == 0);

    // Loaded once: the next process calls the function at once, one FCALL per script call.
    admin.call({"CONFIG", "RESETSTAT"});
    CHECK(run_redsem({"renew", "fn", first_line(held.out)}, env).exit_code == 0);
    CHECK(command_calls(admin, "fcall") == 1);
    CHECK(command_calls(admin, "function|load") == 0);

    // Gone (FUNCTION FLUSH, a restore from elsewhere): loaded again, and the call goes on.
    admin.call({"FUNCTION", "FLUSH"});
    const auto second = run_redsem({"acquire", "fn", "-n", "2", "-w", "0"}, env);
    REQUIRE(second.exit_code == 0);
    CHECK(redsem_libraries(admin) == loaded);
    CHECK(zcard(admin, "redsem:{fn}:holders") == 2);

    // A newer redsem (every script another text) loads its own library beside this one; the
    // two share the semaphore and never admit more than its limit.
    const auto newer =
        Child::shell("exec " + redsem_next_binary() + " acquire fn -n 2 -w 0", env)->wait();
    CHECK(newer.exit_code == k_timeout);
    CHECK(redsem_libraries(admin).size() == 2);
    const auto newer_release =
        Child::shell("exec " + redsem_next_binary() + " release fn " + first_line(second.out), env)
            ->wait();
    CHECK(newer_release.exit_code == 0);
    const auto newer_acquire =
        Child::shell("exec " + redsem_next_binary() + " acquire fn -n 2 -w 0", env)->wait();
    CHECK(newer_acquire.exit_code == 0);
    CHECK(run_redsem({"acquire", "fn", "-n", "2", "-w", "0"}, env).exit_code == k_timeout);
    CHECK(zcard(admin, "redsem:{fn}:holders") == 2);
}

TEST_CASE("functions: where FCALL or FUNCTION is refused or renamed away, or with "
          "REDSEM_FUNCTIONS=0, every subcommand works by EVAL") {
    SECTION("a user without FCALL") {
        RedisServer server(with_app_user_without("-fcall"));
        Connection admin = server.admin();
        every_subcommand_works(as_app(server), "nofcall");
        CHECK(command_calls(admin, "fcall") == 0);
        CHECK(command_calls(admin, "evalsha") >= 7);
    }
    SECTION("a user without FUNCTION (it may call a library it cannot load)") {
        RedisServer server(with_app_user_without("-function"));
        Connection admin = server.admin();
        every_subcommand_works(as_app(server), "noload");
        CHECK(redsem_libraries(admin).empty());
        CHECK(command_calls(admin, "evalsha") >= 7);
    }
    SECTION("FUNCTION and FCALL renamed away") {
        for (const char* renamed : {"FUNCTION", "FCALL"}) {
            RedisServer::Options options;
            options.extra_args = {"--rename-command", renamed, ""};
            RedisServer server(options);
            Connection admin = server.admin();
            EnvChanges env = env_for(server);
            env["REDSEM_LOSS_GRACE"] = "0";
            INFO(renamed);
            every_subcommand_works(env, "renamed");
            CHECK(command_calls(admin, "evalsha") >= 7);
        }
    }
    SECTION("REDSEM_FUNCTIONS=0: never an FCALL nor a FUNCTION LOAD") {
        RedisServer server;
        Connection admin = server.admin();
        EnvChanges env = env_for(server);
        env["REDSEM_LOSS_GRACE"] = "0";
        env["REDSEM_FUNCTIONS"] = "0";
        every_subcommand_works(env, "off");
        CHECK(command_calls(admin, "fcall") == 0);
        CHECK(command_calls(admin, "function|load") == 0);
        CHECK(redsem_libraries(admin).empty());

        env["REDSEM_FUNCTIONS"] = "maybe";
        const auto bad = run_redsem({"status", "off"}, env);
        CHECK(bad.exit_code == k_usage);
        CHECK(bad.err.rfind("redsem: ", 0) == 0);
        CHECK(bad.err.find("REDSEM_FUNCTIONS") != std::string::npos);
    }
}

TEST_CASE("functions: a full Redis (maxmemory, noeviction) refuses a new slot but lets a holder "
          "give its slot back") {
    RedisServer server;
    Connection admin = server.admin();
    EnvChanges env = env_for(server);
    env["REDSEM_LOSS_GRACE"] = "0";
    const auto held = run_redsem({"acquire", "full", "-n", "2", "--ttl", "5m", "-w", "0"}, env);
    REQUIRE(held.exit_code == 0);
    admin.call({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    admin.call({"CONFIG", "SET", "maxmemory", "1"});
    const auto refused = run_redsem({"acquire", "full", "-n", "2", "-w", "0"}, env);
    CHECK(refused.exit_code == 69);
    CHECK(refused.err.find("out of memory") != std::string::npos);
    const auto released = run_redsem({"release", "full", first_line(held.out)}, env);
    CHECK(released.exit_code == 0);
    admin.call({"CONFIG", "SET", "maxmemory", "0"});
    CHECK(zcard(admin, "redsem:{full}:holders") == 0);
}

TEST_CASE("functions: each primary of a cluster loads the library for the semaphores it serves",
          "[cluster]") {
    RedisCluster cluster;
    const std::vector<std::size_t> primaries = cluster.primaries();
    REQUIRE(primaries.size() == 3);
    const EnvChanges env{{"REDSEM_URL", cluster.url(primaries.front())}, {"REDSEM_FUNCTIONS", "1"}};
    for (const std::size_t home : primaries) {
        const std::string name = cluster.name_on(home, "fn");
        cluster.mark_in_use(name);
        Connection owner = cluster.node(home).admin();
        owner.call({"FUNCTION", "FLUSH"});
        const auto held = run_redsem({"acquire", name, "-n", "1", "-w", "0"}, env);
        REQUIRE(held.exit_code == 0);
        CHECK(redsem_libraries(owner).size() == 1);
        CHECK(run_redsem({"acquire", name, "-n", "1", "-w", "0"}, env).exit_code == k_timeout);
        CHECK(run_redsem({"release", name, first_line(held.out)}, env).exit_code == 0);
        CHECK(zcard(owner, "redsem:{" + name + "}:holders") == 0);
    }
}

// The previous release, 0.1.0 (built from the repository's history: tests/CMakeLists.txt,
// target redsem-0.1.0), beside this one on one real redis-server: a fleet upgrades one host
// at a time, so for a while both releases call their own scripts on the same keys. What this
// release stored must keep its meaning when 0.1.0's scripts clean up after it, and together
// the two never admit more than the limit. Outcomes are read from Redis by the test's own
// connection, or from the commands' own logs, not only from what redsem says.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/skip.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int k_conflict = 65; // 0.1.0 on a limit it cannot read ("1 paused", "4 weighted")
constexpr int k_closed = 73;   // admission closed: paused
constexpr int k_busy = 75;

// Why the tests here cannot run, or "" when they can.
std::string previous_release_missing() {
    if (std::filesystem::exists(redsem_previous_binary())) {
        return "";
    }
    return "redsem 0.1.0 (" + redsem_previous_binary() +
           ": target redsem-0.1.0, built where the source tree has its git history)";
}

std::string shell_quoted(const std::string& word) {
    std::string quoted = "'";
    for (const char c : word) {
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return quoted + "'";
}

// Runs 0.1.0's redsem to completion, as run_redsem() runs this release's.
ProcessResult run_previous(const std::vector<std::string>& args, const EnvChanges& env) {
    std::string command = "exec " + shell_quoted(redsem_previous_binary());
    for (const std::string& arg : args) {
        command += " " + shell_quoted(arg);
    }
    return Child::shell(command, env)->wait();
}

json status_json(const RedisServer& server, const std::string& name) {
    const ProcessResult status = run_redsem({"status", name, "--json"}, env_for(server));
    INFO(status.err);
    REQUIRE(status.exit_code == 0);
    return json::parse(status.out);
}

// Polls until the lease of holder `token` of `name` ran out by the server's clock (a lease is
// valid while TIME < its deadline), without anybody removing it; false after `timeout`.
bool lease_ran_out(Connection& admin, const std::string& name, const std::string& token,
                   std::chrono::milliseconds timeout) {
    return wait_until(
        [&] {
            const Reply deadline = admin.call({"ZSCORE", semaphore_key(name, "holders"), token});
            return !deadline.is_nil() && std::stoll(deadline.as_string()) <= server_time_ms(admin);
        },
        timeout);
}

} // namespace

TEST_CASE("previous release: an older release's gc leaves a paused semaphore paused") {
    if (const std::string missing = previous_release_missing(); !missing.empty()) {
        REDSEM_SKIP(missing);
    }
    const std::string name = "deploy";
    // How the semaphore came to be paused with nobody holding or waiting when 0.1.0's gc
    // comes: each ends with the pause in force and the holders and queue empty.
    using Setup = std::function<void(const RedisServer&)>;
    const std::vector<std::pair<std::string, Setup>> setups{
        {"pause, nobody ever held",
         [&](const RedisServer& server) {
             REQUIRE(run_redsem({"pause", name, "--reason", "freeze"}, env_for(server)).exit_code ==
                     0);
         }},
        {"drain, nobody ever held",
         [&](const RedisServer& server) {
             REQUIRE(run_redsem({"drain", name, "--reason", "freeze", "-w", "10s"}, env_for(server))
                         .exit_code == 0);
         }},
        {"pause, and the holder released",
         [&](const RedisServer& server) {
             const json holder = acquire_json(server, {name, "--ttl", "1m"});
             REQUIRE(run_redsem({"pause", name, "--reason", "freeze"}, env_for(server)).exit_code ==
                     0);
             REQUIRE(
                 run_redsem({"release", name, holder["token"].get<std::string>()}, env_for(server))
                     .exit_code == 0);
         }},
        {"drain, which ended when the holder released",
         [&](const RedisServer& server) {
             const json holder = acquire_json(server, {name, "--ttl", "1m"});
             Child draining({"drain", name, "--reason", "freeze", "-w", "30s"}, env_for(server));
             Connection admin = server.admin();
             REQUIRE(wait_until(
                 [&] {
                     return admin.call({"HEXISTS", semaphore_key(name, "state"), "paused"})
                                .as_integer() == 1;
                 },
                 10s));
             REQUIRE(
                 run_redsem({"release", name, holder["token"].get<std::string>()}, env_for(server))
                     .exit_code == 0);
             REQUIRE(draining.wait().exit_code == 0);
         }},
        // Nobody removed the holder: 0.1.0's gc finds it expired, removes it, and then finds
        // the semaphore empty. (2s: still live when the pause is stored, on a loaded machine
        // too, so that 0.1.0's gc is the call that removes it.)
        {"pause, and the holder's lease ran out",
         [&](const RedisServer& server) {
             const json holder = acquire_json(server, {name, "--ttl", "2s"});
             REQUIRE(run_redsem({"pause", name, "--reason", "freeze"}, env_for(server)).exit_code ==
                     0);
             Connection admin = server.admin();
             REQUIRE(lease_ran_out(admin, name, holder["token"].get<std::string>(), 10s));
         }},
    };
    for (const auto& [how, setup] : setups) {
        DYNAMIC_SECTION(how) {
            RedisServer server;
            const auto env = env_for(server);
            Connection admin = server.admin();
            setup(server);
            REQUIRE(status_json(server, name)["paused"].is_object());

            const ProcessResult gc = run_previous({"gc"}, env);
            INFO("0.1.0's gc said: " << gc.out << gc.err);
            CHECK(gc.exit_code == 0);
            CHECK(zcard(admin, semaphore_key(name, "holders")) == 0);

            // The pause is still stored (everything below follows from it), and this release
            // still refuses a newcomer for it.
            REQUIRE(admin.call({"HEXISTS", semaphore_key(name, "state"), "paused"}).as_integer() ==
                    1);
            const ProcessResult refused = run_redsem({"acquire", name, "-w", "0"}, env);
            INFO("this release's acquire said: " << refused.err);
            CHECK(refused.exit_code == k_closed);
            CHECK(refused.err.find("'deploy' is paused") != std::string::npos);
            const json status = status_json(server, name);
            REQUIRE(status["paused"].is_object());
            CHECK(status["paused"]["reason"] == "freeze");
            CHECK(zcard(admin, semaphore_key(name, "holders")) == 0);

            // 0.1.0 cannot read the marked limit, and so admits nobody either.
            const ProcessResult older = run_previous({"acquire", name, "-w", "0"}, env);
            INFO("0.1.0's acquire said: " << older.err);
            CHECK(older.exit_code == k_conflict);
            CHECK(zcard(admin, semaphore_key(name, "holders")) == 0);
        }
    }
}

TEST_CASE("previous release: slots an older release pruned come back") {
    if (const std::string missing = previous_release_missing(); !missing.empty()) {
        REDSEM_SKIP(missing);
    }
    const std::string name = "w";
    // Which call of 0.1.0 removes the expired holder of 3 slots: its gc, or an acquire that
    // is refused (it cannot read the marked limit "4 weighted") after it pruned.
    const std::vector<std::pair<std::string, std::vector<std::string>>> pruners{
        {"0.1.0's gc", {"gc", name}},
        {"0.1.0's refused acquire", {"acquire", name, "-n", "4", "-w", "0"}},
    };
    for (const auto& [who, args] : pruners) {
        DYNAMIC_SECTION(who) {
            RedisServer server;
            const auto env = env_for(server);
            Connection admin = server.admin();
            const json holder = acquire_json(server, {name, "-n", "4", "--ttl", "10m"});
            const json heavy =
                acquire_json(server, {name, "-n", "4", "--slots", "3", "--ttl", "1s"});
            REQUIRE(heavy["slots"].size() == 3);
            REQUIRE(lease_ran_out(admin, name, heavy["token"].get<std::string>(), 10s));

            const ProcessResult pruned = run_previous(args, env);
            INFO("0.1.0 said: " << pruned.out << pruned.err);
            CHECK(pruned.exit_code == (args[0] == "gc" ? 0 : k_conflict));
            // 0.1.0 did remove it: only the holder of one slot is left.
            REQUIRE(zcard(admin, semaphore_key(name, "holders")) == 1);
            REQUIRE_FALSE(admin
                              .call({"ZSCORE", semaphore_key(name, "holders"),
                                     holder["token"].get<std::string>()})
                              .is_nil());

            // Its three slots are free again for this release, and no more.
            for (int i = 1; i <= 3; ++i) {
                const ProcessResult taken =
                    run_redsem({"acquire", name, "-n", "4", "-w", "0"}, env);
                INFO("acquire " << i << " of 3 said: " << taken.err);
                CHECK(taken.exit_code == 0);
            }
            const ProcessResult fourth = run_redsem({"acquire", name, "-n", "4", "-w", "0"}, env);
            INFO("the fourth acquire said: " << fourth.err);
            CHECK(fourth.exit_code == k_busy);
            CHECK(zcard(admin, semaphore_key(name, "holders")) == 4);
            const json status = status_json(server, name);
            CHECK(status["held"] == 4);
            CHECK(status["holders"].size() == 4);
        }
    }
}

TEST_CASE("previous release: a mixed fleet of older and this release's `redsem run` never has "
          "more than the limit inside") {
    if (const std::string missing = previous_release_missing(); !missing.empty()) {
        REDSEM_SKIP(missing);
    }
    RedisServer server;
    const std::string run_args = "-n 2 --ttl 10s";
    RunLoops older(3, "fleet", run_args, env_for(server), redsem_previous_binary());
    RunLoops newer(3, "fleet", run_args, env_for(server));
    REQUIRE(wait_until([&] { return older.entries() >= 15 && newer.entries() >= 15; }, 90s));
    older.stop();
    newer.stop();
    // The observer: the commands' own logs, by the machine's clock, both fleets together.
    const InsideLog seen = observe_inside({{older.inside_log(), 1}, {newer.inside_log(), 1}});
    INFO(seen.entries << " entries, at most " << seen.most_inside << " inside at once");
    CHECK(seen.most_inside <= 2);
    for (const RunLoops* loops : {&older, &newer}) {
        const std::string exits = loops->exits();
        INFO("exit statuses of redsem run: " << exits);
        CHECK(static_cast<std::size_t>(std::count(exits.begin(), exits.end(), '0')) ==
              line_count(exits));
    }
    Connection admin = server.admin();
    CHECK(zcard(admin, semaphore_key("fleet", "holders")) == 0);
    CHECK(zcard(admin, semaphore_key("fleet", "queue")) == 0);
}

TEST_CASE("previous release: keys an older client creates in a semaphore in use get no expiry") {
    if (const std::string missing = previous_release_missing(); !missing.empty()) {
        REDSEM_SKIP(missing);
    }
    // 0.1.0 gives a key it creates the semaphore's expiry horizon (its first waiter's queue
    // and liveness set): a Redis under volatile-* could evict them while in use.
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const json holder = acquire_json(server, {"q", "--ttl", "5m"});
    const auto older =
        Child::shell("exec " + shell_quoted(redsem_previous_binary()) + " acquire q -w 30s", env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("q", "queue")) == 1; }, 10s));
    REQUIRE(run_redsem({"renew", "q", holder["token"].get<std::string>()}, env).exit_code == 0);
    for (const std::string part : {"state", "holders", "info", "queue", "alive", "slots"}) {
        INFO(part);
        CHECK(admin.call({"PTTL", semaphore_key("q", part)}).as_integer() == -1);
    }
    REQUIRE(run_redsem({"release", "q", holder["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(older->wait().exit_code == 0); // handed the slot
}

// A user without @dangerous (no INFO, ROLE, CONFIG, DEBUG), as managed services hand out:
// every subcommand works, and lost data is still noticed, by the script cache instead of
// INFO's run_id (see lua/lib/epoch.lua). Real redis-server processes; the observer is the
// default user's admin connection.
#include <catch2/catch.hpp>

#include "semaphore/protocol.hpp"
#include "support/helpers.hpp"
#include "support/redis_cluster.hpp"

#include <algorithm>
#include <set>
#include <sstream>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int k_closed = 73;  // ExitCode::closed
constexpr int k_timeout = 75; // ExitCode::timeout: no slot (busy)
constexpr int k_denied = 77;  // ExitCode::denied

// A server over TCP with user "app": redsem's keys and channels, every command but the
// @dangerous ones. Marked in use by the default user (an epoch that names the process), unless
// `new_data_set`.
RedisServer::Options with_app_user(std::vector<std::string> extra_args = {},
                                   bool new_data_set = false) {
    RedisServer::Options options;
    options.tcp = true;
    options.new_data_set = new_data_set;
    options.extra_args = {"--user",    "app", "on",    ">app-pw",
                          "~redsem:*", "&*",  "+@all", "-@dangerous"};
    options.extra_args.insert(options.extra_args.end(), extra_args.begin(), extra_args.end());
    return options;
}

// The environment of a client that connects to `server` as "app", with loss grace `grace`
// ("" for the default).
EnvChanges as_app(const RedisServer& server, const std::string& grace = "") {
    EnvChanges env{{"REDSEM_URL", "redis://app@127.0.0.1:" + std::to_string(server.port())},
                   {"REDSEM_PASSWORD", "app-pw"}};
    if (!grace.empty()) {
        env["REDSEM_LOSS_GRACE"] = grace;
    }
    return env;
}

long long holders(Connection& admin, const std::string& name) {
    return admin.call({"ZCARD", "redsem:{" + name + "}:holders"}).as_integer();
}

std::string epoch_marker(Connection& admin) {
    const Reply marker = admin.call({"HGET", "redsem:epoch", "cache_marker"});
    return marker.is_nil() ? "" : marker.as_string();
}

// Runs the newer redsem (every script another text) to completion; `args` are plain words.
ProcessResult run_newer(const std::vector<std::string>& args, const EnvChanges& env) {
    std::string command = "exec " + redsem_next_binary();
    for (const std::string& arg : args) {
        command += " " + arg;
    }
    return Child::shell(command, env)->wait();
}

bool has_proof_left(Connection& admin) {
    return admin.call({"HEXISTS", "redsem:epoch", "proof"}).as_integer() == 1;
}

} // namespace

TEST_CASE("without INFO: every subcommand works, and admission stays open between calls") {
    RedisServer server(with_app_user({}, true));
    Connection admin = server.admin();
    // The user may not read INFO: the scripts' check of the server's identity cannot use it.
    CHECK(admin.call({"ACL", "DRYRUN", "app", "INFO"}).as_string().find("no permissions") !=
          std::string::npos);

    // Nothing shows yet that this Redis process has seen redsem's records: closed.
    const auto first = run_redsem({"acquire", "lp", "-n", "2", "-w", "0"}, as_app(server));
    CHECK(first.exit_code == k_closed);
    CHECK(first.err.find("INFO, which would tell, is denied to this user or renamed") !=
          std::string::npos);
    CHECK(holders(admin, "lp") == 0);
    const std::string marker = epoch_marker(admin);
    CHECK(marker.size() == 32);

    // status proves the server's identity too, and shows the closed admission.
    const auto closed = run_redsem({"status", "lp", "--json"}, as_app(server));
    REQUIRE(closed.exit_code == 0);
    const json closed_admission = json::parse(closed.out)["admission"];
    CHECK(closed_admission["known"] == true);
    CHECK(closed_admission["closed"] == true);
    CHECK(closed_admission["cause"] == "unproven");

    // A caller that opts out of the grace gets in.
    const auto opted_out =
        run_redsem({"acquire", "lp", "-n", "2", "-w", "0", "--ttl", "5m"}, as_app(server, "0"));
    REQUIRE(opted_out.exit_code == 0);
    const std::string token = first_line(opted_out.out);
    // Once the grace has passed (moved back here rather than waited for), nobody needs to opt
    // out: each call proves that this process has seen the epoch, and the marker stays.
    admin.call({"HSET", "redsem:epoch", "lost_at", std::to_string(server_time_ms(admin) - 61000)});
    const auto ran = run_redsem({"run", "lp", "-w", "0", "--", "true"}, as_app(server));
    CHECK(ran.exit_code == 0);
    CHECK(ran.err.empty());
    CHECK(run_redsem({"renew", "lp", token}, as_app(server)).exit_code == 0);
    CHECK(run_redsem({"limit", "lp", "3"}, as_app(server)).exit_code == 0);
    const auto limit = run_redsem({"limit", "lp", "--json"}, as_app(server));
    CHECK(limit.exit_code == 0);
    CHECK(json::parse(limit.out)["limit"] == 3);
    const auto status = run_redsem({"status", "lp", "--json"}, as_app(server));
    CHECK(status.exit_code == 0);
    CHECK(json::parse(status.out)["held"] == 1);
    CHECK(run_redsem({"log", "lp"}, as_app(server)).exit_code == 0);
    CHECK(run_redsem({"gc", "lp"}, as_app(server)).exit_code == 0);
    // A pause keeps a waiter out with slots free; resume (which proves the epoch as any call
    // that admits) lets it in.
    CHECK(run_redsem({"pause", "lp", "--reason", "lp"}, as_app(server)).exit_code == 0);
    CHECK(run_redsem({"run", "lp", "-w", "0", "--", "true"}, as_app(server)).exit_code == k_closed);
    Child paused_waiter({"acquire", "lp", "-w", "30s"}, as_app(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{lp}:queue") == 1; }, 10s));
    CHECK(run_redsem({"resume", "lp"}, as_app(server)).exit_code == 0);
    const ProcessResult admitted = paused_waiter.wait(30s);
    CHECK(admitted.exit_code == 0);
    CHECK(run_redsem({"release", "lp", first_line(admitted.out)}, as_app(server)).exit_code == 0);
    CHECK(run_redsem({"release", "lp", token}, as_app(server)).exit_code == 0);
    CHECK(holders(admin, "lp") == 0);
    CHECK(epoch_marker(admin) == marker);
    CHECK(json::parse(
              run_redsem({"status", "lp", "--json"}, as_app(server)).out)["admission"]["closed"] ==
          false);

    // A user with INFO (monitoring, an operator) on an epoch only users without it wrote: it
    // proves the marker too, sees admission open, and takes a slot; after it, the users
    // without INFO still do.
    REQUIRE(admin.call({"HEXISTS", "redsem:epoch", "run"}).as_integer() == 0);
    const auto seen = run_redsem({"status", "lp", "--json"}, env_for(server));
    REQUIRE(seen.exit_code == 0);
    CHECK(json::parse(seen.out)["admission"]["closed"] == false);
    const auto with_info = run_redsem({"acquire", "lp", "-w", "0"}, env_for(server));
    CHECK(with_info.exit_code == 0);
    CHECK(run_redsem({"release", "lp", first_line(with_info.out)}, env_for(server)).exit_code == 0);
    const auto after_info = run_redsem({"acquire", "lp", "-w", "0"}, as_app(server));
    CHECK(after_info.exit_code == 0);
    CHECK(run_redsem({"release", "lp", first_line(after_info.out)}, as_app(server)).exit_code == 0);
    CHECK(epoch_marker(admin) == marker);
    CHECK(admin.call({"HEXISTS", "redsem:epoch", "run"}).as_integer() == 1);

    // A waiter is handed the slot a release frees, at once, as with INFO.
    const auto held = run_redsem({"acquire", "lp2", "--ttl", "5m"}, as_app(server));
    REQUIRE(held.exit_code == 0);
    Child waiter({"acquire", "lp2", "--json"}, as_app(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{lp2}:queue") == 1; }, 10s));
    REQUIRE(run_redsem({"release", "lp2", first_line(held.out)}, as_app(server)).exit_code == 0);
    const auto handed = waiter.wait(10s);
    CHECK(handed.exit_code == 0);
    CHECK(holders(admin, "lp2") == 1);
    CHECK(epoch_marker(admin) == marker);
}

TEST_CASE("without INFO: a restart that kept its data, SCRIPT FLUSH and a promoted replica "
          "close admission") {
    RedisServer server(with_app_user({"--appendonly", "yes"}));
    Connection admin = server.admin();
    REQUIRE(run_redsem({"acquire", "rs", "-n", "3", "-w", "0", "--ttl", "5m"}, as_app(server, "0"))
                .exit_code == 0);
    REQUIRE(holders(admin, "rs") == 1);
    const std::string marker = epoch_marker(admin);
    REQUIRE_FALSE(marker.empty());

    SECTION("a restart") {
        server.restart();
        Connection again = server.admin();
        // The data came back, the marker with it; the script cache did not.
        REQUIRE(epoch_marker(again) == marker);
        const auto newcomer = run_redsem({"acquire", "rs", "-w", "0"}, as_app(server));
        CHECK(newcomer.exit_code == k_closed);
        CHECK(holders(again, "rs") == 1);
        CHECK(epoch_marker(again) != marker);
        CHECK(again.call({"HGET", "redsem:epoch", "cause"}).as_string() == "unproven");
    }
    SECTION("SCRIPT FLUSH") {
        admin.call({"SCRIPT", "FLUSH"});
        const auto newcomer = run_redsem({"acquire", "rs", "-w", "0"}, as_app(server));
        CHECK(newcomer.exit_code == k_closed);
        CHECK(holders(admin, "rs") == 1);
    }
}

TEST_CASE("without INFO: a failover, and a failback to a node that still has the old marker "
          "cached, close admission") {
    RedisServer first(with_app_user());
    RedisServer second(with_app_user());
    Connection first_admin = first.admin();
    Connection second_admin = second.admin();
    second_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(first.port())});
    REQUIRE(wait_until(
        [&] { return info_field(second_admin, "replication", "master_link_status") == "up"; },
        20s));
    REQUIRE(run_redsem({"acquire", "fo", "-n", "3", "-w", "0", "--ttl", "5m"}, as_app(first, "0"))
                .exit_code == 0);
    // (WAIT on this connection, which wrote nothing, would not wait for redsem's writes.)
    const std::string first_marker = epoch_marker(first_admin);
    REQUIRE(wait_until([&] { return epoch_marker(second_admin) == first_marker; }, 20s));

    // Failover: the replica has the marker (replicated data), not the script naming it.
    second_admin.call({"REPLICAOF", "NO", "ONE"});
    const auto on_second = run_redsem({"acquire", "fo", "-w", "0", "--ttl", "5m"}, as_app(second));
    CHECK(on_second.exit_code == k_closed);
    const std::string second_marker = epoch_marker(second_admin);
    CHECK(second_marker != first_marker);
    REQUIRE(
        run_redsem({"acquire", "fo", "-w", "0", "--ttl", "5m"}, as_app(second, "0")).exit_code ==
        0);

    // Failback: the first node follows the second (taking its data, and its marker), and is
    // promoted again. It still has the first marker's script cached: that proves nothing now.
    first_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(second.port())});
    REQUIRE(wait_until(
        [&] {
            return info_field(first_admin, "replication", "master_link_status") == "up" &&
                   epoch_marker(first_admin) == second_marker;
        },
        20s));
    first_admin.call({"REPLICAOF", "NO", "ONE"});
    const auto back = run_redsem({"acquire", "fo", "-w", "0"}, as_app(first));
    CHECK(back.exit_code == k_closed);
    CHECK(holders(first_admin, "fo") == 2);
}

TEST_CASE("INFO, CONFIG and CLUSTER renamed away: every subcommand works, and SCRIPT FLUSH still "
          "closes admission") {
    RedisServer::Options options;
    options.extra_args = {"--rename-command", "INFO",    "", "--rename-command", "CONFIG", "",
                          "--rename-command", "CLUSTER", ""};
    options.new_data_set = true; // (marking it in use would need INFO)
    RedisServer server(options);
    Connection admin = server.admin();
    EnvChanges throwaway = env_for(server);
    throwaway["REDSEM_LOSS_GRACE"] = "0";
    const auto held = run_redsem({"acquire", "rn", "-n", "2", "--ttl", "5m", "-w", "0"}, throwaway);
    REQUIRE(held.exit_code == 0);
    CHECK(run_redsem({"run", "rn", "-w", "0", "--", "true"}, throwaway).exit_code == 0);
    const auto status = run_redsem({"status", "--json"}, env_for(server));
    CHECK(status.exit_code == 0);
    CHECK(json::parse(status.out).at(0)["held"] == 1);
    CHECK(run_redsem({"status", "--format", "prometheus"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"limit", "rn", "3"}, throwaway).exit_code == 0);
    CHECK(run_redsem({"log", "rn"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"gc"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"renew", "rn", first_line(held.out)}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"release", "rn", first_line(held.out)}, throwaway).exit_code == 0);

    admin.call({"SCRIPT", "FLUSH"});
    const auto after_flush = run_redsem({"acquire", "rn", "-w", "0"}, env_for(server));
    CHECK(after_flush.exit_code == k_closed);
    CHECK(holders(admin, "rn") == 0);
}

TEST_CASE("without INFO: a newer redsem (every script another text) keeps admission open, and "
          "shares the limit with this one") {
    RedisServer server(with_app_user({}, true));
    Connection admin = server.admin();
    const auto declared = run_redsem({"acquire", "up", "-w", "0"}, as_app(server, "0"));
    REQUIRE(declared.exit_code == 0);
    REQUIRE(run_redsem({"release", "up", first_line(declared.out)}, as_app(server)).exit_code == 0);
    const std::string marker = epoch_marker(admin);
    REQUIRE(marker.size() == 32);
    // The possible loss the first call declared is long past (moved back, not waited for).
    const std::string lost_at = std::to_string(server_time_ms(admin) - 61000);
    admin.call({"HSET", "redsem:epoch", "lost_at", lost_at});

    // This release holds the one slot; the newer one, with the default grace, is told "busy"
    // (not "closed"): its scripts are new to this Redis process, its proof is not.
    const auto held = run_redsem({"acquire", "up", "-w", "0", "--ttl", "5m"}, as_app(server));
    REQUIRE(held.exit_code == 0);
    const auto busy = run_newer({"acquire", "up", "-w", "0"}, as_app(server));
    CHECK(busy.exit_code == k_timeout);
    CHECK(busy.err.find("closed") == std::string::npos);
    const auto status = run_newer({"status", "up", "--json"}, as_app(server));
    REQUIRE(status.exit_code == 0);
    CHECK(json::parse(status.out)["admission"]["closed"] == false);
    CHECK(json::parse(status.out)["held"] == 1);

    // The newer release frees the slot and takes it; this one is then the one kept out.
    CHECK(run_newer({"release", "up", first_line(held.out)}, as_app(server)).exit_code == 0);
    const auto newer_held = run_newer({"acquire", "up", "-w", "0", "--ttl", "5m"}, as_app(server));
    REQUIRE(newer_held.exit_code == 0);
    CHECK(run_redsem({"acquire", "up", "-w", "0"}, as_app(server)).exit_code == k_timeout);
    CHECK(holders(admin, "up") == 1);
    CHECK(run_redsem({"release", "up", first_line(newer_held.out)}, as_app(server)).exit_code == 0);
    const auto ran = run_newer({"run", "up", "-w", "0", "--", "true"}, as_app(server));
    CHECK(ran.exit_code == 0);
    CHECK(ran.err.empty());
    CHECK(run_newer({"limit", "up", "2"}, as_app(server)).exit_code == 0);

    // No loss was declared on the way, and no proof was left behind.
    CHECK(epoch_marker(admin) == marker);
    CHECK(admin.call({"HGET", "redsem:epoch", "lost_at"}).as_string() == lost_at);
    CHECK_FALSE(has_proof_left(admin));

    // The newer release still notices what the script cache shows: here, a SCRIPT FLUSH.
    admin.call({"SCRIPT", "FLUSH"});
    CHECK(run_newer({"acquire", "up", "-w", "0"}, as_app(server)).exit_code == k_closed);
    CHECK(holders(admin, "up") == 0);
}

TEST_CASE("INFO allowed for some sections only: every subcommand works, as with INFO or as "
          "without it, never refused") {
    // Redis 7 ACLs allow INFO by its first argument: each section the scripts read may be
    // denied alone (server, replication: the server's identity; memory: the eviction policy).
    for (const std::vector<std::string>& sections :
         {std::vector<std::string>{"+info|replication"}, std::vector<std::string>{"+info|server"},
          std::vector<std::string>{"+info|server", "+info|replication"}}) {
        RedisServer server(with_app_user(sections, true)); // INFO is @dangerous
        Connection admin = server.admin();
        const EnvChanges env = as_app(server, "0");
        INFO("allowed: " << sections.front() << (sections.size() > 1 ? " and more" : ""));
        const auto held = run_redsem({"acquire", "sec", "-n", "2", "--ttl", "5m", "-w", "0"}, env);
        INFO(held.err);
        REQUIRE(held.exit_code == 0);
        CHECK(run_redsem({"run", "sec", "-w", "0", "--", "true"}, env).exit_code == 0);
        CHECK(run_redsem({"status", "sec"}, env).exit_code == 0);
        CHECK(run_redsem({"renew", "sec", first_line(held.out)}, env).exit_code == 0);
        CHECK(run_redsem({"release", "sec", first_line(held.out)}, env).exit_code == 0);
        CHECK(holders(admin, "sec") == 0);
    }
}

TEST_CASE("without INFO and without MULTI: a call that must prove the epoch is refused, naming "
          "MULTI, and changes nothing") {
    RedisServer server(with_app_user({}, true));
    Connection admin = server.admin();
    admin.call({"ACL", "SETUSER", "app", "-multi"});
    const auto refused = run_redsem({"acquire", "nm", "-w", "0"}, as_app(server, "0"));
    CHECK(refused.exit_code == k_denied);
    CHECK(refused.err.find("multi") != std::string::npos);
    CHECK(refused.err.rfind("redsem: ", 0) == 0);
    CHECK(holders(admin, "nm") == 0);
    CHECK(zcard(admin, "redsem:{nm}:queue") == 0);
    CHECK_FALSE(has_proof_left(admin));
    CHECK(admin.call({"HEXISTS", "redsem:epoch", "cache_marker"}).as_integer() == 0);
}

TEST_CASE("a user without CLUSTER lists every semaphore of a plain server (status, gc)") {
    RedisServer server(with_app_user({}, true));
    Connection admin = server.admin();
    admin.call({"ACL", "SETUSER", "app", "-cluster"});
    REQUIRE(run_redsem({"acquire", "nc", "--ttl", "5m"}, as_app(server, "0")).exit_code == 0);
    const auto status = run_redsem({"status", "--json"}, as_app(server));
    INFO("status said: " << status.err);
    CHECK(status.exit_code == 0);
    CHECK(status.out.find("\"nc\"") != std::string::npos);
    CHECK(run_redsem({"status", "--format", "prometheus"}, as_app(server)).exit_code == 0);
    const auto gc = run_redsem({"gc", "--dry-run"}, as_app(server));
    INFO("gc said: " << gc.err);
    CHECK(gc.exit_code == 0);
}

namespace {

void set_user(Connection& admin, const std::vector<std::string>& rules) {
    std::vector<std::string> command{"ACL", "SETUSER", "redsem", "reset"};
    command.insert(command.end(), rules.begin(), rules.end());
    admin.call(command);
}

EnvChanges as_redsem_user(const std::string& url_without_scheme) {
    return {{"REDSEM_URL", "redis://redsem@" + url_without_scheme},
            {"REDSEM_PASSWORD", "redsem-pw"},
            {"REDSEM_LOSS_GRACE", "0"}}; // a new Redis, without INFO (see the first test)
}

struct Step {
    std::string what;
    ProcessResult result;
};

// Every subcommand on semaphores NAME and NAME-w, as a user would run them; a waiter that
// gives up after 200ms is the one step that is meant to exit 75.
std::vector<Step> every_subcommand(const std::string& name, const EnvChanges& env) {
    std::vector<Step> steps;
    const auto step = [&](const std::string& what, const std::vector<std::string>& args) {
        steps.push_back({what, run_redsem(args, env)});
        return steps.back().result;
    };
    const ProcessResult held =
        step("acquire", {"acquire", name, "-n", "2", "--ttl", "5m", "-w", "0"});
    const std::string token = first_line(held.out);
    // (A token a refused acquire did not print: the steps that need it are left out.)
    const auto with_token = [&](const std::string& what, const std::string& verb,
                                const std::string& semaphore, const std::string& tok) {
        if (!tok.empty()) {
            step(what, {verb, semaphore, tok});
        }
    };
    with_token("renew", "renew", name, token);
    step("run", {"run", name, "-w", "0", "--", "true"});
    step("status", {"status"});
    step("status NAME --json", {"status", name, "--json"});
    step("status --format prometheus", {"status", "--format", "prometheus"});
    step("limit NAME N", {"limit", name, "3"});
    step("limit --history", {"limit", name, "--history", "50"});
    step("log", {"log", name});
    const ProcessResult other =
        step("acquire (to wait for)", {"acquire", name + "-w", "--ttl", "5m"});
    step("waiter", {"acquire", name + "-w", "-w", "200ms"});
    with_token("release (other)", "release", name + "-w", first_line(other.out));
    step("gc --dry-run", {"gc", "--dry-run"});
    step("gc", {"gc"});
    with_token("release", "release", name, token);
    return steps;
}

} // namespace

TEST_CASE("the README's least-privilege user runs every subcommand, and each rule taken away "
          "gives 77 naming it, or turns off only its feature, with nothing half-written") {
    const std::vector<std::vector<std::string>> lines = readme_acl_rules();
    REQUIRE(lines.size() == 2);
    const std::vector<std::string>& rules = lines[0];
    RedisServer server(with_app_user({}, true));
    Connection admin = server.admin();
    const EnvChanges env = as_redsem_user("127.0.0.1:" + std::to_string(server.port()));
    set_user(admin, rules);

    for (const Step& step : every_subcommand("lp-all", env)) {
        INFO(step.what << " said: " << step.result.err);
        CHECK(step.result.exit_code == (step.what == "waiter" ? k_timeout : 0));
    }
    // The history was written (XADD allowed): log shows the acquire.
    CHECK(run_redsem({"log", "lp-all"}, env).out.find("acquired") != std::string::npos);

    // The rules whose absence only turns a feature off (README), and the commands every
    // script checks before it writes (lua/lib/main.lua): a first acquire without one fails.
    // (Without +fcall or +function|load the scripts go by EVAL: nothing is turned off.)
    const std::set<std::string> feature_only{"+xadd",  "+xtrim", "+wait",         "+select",
                                             "+xread", "+fcall", "+function|load"};
    std::set<std::string> checked_by_scripts; // (src/semaphore/protocol.hpp)
    for (const std::string_view command : k_script_commands) {
        checked_by_scripts.insert("+" + std::string(command));
    }
    // The README's user may run every one of them.
    for (const std::string& rule : checked_by_scripts) {
        INFO(rule);
        CHECK(std::find(rules.begin(), rules.end(), rule) != rules.end());
    }
    // Needed, but not by these steps: PING, only before a blocking command on a connection
    // whose server has not answered yet (a waiter after a reconnect); XREVRANGE, only by
    // status --watch, which needs a terminal.
    const std::set<std::string> not_exercised{"+ping", "+xrevrange"};
    int index = 0;
    for (const std::string& rule : rules) {
        if (rule.rfind('+', 0) != 0) {
            continue;
        }
        const std::string command = rule.substr(1);
        const std::string name = "lp" + std::to_string(index++);
        set_user(admin, rules);
        admin.call({"ACL", "SETUSER", "redsem", "-" + command});
        admin.call({"SCRIPT", "FLUSH"}); // as on a server redsem never used: EVAL needed
        const std::vector<Step> steps = every_subcommand(name, env);
        bool refused = false;
        for (const Step& step : steps) {
            INFO("without " << rule << ", " << step.what << " said: " << step.result.err);
            const int code = step.result.exit_code;
            CHECK((code == 0 || code == 77 || (code == k_timeout && step.what == "waiter")));
            if (code == 77) {
                refused = true;
                CHECK(step.result.err.find("'" + command + "'") != std::string::npos);
                CHECK(step.result.err.find("+" + command) != std::string::npos);
            }
        }
        INFO("without " << rule);
        if (not_exercised.count(rule) != 0) {
            continue;
        }
        if (feature_only.count(rule) != 0) {
            CHECK_FALSE(refused);
        } else {
            CHECK(refused);
        }
        if (checked_by_scripts.count(rule) != 0) {
            CHECK(steps.front().result.exit_code == 77);
            // Nothing of the semaphore was written.
            CHECK(admin.call({"KEYS", "redsem:{" + name + "}*"}).as_array().empty());
        }
    }

    // Without +wait, --replicas is refused; without +xread, log --follow; without +xadd, no
    // history is written.
    set_user(admin, rules);
    admin.call({"ACL", "SETUSER", "redsem", "-wait", "-xread", "-xadd"});
    const auto replicas = run_redsem({"acquire", "lp-f", "--replicas", "1", "-w", "0"}, env);
    CHECK(replicas.exit_code == 77);
    CHECK(replicas.err.find("+wait") != std::string::npos);
    const auto follow = run_redsem({"log", "lp-all", "--follow"}, env);
    CHECK(follow.exit_code == 77);
    CHECK(follow.err.find("+xread") != std::string::npos);
    const long long entries = admin.call({"XLEN", "redsem:{lp-all}:log"}).as_integer();
    REQUIRE(run_redsem({"run", "lp-all", "-w", "0", "--", "true"}, env).exit_code == 0);
    CHECK(admin.call({"XLEN", "redsem:{lp-all}:log"}).as_integer() == entries);
}

TEST_CASE("the README's least-privilege user for a Redis Cluster runs every subcommand",
          "[cluster]") {
    const std::vector<std::vector<std::string>> lines = readme_acl_rules();
    REQUIRE(lines.size() == 2);
    RedisCluster cluster;
    for (std::size_t i = 0; i < cluster.size(); ++i) {
        Connection admin = cluster.node(i).admin();
        set_user(admin, lines[1]);
    }
    const std::vector<std::size_t> primaries = cluster.primaries();
    const EnvChanges env =
        as_redsem_user("127.0.0.1:" + std::to_string(cluster.node(primaries[0]).port()));
    // A name on another primary than the URL's: every call is redirected.
    const std::string name = cluster.name_on(primaries[1], "lpc");
    for (const Step& step : every_subcommand(name, env)) {
        INFO(step.what << " said: " << step.result.err);
        CHECK(step.result.exit_code == (step.what == "waiter" ? k_timeout : 0));
    }
    const auto status = run_redsem({"status", "--json"}, env);
    CHECK(status.out.find("\"" + name + "\"") != std::string::npos);
}

TEST_CASE("without INFO: `redsem lost` closes admission, and a caller's own grace still opens "
          "it for itself") {
    RedisServer server(with_app_user());
    Connection admin = server.admin();
    REQUIRE(
        run_redsem({"acquire", "decl", "-n", "2", "--ttl", "5m", "-w", "0"}, as_app(server, "0"))
            .exit_code == 0); // (draws the epoch's marker: a first call without INFO)
    const ProcessResult declared = run_redsem({"lost", "-q"}, as_app(server));
    INFO(declared.err);
    REQUIRE(declared.exit_code == 0);
    CHECK(declared.err.empty());
    const ProcessResult refused = run_redsem({"acquire", "decl", "-w", "0"}, as_app(server));
    INFO(refused.err);
    CHECK(refused.exit_code == k_closed);
    CHECK(refused.err.find("an operator declared") != std::string::npos);
    CHECK(holders(admin, "decl") == 1);
    // doctor, which may write no proof, says so too, as status does.
    const ProcessResult doctor = run_redsem({"doctor"}, as_app(server));
    INFO(doctor.out);
    CHECK(doctor.out.find("admission closed after a possible loss of data in 1 of them") !=
          std::string::npos);
    CHECK(run_redsem({"status", "decl"}, as_app(server)).out.find("admission closed") !=
          std::string::npos);
    CHECK(run_redsem({"acquire", "decl", "-w", "0"}, as_app(server, "0")).exit_code == 0);
}

// A freeze of admission: `redsem pause`, `resume` and `drain`, against a real redis-server,
// with real redsem processes holding and waiting.
#include <catch2/catch.hpp>

#include "semaphore/protocol.hpp"
#include "support/helpers.hpp"

#include <csignal>
#include <memory>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

json status_json(const RedisServer& server, const std::string& name) {
    const ProcessResult status = run_redsem({"status", name, "--json"}, env_for(server));
    REQUIRE(status.exit_code == 0);
    return json::parse(status.out);
}

// The tokens of `name`'s history events of `kind`, oldest first.
std::vector<std::string> tokens_of(const RedisServer& server, const std::string& name,
                                   const std::string& kind) {
    std::vector<std::string> tokens;
    for (const json& event : history_events(server, name)) {
        if (event["event"] == kind) {
            tokens.push_back(event["token"]);
        }
    }
    return tokens;
}

// The liveness deadline of waiter `token` (when it must refresh its place by), 0 when none.
long long alive_until(Connection& admin, const std::string& name, const std::string& token) {
    const Reply score = admin.call({"ZSCORE", semaphore_key(name, "alive"), token});
    return score.is_nil() ? 0 : std::stoll(score.as_string());
}

} // namespace

TEST_CASE("pause: nobody new is admitted, holders renew, waiters keep their places, and resume "
          "serves them in FIFO order") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const std::string name = "freeze";
    const auto holder = acquire_json(server, {name, "-n", "2", "--ttl", "30s"});
    const std::string holder_token = holder["token"];

    // A reason in any language, and with a terminal escape that must not reach a terminal.
    const std::string reason = "db migration – étape 2\x1b[2J";
    const ProcessResult paused = run_redsem({"pause", name, "--reason", reason, "--json"}, env);
    REQUIRE(paused.exit_code == 0);
    const json pause = json::parse(paused.out)["paused"];
    CHECK(pause["reason"] == reason);
    CHECK(pause["until_ms"].is_null());
    CHECK(json::parse(paused.out)["held"] == 1);

    // A free slot, and still nobody new: -w 0 fails with the code of a closed admission,
    // which neither -E nor -q turns into success; the message says who paused and why.
    const ProcessResult refused = run_redsem({"acquire", name, "-w", "0"}, env);
    CHECK(refused.exit_code == 73);
    CHECK(refused.out.empty());
    CHECK(refused.err.find("'freeze' is paused") != std::string::npos);
    CHECK(refused.err.find("db migration – étape 2\\x1b[2J") != std::string::npos);
    CHECK(refused.err.find(pause["by"]["user"].get<std::string>()) != std::string::npos);
    CHECK(line_count(refused.err) == 1);
    CHECK(run_redsem({"run", name, "-w", "0", "-E", "0", "-q", "--", "true"}, env).exit_code == 73);
    CHECK(zcard(admin, semaphore_key(name, "holders")) == 1);

    // The holder keeps its slot and renews.
    CHECK(run_redsem({"renew", name, holder_token}, env).exit_code == 0);

    // Waiters queue in order, and each says once that the semaphore is paused.
    std::vector<std::unique_ptr<Child>> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.push_back(
            std::make_unique<Child>(std::vector<std::string>{"run", name, "--", "true"}, env));
        // (The queue also holds the pause's mark, behind everybody.)
        REQUIRE(
            wait_until([&] { return zcard(admin, semaphore_key(name, "queue")) == i + 2; }, 10s));
    }
    std::vector<std::string> queued;
    const Reply queue = admin.call({"ZRANGE", semaphore_key(name, "queue"), "0", "-1"});
    for (const Reply& token : queue.as_array()) {
        if (token.as_string() != k_pause_mark) { // (behind everybody while paused: nobody)
            queued.push_back(token.as_string());
        }
    }

    // The holder leaves: its slot is not handed over while paused. The head of the queue
    // refreshes its place with two slots free, and still takes none.
    REQUIRE(run_redsem({"release", name, holder_token}, env).exit_code == 0);
    const long long refreshed_before = alive_until(admin, name, queued[0]);
    REQUIRE(
        wait_until([&] { return alive_until(admin, name, queued[0]) > refreshed_before; }, 10s));
    CHECK(zcard(admin, semaphore_key(name, "holders")) == 0);
    CHECK(zcard(admin, semaphore_key(name, "queue")) == 3 + 1); // and the pause's mark
    CHECK(queued.size() == 3);
    for (auto& waiter : waiters) {
        CHECK_FALSE(waiter->finished());
    }

    REQUIRE(run_redsem({"resume", name}, env).exit_code == 0);
    for (auto& waiter : waiters) {
        const ProcessResult done = waiter->wait(20s);
        CHECK(done.exit_code == 0);
        CHECK(done.err.find("'freeze' is paused") != std::string::npos);
        CHECK(done.err.find("db migration") != std::string::npos);
    }
    std::vector<std::string> granted = tokens_of(server, name, "acquired");
    REQUIRE(granted.size() == 4); // the first holder, then the three waiters
    granted.erase(granted.begin());
    CHECK(granted == queued);
    const ProcessResult again = run_redsem({"resume", name}, env);
    CHECK(again.exit_code == 0);
    CHECK(again.err == "redsem: 'freeze' was not paused\n");
}

TEST_CASE("pause: status, log and Prometheus show it, with who and why, and resume clears it") {
    RedisServer server;
    const auto env = env_for(server);
    const std::string name = "shown";
    REQUIRE(run_redsem({"pause", name, "--reason", "release 4.2 freeze", "--for", "1h"}, env)
                .exit_code == 0);
    const json status = status_json(server, name);
    REQUIRE(status["paused"].is_object());
    CHECK(status["paused"]["reason"] == "release 4.2 freeze");
    CHECK(status["paused"]["ends_in_ms"].get<long long>() > 3'500'000);
    CHECK(status["paused"]["ends_in_ms"].get<long long>() <= 3'600'000);
    CHECK(status["paused"]["age_ms"].get<long long>() >= 0);
    CHECK(status["limit"] == 1);

    const ProcessResult table = run_redsem({"status", name}, env);
    CHECK(table.out.find("'shown' is paused") != std::string::npos);
    CHECK(table.out.find("release 4.2 freeze; it ends in") != std::string::npos);
    const ProcessResult all = run_redsem({"status"}, env);
    CHECK(all.out.find("'shown' is paused") != std::string::npos);
    const ProcessResult listed = run_redsem({"status", "--json"}, env);
    CHECK(json::parse(listed.out)[0]["paused"]["reason"] == "release 4.2 freeze");
    const ProcessResult metrics = run_redsem({"status", "--format", "prometheus"}, env);
    CHECK(metrics.out.find("redsem_paused{prefix=\"redsem\",name=\"shown\"} 1\n") !=
          std::string::npos);

    REQUIRE(run_redsem({"resume", name}, env).exit_code == 0);
    CHECK(status_json(server, name)["paused"].is_null());
    const ProcessResult after = run_redsem({"status", "--format", "prometheus"}, env);
    // Resumed and idle: the semaphore that only the pause kept is gone with it, or shows 0.
    CHECK(after.out.find("redsem_paused{prefix=\"redsem\",name=\"shown\"} 1") == std::string::npos);

    const std::vector<json> events = history_events(server, name);
    REQUIRE(events.size() == 2);
    CHECK(events[0]["event"] == "paused");
    CHECK(events[0]["reason"] == "release 4.2 freeze");
    CHECK(events[0]["until_ms"].is_number());
    CHECK(events[1]["event"] == "resumed");
    CHECK(events[1]["ran_out"] == false);
    CHECK(events[1]["user"] == events[0]["user"]);
    const ProcessResult text = run_redsem({"log", name}, env);
    CHECK(text.out.find("resumed after") != std::string::npos);
}

TEST_CASE("pause --for ends by itself: a waiter takes its slot when it runs out") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const std::string name = "brief";
    const ProcessResult paused = run_redsem({"pause", name, "--for", "1500ms", "--json"}, env);
    REQUIRE(paused.exit_code == 0);
    const long long until_ms = json::parse(paused.out)["paused"]["until_ms"];
    CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 73);
    const ProcessResult waited = run_redsem({"acquire", name, "-w", "20s", "--json"}, env);
    REQUIRE(waited.exit_code == 0);
    // Granted by the server's clock after the pause ran out, and the stored limit is a number
    // again.
    CHECK(json::parse(waited.out)["deadline_ms"].get<long long>() - 60'000 >= until_ms);
    CHECK(admin.call({"HGET", semaphore_key(name, "state"), "limit"}).as_string() == "1");
    const ProcessResult log = run_redsem({"log", name}, env);
    CHECK(log.out.find("pause ran out (--for)") != std::string::npos);
}

TEST_CASE("drain: pauses, waits for the holders to leave, exits 0, or 75 on timeout, still "
          "paused") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const std::string name = "window";
    const auto first = acquire_json(server, {name, "-n", "3"});
    // A holder that dies without a release: its lease runs out by the server's clock.
    const auto dying = acquire_json(server, {name, "--ttl", "2s"});

    const ProcessResult short_wait = run_redsem({"drain", name, "-w", "300ms"}, env);
    CHECK(short_wait.exit_code == 75);
    CHECK(short_wait.err.find("still has 2 holding") != std::string::npos);
    CHECK(status_json(server, name)["paused"].is_object());

    auto draining = std::make_unique<Child>(
        std::vector<std::string>{"drain", name, "--reason", "maintenance", "-w", "30s"}, env);
    REQUIRE(wait_until(
        [&] { return status_json(server, name)["paused"]["reason"] == "maintenance"; }, 10s));
    CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 73);
    REQUIRE(run_redsem({"release", name, first["token"].get<std::string>()}, env).exit_code == 0);
    const ProcessResult drained = draining->wait(30s);
    CHECK(drained.exit_code == 0);
    CHECK(zcard(admin, semaphore_key(name, "holders")) == 0);
    // Still paused: the maintenance runs alone until resumed.
    CHECK(status_json(server, name)["paused"]["reason"] == "maintenance");
    CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 73);
    REQUIRE(run_redsem({"resume", name}, env).exit_code == 0);
    CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 0);
    CHECK(tokens_of(server, name, "expired") ==
          std::vector<std::string>{dying["token"].get<std::string>()});
}

TEST_CASE("drain gives up with 75 when somebody resumes meanwhile") {
    RedisServer server;
    const auto env = env_for(server);
    const std::string name = "undone";
    const auto holder = acquire_json(server, {name, "--ttl", "30s"});
    auto draining = std::make_unique<Child>(std::vector<std::string>{"drain", name}, env);
    REQUIRE(wait_until([&] { return status_json(server, name)["paused"].is_object(); }, 10s));
    REQUIRE(run_redsem({"resume", name}, env).exit_code == 0);
    REQUIRE(run_redsem({"release", name, holder["token"].get<std::string>()}, env).exit_code == 0);
    const ProcessResult result = draining->wait(30s);
    CHECK(result.exit_code == 75);
    CHECK(result.err.find("ended while draining") != std::string::npos);
}

TEST_CASE("a pause survives a restart, gc and limit --unset, and older redsem cannot admit "
          "while it lasts") {
    RedisServer::Options options;
    options.extra_args = {"--appendonly", "yes"};
    RedisServer server(options);
    const auto env = env_for(server);
    Connection admin = server.admin();
    const std::string name = "kept";
    REQUIRE(run_redsem({"limit", name, "3"}, env).exit_code == 0);
    REQUIRE(run_redsem({"pause", name, "--reason", "freeze"}, env).exit_code == 0);
    REQUIRE(run_redsem({"limit", name, "--unset"}, env).exit_code == 0);

    // Every redsem before pauses reads the limit with Lua's tonumber() and refuses a state
    // whose limit is not a number (lua/acquire.lua: {'conflict', -1}); the limit in force is
    // still there for this one.
    const char* older_check = "return tostring(tonumber(redis.call('HGET', KEYS[1], 'limit')))";
    CHECK(admin.call({"EVAL", older_check, "1", semaphore_key(name, "state")}).as_string() ==
          "nil");
    CHECK(status_json(server, name)["limit"] == 3);
    // An older `redsem limit 3` writes a plain number over the mark; the next call of this
    // redsem that writes marks it again.
    admin.call({"HSET", semaphore_key(name, "state"), "limit", "3", "limit_by", "operator"});
    CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 73);
    CHECK(admin.call({"EVAL", older_check, "1", semaphore_key(name, "state")}).as_string() ==
          "nil");

    // Idle, no expiry, kept by gc. The queue holds the pause's mark, so that no gc (also an
    // older one) takes the semaphore for empty; it is nobody, and no waiter.
    CHECK(admin.call({"PTTL", semaphore_key(name, "state")}).as_integer() == -1);
    CHECK(!admin.call({"ZSCORE", semaphore_key(name, "queue"), "paused"}).is_nil());
    CHECK(admin.call({"PTTL", semaphore_key(name, "queue")}).as_integer() == -1);
    CHECK(status_json(server, name)["waiters"].empty());
    const ProcessResult gc = run_redsem({"gc", name}, env);
    CHECK(gc.exit_code == 0);
    server.restart();
    Connection again = server.admin();
    const json status = status_json(server, name);
    CHECK(status["paused"]["reason"] == "freeze");
    CHECK(status["limit"] == 3);
    CHECK(run_redsem({"acquire", name, "-w", "0"}, env).exit_code == 73);

    // Resumed: the limit reads as a number again, and the keys that only the pause kept
    // expire as an idle semaphore's do.
    REQUIRE(run_redsem({"resume", name}, env).exit_code == 0);
    CHECK(again.call({"EXISTS", semaphore_key(name, "queue")}).as_integer() == 0);
    CHECK(again.call({"HGET", semaphore_key(name, "state"), "limit"}).as_string() == "3");
    CHECK(again.call({"PTTL", semaphore_key(name, "state")}).as_integer() > 0);
}

TEST_CASE("pause, resume and drain refuse bad input with an error line and 64") {
    RedisServer server;
    const auto env = env_for(server);
    const std::vector<std::vector<std::string>> bad{
        {"pause"},
        {"pause", "x", "--for", "0"},
        {"pause", "x", "--for", "soon"},
        {"pause", "bad name"},
        {"drain", "x", "-w", "later"},
        {"resume", "x", "--for", "1m"},
        {"pause", "x", "--frozen"},
    };
    Connection admin = server.admin();
    for (const auto& args : bad) {
        INFO((args.size() > 1 ? args[1] : args[0]));
        const ProcessResult result = run_redsem(args, env);
        CHECK(result.exit_code == 64);
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(result.err.find("\nTry 'redsem " + args[0] + " --help'.\n") != std::string::npos);
        CHECK(line_count(result.err) == 2);
    }
    CHECK(admin.call({"DBSIZE"}).as_integer() <= 1); // the epoch key at most
}

TEST_CASE("pause: pausing again never shortens the pause in force, a pause with --for is "
          "kept no longer than its end, and a limit this redsem cannot read is left alone") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    REQUIRE(run_redsem({"pause", "long", "--reason", "release freeze"}, env).exit_code == 0);
    REQUIRE(run_redsem({"drain", "long", "--reason", "quick fix", "--for", "1s"}, env).exit_code ==
            0);
    const json paused = status_json(server, "long")["paused"];
    CHECK(paused["until_ms"].is_null()); // still until resumed
    CHECK(paused["reason"] == "quick fix");

    const ProcessResult brief = run_redsem({"pause", "brief", "--for", "1h", "--json"}, env);
    REQUIRE(brief.exit_code == 0);
    const long long until_ms = json::parse(brief.out)["paused"]["until_ms"];
    const long long expires_at =
        admin.call({"PEXPIRETIME", semaphore_key("brief", "state")}).as_integer();
    CHECK(expires_at == until_ms + 12 * 3600 * 1000);

    admin.call({"HSET", semaphore_key("odd", "state"), "limit", "3 frozen"});
    const ProcessResult odd = run_redsem({"pause", "odd"}, env);
    CHECK(odd.exit_code == 65);
    CHECK(admin.call({"HGET", semaphore_key("odd", "state"), "limit"}).as_string() == "3 frozen");
}

TEST_CASE("drain ends with 75 when its --for runs out with holders left") {
    RedisServer server;
    const auto env = env_for(server);
    const auto holder = acquire_json(server, {"timed", "--ttl", "1m"});
    const ProcessResult result = run_redsem({"drain", "timed", "--for", "1s"}, env);
    CHECK(result.exit_code == 75);
    CHECK(result.err.find("ended while draining") != std::string::npos);
    Connection admin = server.admin();
    CHECK(zcard(admin, semaphore_key("timed", "holders")) == 1); // the holder was never touched
    (void)holder;
}

TEST_CASE("gc: a semaphore whose pause ran out is deleted, and --dry-run says so first") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    // 5s: the first dry run must come while the pause lasts (1s was once too short under
    // AddressSanitizer on a loaded machine).
    REQUIRE(run_redsem({"pause", "brief", "--for", "5s"}, env).exit_code == 0);
    REQUIRE(run_redsem({"pause", "frozen"}, env).exit_code == 0);
    const auto deleted_by = [&](const std::vector<std::string>& args) {
        const ProcessResult result = run_redsem(args, env);
        REQUIRE(result.exit_code == 0);
        return json::parse(result.out)["deleted"];
    };
    CHECK(deleted_by({"gc", "--dry-run", "--json"}).empty()); // both paused: both kept
    REQUIRE(wait_until([&] { return status_json(server, "brief")["paused"].is_null(); }, 20s));

    CHECK(deleted_by({"gc", "--dry-run", "--json"}) == json::array({"brief"}));
    CHECK(admin.call({"EXISTS", semaphore_key("brief", "state")}).as_integer() == 1);
    CHECK(deleted_by({"gc", "--json"}) == json::array({"brief"}));
    CHECK(admin.call({"EXISTS", semaphore_key("brief", "state")}).as_integer() == 0);
    CHECK(status_json(server, "frozen")["paused"].is_object());
}

TEST_CASE("a pause with --for on a semaphore in use gives nothing an expiry while it is in use") {
    // Under volatile-* Redis evicts keys with an expiry: the state hash (with the pause) and
    // the queue must have none while anybody holds or waits, and get one back once idle.
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const json holder = acquire_json(server, {"busy", "-n", "2", "--ttl", "5m"});
    REQUIRE(run_redsem({"pause", "busy", "--for", "1m"}, env).exit_code == 0);
    for (const std::string part : {"state", "queue", "holders", "info", "slots"}) {
        INFO(part);
        CHECK(admin.call({"PTTL", semaphore_key("busy", part)}).as_integer() == -1);
    }
    REQUIRE(run_redsem({"renew", "busy", holder["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(admin.call({"PTTL", semaphore_key("busy", "state")}).as_integer() == -1);
    CHECK(admin.call({"PTTL", semaphore_key("busy", "queue")}).as_integer() == -1);

    // Idle: kept for the pause, until 12 hours after its end, and no longer.
    REQUIRE(run_redsem({"release", "busy", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    for (const std::string part : {"state", "queue"}) {
        INFO(part);
        const long long ttl = admin.call({"PTTL", semaphore_key("busy", part)}).as_integer();
        CHECK(ttl > 12LL * 3600 * 1000);
        CHECK(ttl <= 12LL * 3600 * 1000 + 60'000);
    }
    CHECK(status_json(server, "busy")["paused"].is_object());
}

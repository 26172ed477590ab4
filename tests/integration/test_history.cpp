// History (`redsem log`), `status --watch` and `status --format prometheus`, against a private
// redis-server.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "semaphore/history.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/protocol.hpp"
#include "support/helpers.hpp"
#include "support/skip.hpp"
#include "util/table.hpp"
#include "util/time_format.hpp"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// The events of `name` after the first `seen`, as (event, token) pairs, for comparing a step's
// events with what it must have logged.
std::vector<std::pair<std::string, std::string>>
new_events(const RedisServer& server, const std::string& name, std::size_t& seen) {
    const auto events = history_events(server, name);
    std::vector<std::pair<std::string, std::string>> out;
    for (std::size_t i = seen; i < events.size(); ++i) {
        out.emplace_back(events[i]["event"], events[i].value("token", ""));
    }
    seen = events.size();
    return out;
}

// Waits (up to 10s) until `name` has `count` waiters, as status reports them.
void await_waiters(const RedisServer& server, const std::string& name, int count) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (;;) {
        const auto result = run_redsem({"status", name, "--json"}, env_for(server));
        REQUIRE(result.exit_code == 0);
        if (json::parse(result.out)["waiting"] == count) {
            return;
        }
        REQUIRE(std::chrono::steady_clock::now() < give_up);
        std::this_thread::sleep_for(20ms);
    }
}

using Events = std::vector<std::pair<std::string, std::string>>;

} // namespace

TEST_CASE("history: each step of a scripted sequence logs its events exactly once, with "
          "their fields") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    std::size_t seen = 0;

    // A new semaphore: its limit, then the grant.
    const json a = acquire_json(server, {"h", "-n", "1", "--ttl", "30s", "--label", "first"});
    const std::string token_a = a["token"];
    CHECK(new_events(server, "h", seen) == Events{{"limit", ""}, {"acquired", token_a}});
    auto events = history_events(server, "h");
    CHECK(events[0]["from"].is_null());
    CHECK(events[0]["to"] == 1);
    const json& granted = events[1];
    CHECK(granted["slot"] == a["slot"]);
    CHECK(granted["fence"] == a["fence"]);
    CHECK(granted["label"] == "first");
    CHECK(granted["waited_ms"] == 0);
    // The holder as status shows it.
    const json status = json::parse(run_redsem({"status", "h", "--json"}, env).out);
    REQUIRE(status["holders"].size() == 1);
    CHECK(granted["user"] == status["holders"][0]["user"]);
    CHECK(granted["host"] == status["holders"][0]["host"]);
    CHECK(granted["pid"] == status["holders"][0]["pid"]);
    CHECK(granted["pid_of"] == "caller");
    CHECK(granted["name"] == "h");

    // A waiter queues; the release hands it the slot.
    Child waiter({"acquire", "h", "--ttl", "30s", "--label", "second", "--json"}, env);
    await_waiters(server, "h", 1);
    auto step = new_events(server, "h", seen);
    REQUIRE(step.size() == 1);
    CHECK(step[0].first == "queued");
    const std::string token_b = step[0].second;
    std::this_thread::sleep_for(50ms); // so that it has waited measurably
    REQUIRE(run_redsem({"release", "h", token_a}, env).exit_code == 0);
    const ProcessResult b_result = waiter.wait();
    REQUIRE(b_result.exit_code == 0);
    const json b = json::parse(b_result.out);
    CHECK(b["token"] == token_b);
    CHECK(new_events(server, "h", seen) == Events{{"released", token_a}, {"acquired", token_b}});
    events = history_events(server, "h");
    const json& released = events[events.size() - 2];
    const json& handed = events.back();
    CHECK(released["slot"] == a["slot"]);
    CHECK(released["fence"] == a["fence"]);
    CHECK(released["held_ms"].get<long long>() >= 50);
    CHECK(handed["fence"] == b["fence"]);
    CHECK(handed["label"] == "second");
    CHECK(handed["waited_ms"].get<long long>() >= 50);

    // A waiter that gives up leaves the queue.
    const ProcessResult c = run_redsem({"acquire", "h", "-w", "300ms", "--label", "third"}, env);
    CHECK(c.exit_code == 75);
    step = new_events(server, "h", seen);
    REQUIRE(step.size() == 2);
    CHECK(step[0].first == "queued");
    CHECK(step[1] == std::pair<std::string, std::string>{"left", step[0].second});
    events = history_events(server, "h");
    CHECK(events.back()["label"] == "third");
    CHECK(events.back()["waited_ms"].get<long long>() >= 250);

    // A renewal is no event.
    REQUIRE(run_redsem({"renew", "h", token_b}, env).exit_code == 0);
    CHECK(new_events(server, "h", seen).empty());
    REQUIRE(run_redsem({"release", "h", token_b}, env).exit_code == 0);
    CHECK(new_events(server, "h", seen) == Events{{"released", token_b}});

    // A lease that runs out, found by its holder's next renewal: expired, then lost.
    const json e = acquire_json(server, {"h", "--ttl", "200ms", "--label", "short"});
    const std::string token_e = e["token"].get<std::string>();
    CHECK(new_events(server, "h", seen) == Events{{"acquired", token_e}});
    Connection observer = server.admin();
    const long long deadline = e["deadline_ms"].get<long long>();
    REQUIRE(wait_until([&] { return server_time_ms(observer) > deadline; }, 10s));
    CHECK(run_redsem({"renew", "h", token_e}, env).exit_code == 1);
    CHECK(new_events(server, "h", seen) == Events{{"expired", token_e}, {"lost", token_e}});
    events = history_events(server, "h");
    const json& expired = events[events.size() - 2];
    CHECK(expired["fence"] == e["fence"]);
    // From the grant to the deadline of the lease.
    CHECK(expired["held_ms"].get<long long>() >= 200);

    // A waiter that stops refreshing its place is dropped when a script next prunes.
    // (A lease long enough to outlast the steps below on a slow, sanitized build.)
    const json d = acquire_json(server, {"h", "--ttl", "4s", "--label", "fourth"});
    CHECK(new_events(server, "h", seen) == Events{{"acquired", d["token"]}});
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    const Keys keys = Keys::make("redsem", "h");
    const std::string dead = "00000000000000000000000000dead01";
    REQUIRE(reply_kind(acquire_by_script(
                client, keys, dead, 60s, false,
                {.liveness = 50ms,
                 .meta_json = R"({"host":"ghost","pid":4242,"user":"nobody","label":"dead"})"})) ==
            "wait");
    CHECK(new_events(server, "h", seen) == Events{{"queued", dead}});
    std::this_thread::sleep_for(100ms);
    CHECK(run_redsem({"acquire", "h", "-w", "0"}, env).exit_code == 75);
    // The busy try is on record too, naming the holder it found.
    const Events dropped = new_events(server, "h", seen);
    REQUIRE(dropped.size() == 2);
    CHECK(dropped[0] == std::pair<std::string, std::string>{"dropped", dead});
    CHECK(dropped[1].first == "skipped");
    const auto after_drop = history_events(server, "h");
    CHECK(after_drop[after_drop.size() - 2]["host"] == "ghost");
    CHECK(after_drop.back()["skipped"] == "busy");
    CHECK(after_drop.back()["by"][0]["token"] == d["token"]);

    // The limit changes while in use.
    REQUIRE(run_redsem({"limit", "h", "2"}, env).exit_code == 0);
    CHECK(new_events(server, "h", seen) == Events{{"limit", ""}});
    events = history_events(server, "h");
    CHECK(events.back()["from"] == 1);
    CHECK(events.back()["to"] == 2);

    // gc removes the expired holder; the history stays when the semaphore's keys go.
    // Past its deadline by the server's clock (this machine's).
    const long long deadline_ms = d["deadline_ms"];
    while (real_now_ns() / 1'000'000 <= deadline_ms + 50) {
        std::this_thread::sleep_for(10ms);
    }
    // (The operator's limit given up first, which logs nothing: it would keep the state.)
    REQUIRE(run_redsem({"limit", "h", "--unset"}, env).exit_code == 0);
    REQUIRE(run_redsem({"gc", "h"}, env).exit_code == 0);
    CHECK(new_events(server, "h", seen) == Events{{"gc", d["token"]}});
    CHECK(history_events(server, "h").back()["held_ms"].get<long long>() >= 4000);
    Connection admin = server.admin();
    CHECK(admin.call({"EXISTS", keys.state}).as_integer() == 0);
    CHECK(admin.call({"EXISTS", keys.log}).as_integer() == 1);
    // ... and still expires: it never outlives the semaphore by more than the keys would.
    CHECK(admin.call({"PTTL", keys.log}).as_integer() > 0);
}

TEST_CASE("history: the stream stays capped, expires with the semaphore, and is off at 0") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    Connection admin = server.admin();
    const Keys keys = Keys::make("redsem", "capped");

    // On a new name, the length alone: no limit is stored.
    const ProcessResult set = run_redsem({"limit", "capped", "--history", "5", "--json"}, env);
    REQUIRE(set.exit_code == 0);
    CHECK(json::parse(set.out)["stored"] == false);
    CHECK(json::parse(set.out)["history"] == 5);
    for (int i = 0; i < 10; ++i) {
        const std::string token = run_redsem({"acquire", "capped"}, env).out;
        REQUIRE(
            run_redsem({"release", "capped", token.substr(0, token.size() - 1)}, env).exit_code ==
            0);
    }
    CHECK(admin.call({"XLEN", keys.log}).as_integer() == 5);
    const auto events = history_events(server, "capped");
    REQUIRE(events.size() == 5);
    CHECK(events.back()["event"] == "released"); // the newest are kept
    // The same expiry as the semaphore's other keys (set together; a second apart at most),
    // but for the state that keeps the operator's setting: it has none.
    const long long log_ttl = admin.call({"PTTL", keys.log}).as_integer();
    const long long slots_ttl = admin.call({"PTTL", keys.slots}).as_integer();
    CHECK(log_ttl > 0);
    CHECK(std::abs(log_ttl - slots_ttl) < 1000);
    CHECK(admin.call({"PTTL", keys.state}).as_integer() == -1);
    // Shorter at once, down to none.
    REQUIRE(run_redsem({"limit", "capped", "--history", "2"}, env).exit_code == 0);
    CHECK(admin.call({"XLEN", keys.log}).as_integer() == 2);
    REQUIRE(run_redsem({"limit", "capped", "--history", "0"}, env).exit_code == 0);
    CHECK(admin.call({"XLEN", keys.log}).as_integer() == 0);
    CHECK(run_redsem({"log", "capped"}, env).err == "redsem: no events\n");

    // The default length: 10000 events, trimmed a block at a time.
    const auto limit = json::parse(run_redsem({"limit", "dflt", "--json"}, env).out);
    CHECK(limit["history"] == 10000);

    // Off: nothing is written, by any script.
    const Keys off = Keys::make("redsem", "off");
    REQUIRE(run_redsem({"limit", "off", "--history", "0"}, env).exit_code == 0);
    const std::string token = run_redsem({"acquire", "off", "--ttl", "300ms"}, env).out;
    REQUIRE(!token.empty());
    Child waiter({"acquire", "off", "-w", "200ms"}, env);
    waiter.wait();
    std::this_thread::sleep_for(400ms);
    run_redsem({"renew", "off", token.substr(0, token.size() - 1)}, env);
    REQUIRE(run_redsem({"limit", "off", "3"}, env).exit_code == 0);
    // No counters in the metrics either.
    const ProcessResult metrics = run_redsem({"status", "--format", "prometheus", "off"}, env);
    CHECK(metrics.out.find(R"(redsem_limit{prefix="redsem",name="off"} 3)") != std::string::npos);
    CHECK(metrics.out.find("redsem_acquired_total{") == std::string::npos);
    REQUIRE(run_redsem({"gc", "off"}, env).exit_code == 0);
    CHECK(admin.call({"EXISTS", off.log}).as_integer() == 0);
    const ProcessResult empty = run_redsem({"log", "off"}, env);
    CHECK(empty.exit_code == 0);
    CHECK(empty.out.empty());
    CHECK(empty.err == "redsem: no events\n");

    // The length is the semaphore's, set by an operator (limit --history): a caller has no
    // such option (0.1.0 had), and nothing is written when it tries one; $REDSEM_HISTORY
    // (which 0.1.0 stored with every semaphore it used) is ignored with a warning.
    const Keys kept = Keys::make("redsem", "kept");
    const ProcessResult refused = run_redsem({"acquire", "kept", "--history", "0"}, env);
    CHECK(refused.exit_code == 64);
    CHECK(refused.err.rfind("redsem: error: unknown option '--history'", 0) == 0);
    CHECK(admin.call({"EXISTS", kept.state}).as_integer() == 0);
    EnvChanges global = env;
    global["REDSEM_HISTORY"] = "0";
    const ProcessResult warned = run_redsem({"acquire", "kept"}, global);
    REQUIRE(warned.exit_code == 0);
    CHECK(warned.err.find("$REDSEM_HISTORY is ignored") != std::string::npos);
    CHECK(admin.call({"XLEN", kept.log}).as_integer() == 1);
    CHECK(json::parse(run_redsem({"limit", "kept", "--json"}, env).out)["history"] == 10000);
}

TEST_CASE("log --follow prints each event within 100 ms of it happening") {
    // A sanitized redsem reads and prints several times slower: there, the claim is looser.
#ifdef REDSEM_SANITIZED
    constexpr long long k_within_ms = 400;
#else
    constexpr long long k_within_ms = 100;
#endif
    RedisServer server;
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"limit", "f", "5"}, env).exit_code == 0);
    Child follower({"log", "f", "--json", "--follow"}, env);
    // The history first: the limit event.
    REQUIRE(follower.wait_for_line(10s));
    std::size_t lines = 1;
    for (int i = 0; i < 3; ++i) {
        // Let the follower block in XREAD again before the next event.
        std::this_thread::sleep_for(100ms);
        REQUIRE(run_redsem({"acquire", "f", "--label", "followed"}, env).exit_code == 0);
        const auto give_up = std::chrono::steady_clock::now() + 5s;
        while (line_count(follower.out_so_far()) <= lines) {
            REQUIRE(std::chrono::steady_clock::now() < give_up);
            std::this_thread::sleep_for(1ms);
        }
        const long long seen_ms = real_now_ns() / 1'000'000;
        ++lines;
        const auto events = json_lines(follower.out_so_far());
        REQUIRE(events.size() == lines);
        const json& event = events.back();
        CHECK(event["event"] == "acquired");
        CHECK(event["label"] == "followed");
        // The event's time is the server's (this machine's) clock when it happened.
        CHECK(seen_ms - event["time_ms"].get<long long>() <= k_within_ms);
    }
    follower.signal(SIGINT);
    CHECK(follower.wait().exit_code == 0);

    // Nobody reads any more (SIGPIPE is ignored): it ends at the next event, quietly.
    const auto piped = Child::shell(redsem_binary() + " log f -f | head -1", env);
    std::this_thread::sleep_for(300ms);
    for (int i = 0; i < 2; ++i) {
        REQUIRE(run_redsem({"acquire", "f"}, env).exit_code == 0);
    }
    const ProcessResult ended = piped->wait(10s);
    CHECK(ended.exit_code == 0);
    CHECK(ended.err.empty());
}

TEST_CASE("log: time windows, every semaphore merged by time, labels escaped in the table and "
          "exact in JSON") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    const std::string label = "evil\x1b[2J\x07label\ttab";
    REQUIRE(run_redsem({"acquire", "one", "--label", label}, env).exit_code == 0);
    std::this_thread::sleep_for(20ms);
    REQUIRE(run_redsem({"acquire", "two", "--label", "plain"}, env).exit_code == 0);
    std::this_thread::sleep_for(20ms);
    REQUIRE(run_redsem({"acquire", "one", "-n", "1", "-w", "0"}, env).exit_code == 75);
    std::this_thread::sleep_for(20ms);
    REQUIRE(run_redsem({"limit", "one", "2"}, env).exit_code == 0);

    const auto all = json_lines(run_redsem({"log", "--json"}, env).out);
    REQUIRE(all.size() == 6); // limit and acquired of each, one's busy try, and its new limit
    for (std::size_t i = 1; i < all.size(); ++i) {
        CHECK(all[i - 1]["time_ms"] <= all[i]["time_ms"]);
    }
    CHECK(all[1]["name"] == "one");
    CHECK(all[3]["name"] == "two");
    CHECK(all[1]["label"] == label);

    const ProcessResult table = run_redsem({"log"}, env);
    REQUIRE(table.exit_code == 0);
    CHECK(table.out.find('\x1b') == std::string::npos);
    CHECK(table.out.find('\x07') == std::string::npos);
    CHECK(table.out.find("evil\\x1b[2J\\x07label\\x09tab") != std::string::npos);
    CHECK(table.out.find("NAME") != std::string::npos);
    CHECK(table.out.find("limit 1 -> 2") != std::string::npos);

    // --since and --until, as points in time and as durations back from now.
    const long long second = all[3]["time_ms"];
    const std::string since = iso8601_utc(second);
    const auto later = json_lines(run_redsem({"log", "--json", "--since", since}, env).out);
    REQUIRE(!later.empty());
    CHECK(later.front()["time_ms"] == second);
    for (const json& event : later) {
        CHECK(event["time_ms"].get<long long>() >= second);
    }
    const auto earlier = json_lines(
        run_redsem({"log", "--json", "--until", "@" + std::to_string(second / 1000 - 100)}, env)
            .out);
    CHECK(earlier.empty());
    CHECK(json_lines(run_redsem({"log", "--json", "--since", "1h"}, env).out).size() == 6);
    CHECK(
        json_lines(run_redsem({"log", "one", "--json", "--since", "1d", "--until", "now"}, env).out)
            .size() == 4);
}

TEST_CASE("history: a foreign key in its place never breaks a semaphore in use, nor hides the "
          "other histories") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    Connection admin = server.admin();
    const Keys keys = Keys::make("redsem", "foreign");
    REQUIRE(run_redsem({"acquire", "foreign", "-n", "2"}, env).exit_code == 0);
    REQUIRE(run_redsem({"acquire", "other"}, env).exit_code == 0);
    admin.call({"DEL", keys.log});
    admin.call({"SET", keys.log, "not redsem's"});
    // Acquire, queue, release and expiry go on; the foreign key is left alone, without a TTL.
    const std::string token = run_redsem({"acquire", "foreign", "--ttl", "2d"}, env).out;
    REQUIRE(!token.empty());
    CHECK(run_redsem({"acquire", "foreign", "-w", "200ms"}, env).exit_code == 75);
    CHECK(run_redsem({"release", "foreign", token.substr(0, token.size() - 1)}, env).exit_code ==
          0);
    CHECK(admin.call({"GET", keys.log}).as_string() == "not redsem's");
    CHECK(admin.call({"PTTL", keys.log}).as_integer() == -1);
    // log: without NAME, a warning and the other histories; naming it, the error (65).
    const ProcessResult all = run_redsem({"log", "--json"}, env);
    CHECK(all.exit_code == 0);
    CHECK(all.err.find("redsem: warning: the history of 'foreign' cannot be read") == 0);
    const auto events = json_lines(all.out);
    REQUIRE(!events.empty());
    for (const json& event : events) {
        CHECK(event["name"] == "other");
    }
    // Named, alone or followed: one line that names the key and what it holds.
    const std::string named = "redsem: error: key 'redsem:{foreign}:log' of semaphore 'foreign' "
                              "holds a string, not the stream redsem keeps its history in; "
                              "delete the key, or choose another --prefix\n";
    const ProcessResult one = run_redsem({"log", "foreign"}, env);
    CHECK(one.exit_code == 65);
    CHECK(one.err == named);
    const ProcessResult followed = run_redsem({"log", "other", "foreign", "-f"}, env);
    CHECK(followed.exit_code == 65);
    CHECK(followed.err == named);
    // Before the epoch (1970-01-01 east of Greenwich) is the epoch.
    CHECK(
        json_lines(
            run_redsem({"log", "other", "--json", "--since", "1970-01-01T00:00:00+01:00"}, env).out)
            .size() == 2);
}

TEST_CASE("log, --history and status --format/--watch: bad input is a usage error") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    const std::vector<std::vector<std::string>> bad{
        {"log", "x", "--since", "yesterday"},
        {"log", "x", "--since", "2026-02-30"},
        {"log", "x", "--since", "2026-11-23 25:00"},
        {"log", "x", "--until", "@abc"},
        {"log", "x", "--since", "1h", "--until", "2h"},
        {"log", "x", "--follow", "--until", "now"},
        {"log", "bad{name"},
        {"acquire", "x", "--history", "-1"},
        {"acquire", "x", "--history", "lots"},
        {"limit", "x", "--history", "20000000"},
        {"status", "--format", "xml"},
        {"status", "--json", "--format", "prometheus"},
        {"status", "x", "--watch"}, // not a terminal
        {"status", "--watch", "--json"},
    };
    for (const auto& args : bad) {
        const ProcessResult result = run_redsem(args, env);
        INFO(args[0] << " " << args[args.size() - 1]);
        CHECK(result.exit_code == 64);
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(line_count(result.err) == 2); // the error, and where to find help
    }
    // A duration's own error says what is wrong with it.
    const ProcessResult too_long = run_redsem({"log", "x", "--since", "1000000d"}, env);
    CHECK(too_long.exit_code == 64);
    CHECK(too_long.err.find("longer than the maximum") != std::string::npos);
    // "--since 1 week": the shell made "week" a NAME; said, not read as 1 s and a semaphore.
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"log", "deploy", "--since", "1", "week"},
                                               {"log", "--until", "2", "Days", "deploy"}}) {
        const ProcessResult words = run_redsem(args, env);
        INFO(words.err);
        CHECK(words.exit_code == 64);
        CHECK(words.err.find("a duration is one word with its unit, as in 7d") !=
              std::string::npos);
    }
    // Nothing was written by any of them.
    Connection admin = server.admin();
    CHECK(admin.call({"EXISTS", Keys::make("redsem", "x").state}).as_integer() == 0);
}

TEST_CASE("status --format prometheus: the exposition format, escaped labels, the counters") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    const std::string name = R"(odd"name\x)";
    const std::string holder = run_redsem({"acquire", name, "-n", "2", "--ttl", "1s"}, env).out;
    REQUIRE(run_redsem({"acquire", name}, env).exit_code == 0);
    // A third client gets the slot once the first lease has run out (expired), queued or not
    // (however slow this machine is); the first holder's renewal then finds it lost.
    Child waiter({"acquire", name, "--label", "w"}, env);
    REQUIRE(waiter.wait().exit_code == 0);
    CHECK(run_redsem({"renew", name, holder.substr(0, holder.size() - 1)}, env).exit_code == 1);
    REQUIRE(run_redsem({"limit", "plain", "--history", "0"}, env).exit_code == 0);
    REQUIRE(run_redsem({"acquire", "plain"}, env).exit_code == 0);

    // A name given twice is one series.
    const ProcessResult twice =
        run_redsem({"status", "--format", "prometheus", "plain", "plain"}, env);
    CHECK(std::count(twice.out.begin(), twice.out.end(), '\n') ==
          2 * 20 + 13); // HELP and TYPE of 20, 13 gauges (no history: no last run)

    const ProcessResult result = run_redsem({"status", "--format", "prometheus"}, env);
    REQUIRE(result.exit_code == 0);
    const std::string& text = result.out;
    const std::string labels = R"({prefix="redsem",name="odd\"name\\x"})";
    CHECK(text.find("redsem_limit" + labels + " 2\n") != std::string::npos);
    CHECK(text.find("redsem_holders" + labels + " 2\n") != std::string::npos);
    CHECK(text.find("redsem_waiters" + labels + " 0\n") != std::string::npos);
    CHECK(text.find("redsem_acquired_total" + labels + " 3\n") != std::string::npos);
    CHECK(text.find("redsem_expired_total" + labels + " 1\n") != std::string::npos);
    // The first holder's renewal found nothing: a token it was given, which may never have
    // held a slot, is no lost lease (its expiry was counted).
    CHECK(text.find("redsem_lost_total" + labels + " 0\n") != std::string::npos);
    CHECK(text.find(R"(redsem_holders{prefix="redsem",name="plain"} 1)") != std::string::npos);
    CHECK(text.find(R"(redsem_acquired_total{prefix="redsem",name="plain"})") == std::string::npos);

    // The format's rules, checked line by line: each family's HELP and TYPE once, before its
    // samples; metric and label names as the format allows; values numbers.
    const std::regex help(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+)");
    const std::regex type(R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter))");
    const std::regex sample(
        R"re(([a-zA-Z_:][a-zA-Z0-9_:]*)\{([a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\[\\"n]|[^\\"\n])*")*)\} (-?[0-9.e+]+|NaN|[+-]Inf))re");
    std::istringstream in(text);
    std::set<std::string> families;
    std::string family;
    std::string family_type;
    for (std::string line; std::getline(in, line);) {
        std::smatch match;
        INFO(line);
        if (std::regex_match(line, match, help)) {
            family = match[1];
            CHECK(families.insert(family).second);
        } else if (std::regex_match(line, match, type)) {
            CHECK(match[1] == family);
            family_type = match[2];
        } else {
            REQUIRE(std::regex_match(line, match, sample));
            CHECK(match[1] == family);
            CHECK((family_type != "counter" || family.ends_with("_total")));
        }
    }
    CHECK(families.size() == 20);
    CHECK(text.find("redsem_paused" + labels + " 0\n") != std::string::npos);

    // promtool (Debian's prometheus package) agrees.
    const auto promtool = find_program("promtool");
    if (!promtool) {
        REDSEM_SKIP("promtool (Debian package prometheus)");
    }
    const std::string path =
        (std::filesystem::temp_directory_path() / ("redsem-metrics-" + std::to_string(getpid())))
            .string();
    std::ofstream(path) << text;
    const ProcessResult checked =
        Child::shell("'" + *promtool + "' check metrics < '" + path + "'")->wait();
    std::filesystem::remove(path);
    INFO(checked.out << checked.err);
    CHECK(checked.exit_code == 0);
}

namespace {

// A terminal for a real process: a tmux server of its own (its socket in a temporary
// directory), one window of `columns`x40.
class Tmux {
public:
    explicit Tmux(const std::string& command, int columns = 160)
        : m_socket((std::filesystem::temp_directory_path() /
                    ("redsem-tmux-" + std::to_string(getpid()) + "-" + std::to_string(++s_count)))
                       .string()) {
        run("new-session -d -x " + std::to_string(columns) + " -y 40 '" + command + "'");
        run("set-option -g remain-on-exit on");
    }
    ~Tmux() {
        Child::shell("tmux -S '" + m_socket + "' kill-server")->wait();
        std::filesystem::remove(m_socket);
    }
    Tmux(const Tmux&) = delete;
    Tmux& operator=(const Tmux&) = delete;

    ProcessResult run(const std::string& arguments) const {
        return Child::shell("tmux -S '" + m_socket + "' " + arguments)->wait();
    }
    std::string screen() const { return run("capture-pane -p").out; }
    // Waits (up to 10s) until the screen shows `text`; returns the screen.
    std::string await(const std::string& text) const {
        const auto give_up = std::chrono::steady_clock::now() + 10s;
        std::string shown = screen();
        while (shown.find(text) == std::string::npos &&
               std::chrono::steady_clock::now() < give_up) {
            std::this_thread::sleep_for(20ms);
            shown = screen();
        }
        return shown;
    }

private:
    static inline int s_count = 0;
    std::string m_socket;
};

} // namespace

TEST_CASE("status --watch redraws on a real terminal as slots change, and q restores it") {
    if (!find_program("tmux")) {
        REDSEM_SKIP("tmux");
    }
    RedisServer server;
    const EnvChanges env = env_for(server);
    REQUIRE(
        run_redsem({"acquire", "watched", "-n", "2", "--label", "first-holder"}, env).exit_code ==
        0);
    const std::string binary = redsem_binary();
    const std::string done =
        std::filesystem::temp_directory_path() / ("redsem-watch-done-" + std::to_string(getpid()));
    std::filesystem::remove(done);
    Tmux terminal("stty -a > " + done + ".before; REDSEM_URL=" + server.socket_url() + " " +
                  binary + " status watched --watch; echo exit=$? > " + done + ".exit; stty -a > " +
                  done + ".after; mv " + done + ".after " + done);

    std::string screen = terminal.await("first-holder");
    CHECK(screen.find("watched: 1/2 held, 0 waiting") != std::string::npos);
    CHECK(screen.find("q quits") != std::string::npos);

    // A new holder shows at once (an event from the history), with its lease counting down.
    // "At once" is timed from the grant (the server's clock, the machine's real one) to the
    // moment the terminal receives the frame (the pane's output copied to a file as it comes,
    // read here; no process start or screen capture in between).
    const std::string transcript = done + ".out";
    terminal.run("pipe-pane -o 'cat >> " + transcript + "'");
    const auto second =
        acquire_json(server, {"watched", "--ttl", "1h", "--label", "second-holder"});
    const long long granted_ms =
        second["deadline_ms"].get<long long>() - second["ttl_ms"].get<long long>();
    long long shown_ms = 0;
    wait_until(
        [&] {
            shown_ms = real_now_ns() / 1'000'000;
            return read_file(transcript).find("second-holder") != std::string::npos;
        },
        10s);
    CHECK(shown_ms - granted_ms < 900); // before the 1s redraw
    screen = terminal.await("second-holder");
    CHECK(screen.find("watched: 2/2 held") != std::string::npos);
    CHECK(std::regex_search(screen, std::regex("in (1h|59m)")));

    // q leaves, restoring the screen and the terminal's modes.
    terminal.run("send-keys q");
    REQUIRE(wait_for_file(done, 10s));
    CHECK(read_file(done + ".exit") == "exit=0\n");
    CHECK(read_file(done) == read_file(done + ".before"));
    screen = terminal.screen();
    CHECK(screen.find("second-holder") == std::string::npos); // the main screen is back
    for (const std::string suffix : {"", ".exit", ".before", ".out"}) {
        std::filesystem::remove(done + suffix);
    }
}

TEST_CASE("status at 70 columns leaves out FENCE and then RENEWED before it cuts LABEL") {
    if (!find_program("tmux")) {
        REDSEM_SKIP("tmux");
    }
    RedisServer server;
    // A holder whose every cell but HELD has a known width: EXPIRES is "in 50m30s" or
    // "in 50m29s" however slow the machine, and HELD is 3 to 5 columns ("7ms" to "519ms", or
    // "1.2s"). With FENCE and RENEWED left out, its line (54 or 55 columns and the 14 of the
    // label) fits in 70; with RENEWED kept (9 more), the label would be cut.
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    REQUIRE(reply_kind(acquire_by_script(
                client, Keys::make("redsem", "narrow"), std::string(32, 'a'), 50min + 30s, false,
                {.meta_json =
                     R"({"host":"build-7","pid":4242,"user":"ci","label":"nightly-backup"})"})) ==
            "ok");
    const std::string done =
        std::filesystem::temp_directory_path() / ("redsem-narrow-done-" + std::to_string(getpid()));
    std::filesystem::remove(done);
    Tmux terminal("REDSEM_URL=" + server.socket_url() + " " + redsem_binary() +
                      " status narrow; touch " + done + "; exec sleep 60",
                  70);
    REQUIRE(wait_for_file(done, 10s));
    // (The shell sleeps on: a pane whose command ended before remain-on-exit was set is gone.)
    const std::string screen = terminal.await("EXPIRES");
    INFO(screen);
    CHECK(screen.find("SLOT  TOKEN") != std::string::npos);
    CHECK(screen.find("EXPIRES") != std::string::npos);
    CHECK(screen.find("FENCE") == std::string::npos);
    CHECK(screen.find("RENEWED") == std::string::npos);
    CHECK(screen.find("  nightly-backup\n") != std::string::npos); // whole
    std::filesystem::remove(done);
}

TEST_CASE("waiting at 70 columns, the line shows the place, the count and the holder, and "
          "Ctrl-C clears it") {
    if (!find_program("tmux")) {
        REDSEM_SKIP("tmux");
    }
    RedisServer server;
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    REQUIRE(reply_kind(acquire_by_script(
                client, Keys::make("redsem", "deploy-nightly-db"), std::string(32, 'b'), 1h, false,
                {.meta_json = R"({"host":"build-7","pid":4242,"user":"ci","label":""})"})) == "ok");
    const std::string done = std::filesystem::temp_directory_path() /
                             ("redsem-waitline-done-" + std::to_string(getpid()));
    std::filesystem::remove(done);
    Tmux terminal("REDSEM_URL=" + server.socket_url() + " " + redsem_binary() +
                      " acquire deploy-nightly-db; echo exit=$? > " + done,
                  70);
    std::string screen = terminal.await("queued");
    INFO(screen);
    // Before: "redsem: waiting for 'deploy-nightly-db': number 1 of 1 in the queu...".
    CHECK(screen.find("redsem: waiting: 1 of 1 queued, 1/1 held by build-7 (pid 4242") !=
          std::string::npos);
    std::istringstream lines(screen);
    for (std::string line; std::getline(lines, line);) {
        CHECK(display_width(line) <= 67); // room for the terminal's "^C"
    }
    terminal.run("send-keys C-c");
    REQUIRE(wait_for_file(done, 10s));
    CHECK(read_file(done) == "exit=130\n");
    // (Only the end of redsem's own line is sure to show: the terminal discards the output it
    // holds when Ctrl-C is typed, and redsem may have written its line by then.)
    screen = terminal.await("nothing is held");
    INFO(screen);
    CHECK(screen.find("nothing is held") != std::string::npos);
    CHECK(screen.find("redsem: waiting") == std::string::npos); // the line in place is gone
    std::filesystem::remove(done);
}

TEST_CASE("lost: a renew of a token that holds nothing logs nothing, a run whose slot was taken "
          "logs it") {
    RedisServer server;
    const auto env = env_for(server);
    std::size_t seen = 0;
    const json held = acquire_json(server, {"gone", "--ttl", "10m"});
    CHECK(new_events(server, "gone", seen).back() ==
          std::pair<std::string, std::string>{"acquired", held["token"]});
    CHECK(run_redsem({"renew", "gone", std::string(32, 'a')}, env).exit_code == 1);
    CHECK(new_events(server, "gone", seen).empty());
    Connection admin = server.admin();
    CHECK(admin.call({"HGET", "redsem:{gone}:state", "lost_total"}).is_nil());
    REQUIRE(run_redsem({"release", "gone", held["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(new_events(server, "gone", seen) == Events{{"released", held["token"]}});

    // A run's heartbeat renews a lease it was granted: when it is gone, that is a loss.
    Scratch scratch;
    const std::string token_file = scratch.path("token");
    Child holder({"run", "gone", "--ttl", "1s", "--", "sh", "-c",
                  "echo $REDSEM_TOKEN > " + token_file + "; exec sleep 30"},
                 env);
    REQUIRE(wait_until([&] { return line_count(read_file(token_file)) == 1; }, 20s));
    const std::string token = first_line(read_file(token_file));
    REQUIRE(run_redsem({"release", "gone", token}, env).exit_code == 0);
    CHECK(holder.wait(30s).exit_code == 76);
    CHECK(new_events(server, "gone", seen) ==
          Events{{"acquired", token}, {"released", token}, {"lost", token}});
    CHECK(admin.call({"HGET", "redsem:{gone}:state", "lost_total"}).as_string() == "1");
}

TEST_CASE("history: a grant nobody collected before its short lease ran out is unclaimed, not "
          "expired") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    std::size_t seen = 0;
    const json held = acquire_json(server, {"u", "--ttl", "10m"});
    const std::string token_a = held["token"];
    // A waiter that never collects what it is handed (a process stopped, say), with a lease
    // (300ms) shorter than the time a hand-over waits to be collected (3s). It says it
    // collects, as this release's waiters do: that, not the wake list (gone after 3s), tells
    // the next call it was never collected, however late that call comes on a loaded machine.
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    const Keys keys = Keys::make("redsem", "u");
    const std::string stopped = "00000000000000000000000000570p01";
    REQUIRE(
        reply_kind(acquire_by_script(
            client, keys, stopped, 300ms, false,
            {.meta_json =
                 R"({"host":"asleep","pid":4242,"user":"nobody","label":"stopped","collects":true})"})) ==
        "wait");
    new_events(server, "u", seen);
    REQUIRE(run_redsem({"release", "u", token_a}, env).exit_code == 0);
    CHECK(new_events(server, "u", seen) == Events{{"released", token_a}, {"acquired", stopped}});
    const long long lease_end =
        history_events(server, "u").back()["time_ms"].get<long long>() + 300;
    Connection observer = server.admin();
    REQUIRE(wait_until([&] { return server_time_ms(observer) > lease_end; }, 10s));
    const json next = acquire_json(server, {"u", "-w", "0"});
    // Never held, so no "held" time: the waiter never had the slot.
    CHECK(new_events(server, "u", seen) ==
          Events{{"unclaimed", stopped}, {"acquired", next["token"]}});
    const json unclaimed = history_events(server, "u").at(history_events(server, "u").size() - 2);
    CHECK_FALSE(unclaimed.contains("held_ms"));
    CHECK(unclaimed["duration_ms"].is_null());
    CHECK(unclaimed["label"] == "stopped");
}

TEST_CASE("log --follow rides out a Redis restart and goes on after the last event it printed") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"limit", "r", "5"}, env).exit_code == 0);
    Child follower({"log", "r", "--json", "--follow"}, env);
    REQUIRE(follower.wait_for_line(10s));
    server.restart(300ms); // without persistence: the history is gone too
    // After the restart (its own loss grace 0: a fresh server admits nobody for a minute).
    REQUIRE(run_redsem({"acquire", "r", "--label", "after", "--loss-grace", "0"}, env).exit_code ==
            0);
    const auto followed_on = [&] {
        for (const json& event : json_lines(follower.out_so_far())) {
            if (event["event"] == "acquired" && event["label"] == "after") {
                return true;
            }
        }
        return false;
    };
    REQUIRE(wait_until(followed_on, 30s));
    CHECK_FALSE(follower.finished());
    follower.signal(SIGINT);
    const ProcessResult result = follower.wait();
    CHECK(result.exit_code == 0);
    CHECK(result.err.find("; trying again every 1s\n") != std::string::npos);
    CHECK(
        result.err.find("redsem: Redis answers again; following on from the last event shown\n") !=
        std::string::npos);
    // The event from before the restart was printed once, not again.
    INFO(result.out);
    const auto events = json_lines(result.out);
    CHECK(std::count_if(events.begin(), events.end(), [](const json& event) {
              return event["event"] == "limit" && event["to"] == 5;
          }) == 1);
}

TEST_CASE("log says how a run ended: a released event carries its command's exit status, an "
          "exit 143 is no SIGTERM, and TIME names its zone") {
    RedisServer server;
    EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"run", "ended", "--", "sh", "-c", "exit 3"}, env).exit_code == 3);
    REQUIRE(run_redsem({"run", "ended", "-c", "kill -TERM $$"}, env).exit_code == 143);
    // A script that traps TERM, cleans up and exits 143 (before issue 52: "killed by SIGTERM").
    REQUIRE(
        run_redsem({"run", "ended", "-c", "trap 'exit 143' TERM; kill -TERM $$"}, env).exit_code ==
        143);
    const auto held = acquire_json(server, {"ended"});
    REQUIRE(run_redsem({"release", "ended", held["token"].get<std::string>()}, env).exit_code == 0);
    const auto log = run_redsem({"log", "ended", "--json"}, env);
    REQUIRE(log.exit_code == 0);
    std::vector<nlohmann::json> released;
    std::istringstream lines(log.out);
    for (std::string line; std::getline(lines, line);) {
        const auto event = nlohmann::json::parse(line);
        if (event["event"] == "released") {
            released.push_back(event);
        } else {
            CHECK_FALSE(event.contains("exit_status"));
        }
    }
    REQUIRE(released.size() == 4);
    CHECK(released[0]["exit_status"] == 3);
    CHECK(released[0]["signal"] == 0);
    CHECK(released[1]["exit_status"] == 143);
    CHECK(released[1]["signal"] == 15);
    CHECK(released[2]["exit_status"] == 143);
    CHECK(released[2]["signal"] == 0);
    CHECK(released[3]["exit_status"].is_null());
    CHECK(released[3]["signal"].is_null());
    CHECK(released[3]["label"] == "");

    env["TZ"] = "Europe/Paris";
    const auto table = run_redsem({"log", "ended"}, env);
    INFO(table.out);
    CHECK(table.out.rfind("TIME (CE", 0) == 0); // CET or CEST
    CHECK(table.out.find("command exited 3") != std::string::npos);
    CHECK(table.out.find("command killed by SIGTERM (143)") != std::string::npos);
    CHECK(table.out.find("command exited 143") != std::string::npos);
    CHECK(table.out.find(" \n") == std::string::npos); // no line ends with spaces
}

TEST_CASE("every kind of event the scripts write on a real server is one the reader knows") {
    // Each kind of k_event_kinds, made by the scripts themselves; then the stream as stored:
    // an event of a kind the reader does not know, or in a shape it cannot read, fails here,
    // and so does a kind of the list that no script wrote any more.
    RedisServer server;
    const EnvChanges env = env_for(server);
    Connection admin = server.admin();
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    const Keys keys = Keys::make("redsem", "all");
    // A call of acquire.lua by hand (under the limit of 2): its kind of reply.
    const auto acquire = [&](const std::string& token, Milliseconds ttl,
                             wire::AcquireArgs args = {}) {
        args.limit = 2;
        return reply_kind(acquire_by_script(client, keys, token, ttl, false, args));
    };
    const auto past = [&](long long ms) {
        const long long until = server_time_ms(admin) + ms;
        REQUIRE(wait_until([&] { return server_time_ms(admin) > until; }, 10s));
    };
    REQUIRE(run_redsem({"limit", "all", "2"}, env).exit_code == 0);                  // limit
    const std::string held = acquire_json(server, {"all", "--ttl", "10m"})["token"]; // acquired
    const std::string brief = "00000000000000000000000000e1f001";
    REQUIRE(acquire(brief, 300ms) == "ok");
    CHECK(run_redsem({"acquire", "all", "-w", "0"}, env).exit_code == 75); // skipped
    // Two waiters (queued): one that never refreshes its place, and one that never collects
    // what it is handed, with a short lease. Once the first's liveness and the brief lease ran
    // out, the next call drops the first (dropped), ends the lease (expired) and hands its slot
    // to the second, and itself waits in vain (left).
    const std::string idle = "00000000000000000000000000e1f002";
    const std::string asleep = "00000000000000000000000000e1f003";
    REQUIRE(acquire(idle, 60'000ms, {.liveness = Milliseconds{100}}) == "wait");
    // The hand-over's lease is long enough that the waiter gives up before it runs out, however
    // slowly it runs (under TSan it did not when the lease was 300 ms).
    REQUIRE(acquire(asleep, 5'000ms, {.collects = true}) == "wait");
    past(300);
    CHECK(run_redsem({"acquire", "all", "-w", "200ms"}, env).exit_code == 75); // left
    past(5'000); // the hand-over's lease ran out: the next call finds it unclaimed
    // The renewal of a lease that ran out: lost.
    const Reply renewed =
        client.eval({scripts::k_renew_script, keys.script_keys(),
                     keys.script_args(wire::renew_args(brief, std::nullopt, false, false))});
    CHECK(reply_kind(renewed) == "lost");
    REQUIRE(run_redsem({"release", "all", held}, env).exit_code == 0); // released
    // A holder whose lease ran out, removed by gc.
    REQUIRE(acquire("00000000000000000000000000e1f004", 100ms) == "ok");
    past(150);
    CHECK(run_redsem({"gc"}, env).exit_code == 0);              // gc
    REQUIRE(run_redsem({"pause", "all"}, env).exit_code == 0);  // paused
    REQUIRE(run_redsem({"resume", "all"}, env).exit_code == 0); // resumed
    REQUIRE(run_redsem({"lost"}, env).exit_code == 0);
    run_redsem({"acquire", "all", "-w", "0", "--loss-grace", "1m"}, env); // closed

    std::set<std::string> written;
    const Reply entries = admin.call({"XRANGE", "redsem:{all}:log", "-", "+"});
    for (const Reply& entry : entries.as_array()) {
        const auto& fields = entry.at(1).as_array();
        for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
            const std::string& kind = fields[i].as_string();
            const std::string& value = fields[i + 1].as_string();
            INFO(kind << " " << value);
            CHECK(std::find(std::begin(k_event_kinds), std::end(k_event_kinds), kind) !=
                  std::end(k_event_kinds));
            CHECK(parse_event("all", entry.at(0).as_string(), kind, value).raw.empty());
            written.insert(kind);
        }
    }
    for (const std::string_view kind : k_event_kinds) {
        INFO("no script wrote " << kind);
        CHECK(written.contains(std::string(kind)));
    }
}

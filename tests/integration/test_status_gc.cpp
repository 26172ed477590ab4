// `redsem status` and `redsem gc` against a private redis-server.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "semaphore/keys.hpp"
#include "support/helpers.hpp"
#include "util/duration.hpp"
#include "util/token.hpp"

#include <algorithm>
#include <csignal>
#include <fmt/format.h>
#include <map>
#include <sstream>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

// Every key with its DUMP and its TTL: compared before and after a command that must change
// nothing.
std::map<std::string, std::pair<std::string, long long>> snapshot(Connection& admin) {
    std::map<std::string, std::pair<std::string, long long>> keys;
    const Reply names = admin.call({"KEYS", "*"});
    for (const Reply& key : names.as_array()) {
        const std::string& name = key.as_string();
        const Reply dump = admin.call({"DUMP", name});
        const long long ttl_ms = admin.call({"PTTL", name}).as_integer();
        // A TTL ticks down while we look; seconds are stable enough to catch a change.
        keys[name] = {dump.is_nil() ? "" : dump.text, ttl_ms / 10'000};
    }
    return keys;
}

// Queues a waiter directly through the acquire script with a short liveness, as a waiter
// that died would leave itself.
void add_dead_waiter(const RedisServer& server, const std::string& name, const std::string& token,
                     long long limit) {
    Connection connection(ConnectOptions{parse_redis_url(server.socket_url())});
    const Keys keys = Keys::make("redsem", name);
    const Reply reply = acquire_by_script(
        connection, keys, token, 60s, false,
        {.limit = limit,
         .liveness = 50ms,
         .meta_json = R"({"host":"ghost","pid":4242,"user":"nobody","label":"dead waiter"})"});
    REQUIRE(reply_kind(reply) == "wait");
}

} // namespace

TEST_CASE("status of an unknown semaphore says it is empty, in text and JSON") {
    RedisServer server;
    const auto text = run_redsem({"status", "ghost"}, env_for(server));
    CHECK(text.exit_code == 0);
    CHECK(text.out == "ghost: no holders and no waiters\n");
    const auto data = run_redsem({"status", "ghost", "--json"}, env_for(server));
    REQUIRE(data.exit_code == 0);
    const json status = json::parse(data.out);
    CHECK(status["name"] == "ghost");
    CHECK(status["limit"].is_null());
    CHECK(status["held"] == 0);
    CHECK(status["waiting"] == 0);
    CHECK(status["holders"].empty());
    CHECK(status["waiters"].empty());
    CHECK(run_redsem({"status", "bad{name"}, env_for(server)).exit_code == 64);
}

TEST_CASE("status shows holders by slot and waiters in queue order, field by field") {
    RedisServer server;
    Connection admin = server.admin();
    const auto first = acquire_json(server, {"st", "-n", "2", "--label", "first job"});
    const auto second =
        acquire_json(server, {"st", "-n", "2", "--ttl", "10m", "--label", "second"});
    Child waiter_a({"acquire", "st", "-n", "2", "--label", "waiter a"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{st}:queue") >= 1; }, 10s));
    Child waiter_b({"acquire", "st", "-n", "2", "--label", "waiter b"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{st}:queue") >= 2; }, 10s));

    const auto data = run_redsem({"status", "st", "--json"}, env_for(server));
    REQUIRE(data.exit_code == 0);
    const json status = json::parse(data.out);
    CHECK(status["limit"] == 2);
    CHECK(status["held"] == 2);
    CHECK(status["waiting"] == 2);
    REQUIRE(status["holders"].size() == 2);
    const json& h0 = status["holders"][0];
    CHECK(h0["slot"] == 0);
    CHECK(h0["token"] == first["token"]);
    CHECK(h0["fence"] == first["fence"]);
    CHECK(h0["label"] == "first job");
    CHECK(h0["pid"].get<long long>() > 0);
    CHECK(h0["host"].get<std::string>().size() > 0);
    CHECK(h0["user"].get<std::string>().size() > 0);
    CHECK(h0["ttl_ms"] == 60000);
    CHECK(h0["expired"] == false);
    CHECK(h0["deadline_ms"] == first["deadline_ms"]);
    CHECK(h0["deadline"] == first["deadline"]);
    CHECK(h0["expires_in_ms"].get<long long>() > 50'000);
    CHECK(h0["held_for_ms"].get<long long>() >= 0);
    CHECK(h0["acquired_ms"].get<long long>() + 60000 == h0["deadline_ms"].get<long long>());
    CHECK(h0["renewed_ms"] == h0["acquired_ms"]);
    CHECK(status["holders"][1]["slot"] == 1);
    CHECK(status["holders"][1]["label"] == "second");
    CHECK(status["holders"][1]["ttl_ms"] == 600000);
    REQUIRE(status["waiters"].size() == 2);
    CHECK(status["waiters"][0]["position"] == 1); // 1 is next, as the text shows it
    CHECK(status["waiters"][0]["stale"] == false);
    CHECK(status["waiters"][0]["label"] == "waiter a");
    // The waiter's pid is its caller's (this test); the waiters are told apart by label.
    CHECK(status["waiters"][0]["pid"] == getpid());
    CHECK(status["waiters"][0]["pid_of"] == "caller");
    CHECK(status["waiters"][1]["position"] == 2);
    CHECK(status["waiters"][1]["label"] == "waiter b");
    CHECK(status["waiters"][1]["waited_ms"].get<long long>() >= 0);

    // The table: a header, one row per holder (whole token shortened), the waiters after.
    const auto text = run_redsem({"status", "st"}, env_for(server));
    const auto lines = lines_of(text.out);
    REQUIRE(lines.size() == 8);
    CHECK(lines[0] == "st: 2/2 held, 2 waiting");
    CHECK(lines[1].rfind("SLOT  TOKEN     HOST", 0) == 0);
    for (const char* column : {"PID", "USER", "HELD", "RENEWED", "EXPIRES", "FENCE", "LABEL"}) {
        CHECK(lines[1].find(column) != std::string::npos);
    }
    CHECK(lines[2].rfind("0     " + first["token"].get<std::string>().substr(0, 8), 0) == 0);
    CHECK(lines[2].find("first job") != std::string::npos);
    CHECK(lines[2].find(std::to_string(first["fence"].get<long long>())) != std::string::npos);
    CHECK(lines[3].find("second") != std::string::npos);
    // 10m from the acquire, a moment ago (a sanitized build may take over a second to get here).
    CHECK((lines[3].find("in 10m") != std::string::npos ||
           lines[3].find("in 9m5") != std::string::npos));
    CHECK(lines[4] == "wait: no estimate yet (no holds in the history)");
    CHECK(lines[5].rfind("QUEUED", 0) == 0);
    CHECK(lines[6].find("waiter a") != std::string::npos);
    CHECK(lines[7].find("waiter b") != std::string::npos);
    // Not a terminal: long labels are printed whole.
    const std::string long_label(300, 'L');
    acquire_json(server, {"long", "--label", long_label});
    CHECK(run_redsem({"status", "long"}, env_for(server)).out.find(long_label) !=
          std::string::npos);
}

namespace {

// Acquires and releases `name` `times` times, each hold `hold` long or more.
void hold_and_release(const RedisServer& server, const std::string& name, int times,
                      std::chrono::milliseconds hold) {
    for (int i = 0; i < times; ++i) {
        const json lease = acquire_json(server, {name});
        std::this_thread::sleep_for(hold); // the hold itself, whose length is the history's
        REQUIRE(run_redsem({"release", name, lease["token"].get<std::string>()}, env_for(server))
                    .exit_code == 0);
    }
}

json status_of(const RedisServer& server, const std::string& name) {
    return json::parse(run_redsem({"status", name, "--json"}, env_for(server)).out);
}

// The median of the held times `redsem log --json` reports for `name` (the upper middle).
long long logged_median_hold(const RedisServer& server, const std::string& name) {
    std::vector<long long> held;
    for (const json& event : history_events(server, name)) {
        if (event.value("event", "") == "released") {
            held.push_back(event["held_ms"].get<long long>());
        }
    }
    REQUIRE(held.size() >= 3);
    std::sort(held.begin(), held.end());
    return held[held.size() / 2];
}

} // namespace

TEST_CASE("a waiter's estimate comes from the median of the last holds, in status, its JSON and "
          "the waiting line") {
    RedisServer server;
    const auto env = env_for(server);
    hold_and_release(server, "est", 3, 300ms);
    const long long median = logged_median_hold(server, "est");
    CHECK(median >= 300);
    const json holder = acquire_json(server, {"est", "--label", "now"});
    auto waiter = Child::shell("exec '" + redsem_binary() + "' acquire est -w 60s 2>&1", env);
    REQUIRE(wait_until([&] { return status_of(server, "est")["waiting"] == 1; }, 20s));

    // The JSON: what the estimate is drawn from, the same median as the history's, and the
    // waiter's estimate: the holder's median hold from its grant, no more.
    const json status = status_of(server, "est");
    CHECK(status["wait_estimate"]["holds"] == 3);
    CHECK(status["wait_estimate"]["median_hold_ms"] == median);
    const long long estimate = status["waiters"][0]["estimate_ms"].get<long long>();
    CHECK(estimate >= 0);
    CHECK(estimate <= median);

    // The table: the line it is drawn from, and each waiter's EXPECTED.
    const std::string text = run_redsem({"status", "est"}, env).out;
    INFO(text);
    CHECK(text.find("wait: estimated from the median hold, ") != std::string::npos);
    CHECK(text.find(" over the last 3\n") != std::string::npos);
    CHECK(text.find("EXPECTED") != std::string::npos);

    // The line off a terminal, written when queued.
    const std::optional<std::string> told = waiter->wait_for_line(20s);
    REQUIRE(told);
    INFO(*told);
    // "about 1s", or "less than a second" from a median hold under a second.
    CHECK(told->find("number 1 of 1 in the queue, 1/1 held, ") != std::string::npos);
    CHECK(told->find(fmt::format(" (median hold {} over the last 3); held by ",
                                 format_duration(Milliseconds{median}))) != std::string::npos);
    // On a terminal (script(1)), the line rewritten in place says it too, as number 2 of 2.
    const std::string out = server.dir() + "/tty";
    const std::string line = "script -qfec \"" + redsem_binary() + " --url " + server.socket_url() +
                             " acquire est -w 2500ms\" /dev/null > " + out;
    std::system(line.c_str());
    const std::string shown = read_file(out);
    INFO(shown);
    CHECK(shown.find("number 2 of 2 in the queue, 1/1 held, ") != std::string::npos);
    CHECK(shown.find(" over the last 3); held by ") != std::string::npos);

    REQUIRE(run_redsem({"release", "est", holder["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(waiter->wait(20s).exit_code == 0);
}

TEST_CASE("with fewer than 3 holds in the history, status says there is no estimate yet") {
    RedisServer server;
    const auto env = env_for(server);
    hold_and_release(server, "few", 2, 0ms);
    acquire_json(server, {"few"});
    Child waiter({"acquire", "few", "-w", "60s"}, env);
    REQUIRE(wait_until([&] { return status_of(server, "few")["waiting"] == 1; }, 20s));
    const json status = status_of(server, "few");
    CHECK(status["wait_estimate"]["holds"] == 2);
    CHECK(status["wait_estimate"]["median_hold_ms"].is_null());
    CHECK(status["waiters"][0]["estimate_ms"].is_null());
    const std::string text = run_redsem({"status", "few"}, env).out;
    CHECK(text.find("wait: no estimate yet (2 holds in the history)\n") != std::string::npos);
    CHECK(text.find("EXPECTED") == std::string::npos);
    // Nobody waits: nothing to estimate.
    CHECK(status_of(server, "idle")["wait_estimate"].is_null());
}

TEST_CASE("a history key of another type: status names it (65), and a wait goes on without "
          "an estimate") {
    RedisServer server;
    const auto env = env_for(server);
    const json holder = acquire_json(server, {"odd"});
    Connection admin = server.admin();
    admin.call({"DEL", semaphore_key("odd", "log")});
    admin.call({"SET", semaphore_key("odd", "log"), "foo"});
    auto waiter = Child::shell("exec '" + redsem_binary() + "' acquire odd -w 60s 2>&1", env);
    const std::optional<std::string> told = waiter->wait_for_line(20s);
    REQUIRE(told);
    CHECK(told->find("number 1 of 1 in the queue, 1/1 held; held by ") != std::string::npos);
    const auto status = run_redsem({"status", "odd"}, env);
    INFO(status.out << status.err);
    CHECK(status.exit_code == 65);
    CHECK(status.err.find("holds a string") != std::string::npos);
    REQUIRE(run_redsem({"release", "odd", holder["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(waiter->wait(20s).exit_code == 0);
}

TEST_CASE("status shows the last run and the last success as the history has them") {
    RedisServer server;
    const auto env = env_for(server);
    REQUIRE(run_redsem({"run", "nightly", "--label", "backup", "--", "true"}, env).exit_code == 0);
    REQUIRE(run_redsem({"run", "nightly", "--", "sh", "-c", "exit 3"}, env).exit_code == 3);
    // A plain acquire and release is no run: it records no exit status.
    const json lease = acquire_json(server, {"nightly"});
    REQUIRE(run_redsem({"release", "nightly", lease["token"].get<std::string>()}, env).exit_code ==
            0);

    // The observer: the released events of `log --json` that have an exit status.
    std::vector<json> runs;
    for (const json& event : history_events(server, "nightly")) {
        if (event.value("event", "") == "released" && event.contains("exit_status") &&
            !event["exit_status"].is_null()) {
            runs.push_back(event);
        }
    }
    REQUIRE(runs.size() == 2);
    const json status = status_of(server, "nightly");
    INFO(status.dump());
    CHECK(status["last_run"]["exit_status"] == 3);
    CHECK(status["last_run"]["time_ms"] == runs[1]["time_ms"]);
    CHECK(status["last_success"]["exit_status"] == 0);
    CHECK(status["last_success"]["label"] == "backup");
    CHECK(status["last_success"]["time_ms"] == runs[0]["time_ms"]);
    CHECK(status["last_success"]["held_ms"].get<long long>() >= 0);
    CHECK(status_of(server, "never")["last_run"].is_null());

    const std::string text = run_redsem({"status", "nightly"}, env).out;
    INFO(text);
    CHECK(text.find("\nlast run: ") != std::string::npos);
    CHECK(text.find(", exit 3 after ") != std::string::npos);
    CHECK(text.find("; last success: ") != std::string::npos);
    CHECK(text.find("('backup')") != std::string::npos);

    // The Prometheus text has them as gauges, from the same events: times in seconds by the
    // server's clock; "never" (no run in its history) has no sample of them.
    REQUIRE(run_redsem({"acquire", "never"}, env).exit_code == 0);
    const auto metrics = run_redsem({"status", "--format", "prometheus"}, env);
    INFO(metrics.out);
    REQUIRE(metrics.exit_code == 0);
    const auto gauge = [&](const std::string& family, const std::string& name) {
        const std::string start = family + "{prefix=\"redsem\",name=\"" + name + "\"} ";
        const std::size_t at = metrics.out.find(start);
        return at == std::string::npos
                   ? std::optional<double>()
                   : std::optional(std::stod(metrics.out.substr(at + start.size())));
    };
    const auto seconds = [](const json& ms) { return ms.get<double>() / 1000.0; };
    CHECK(gauge("redsem_last_exit_status", "nightly") == 3.0);
    CHECK(gauge("redsem_last_run_timestamp_seconds", "nightly") == seconds(runs[1]["time_ms"]));
    CHECK(gauge("redsem_last_success_timestamp_seconds", "nightly") == seconds(runs[0]["time_ms"]));
    CHECK(gauge("redsem_last_run_duration_seconds", "nightly") == seconds(runs[1]["held_ms"]));
    CHECK_FALSE(gauge("redsem_last_exit_status", "never"));
    CHECK_FALSE(gauge("redsem_last_success_timestamp_seconds", "never"));
    CHECK(gauge("redsem_holders", "never") == 1.0);
}

TEST_CASE("status --overdue exits 1 with a line for a NAME without a success within DUR") {
    RedisServer server;
    const auto env = env_for(server);
    REQUIRE(run_redsem({"run", "nightly", "--label", "backup", "--", "true"}, env).exit_code == 0);
    const auto fresh = run_redsem({"status", "nightly", "--overdue", "1h"}, env);
    CHECK(fresh.exit_code == 0);
    CHECK(fresh.out.empty());

    // Then a failure: the last success stays the one it names.
    REQUIRE(run_redsem({"run", "nightly", "--", "false"}, env).exit_code == 1);
    std::this_thread::sleep_for(50ms); // for the success to be older than 10ms by any clock
    const auto late = run_redsem({"status", "nightly", "never", "--overdue", "10ms"}, env);
    INFO(late.out << late.err);
    CHECK(late.exit_code == 1);
    const auto lines = lines_of(late.out);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].rfind("nightly: last success ", 0) == 0);
    CHECK(lines[0].find("('backup'); the last run, ") != std::string::npos);
    CHECK(lines[0].find(", exited 1") != std::string::npos);
    CHECK(lines[1] == "never: no successful run in its history");

    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"status", "--overdue", "1h"},
          {"status", "nightly", "--overdue", "0"},
          {"status", "nightly", "--overdue", "soon"},
          {"status", "nightly", "--overdue", "1h", "--json"}}) {
        const auto refused = run_redsem(bad, env);
        INFO(refused.err);
        CHECK(refused.exit_code == 64);
        CHECK(refused.err.rfind("redsem: error: ", 0) == 0);
        CHECK(refused.out.empty());
    }
}

TEST_CASE("status shows expired holders that were not pruned yet") {
    RedisServer server;
    const auto lease = acquire_json(server, {"exp", "--ttl", "200ms", "--label", "stale"});
    std::this_thread::sleep_for(400ms);
    const json status = json::parse(run_redsem({"status", "exp", "--json"}, env_for(server)).out);
    REQUIRE(status["holders"].size() == 1);
    CHECK(status["holders"][0]["expired"] == true);
    CHECK(status["holders"][0]["expires_in_ms"].get<long long>() < 0);
    const auto text = run_redsem({"status", "exp"}, env_for(server)).out;
    CHECK(text.find("expired ") != std::string::npos);
    CHECK(text.find("stale") != std::string::npos);
}

TEST_CASE("status changes nothing in Redis") {
    RedisServer server;
    Connection admin = server.admin();
    acquire_json(server, {"ro", "-n", "2"});
    acquire_json(server, {"ro", "-n", "2", "--ttl", "3s"});
    const auto short_lease_from = std::chrono::steady_clock::now();
    Child waiter({"acquire", "ro", "-n", "2"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{ro}:queue") >= 1; }, 10s));
    waiter.signal(SIGSTOP); // a waiter that no longer refreshes: status must not prune it
    std::this_thread::sleep_until(short_lease_from + 3200ms); // and one holder has expired
    const auto before = snapshot(admin);
    CHECK(run_redsem({"status", "ro"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"status", "ro", "--json"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"status"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"status", "--json"}, env_for(server)).exit_code == 0);
    CHECK(snapshot(admin) == before);
    waiter.signal(SIGCONT);
}

TEST_CASE("status without a name lists every semaphore under the prefix, sorted") {
    RedisServer server;
    server.mark_in_use("elsewhere");
    for (const char* name : {"zeta", "alpha", "mid"}) {
        acquire_json(server, {name, "-n", "3", "--label", std::string("job ") + name});
    }
    CHECK(run_redsem({"acquire", "other", "--prefix", "elsewhere"}, env_for(server)).exit_code ==
          0);
    const auto text = run_redsem({"status"}, env_for(server));
    const auto lines = lines_of(text.out);
    REQUIRE(lines.size() == 4);
    CHECK(lines[0].rfind("NAME", 0) == 0);
    CHECK(lines[1].rfind("alpha  1/3", 0) == 0);
    CHECK(lines[2].rfind("mid", 0) == 0);
    CHECK(lines[3].rfind("zeta", 0) == 0);
    CHECK(lines[1].find("job alpha") != std::string::npos);

    const json all = json::parse(run_redsem({"status", "--json"}, env_for(server)).out);
    REQUIRE(all.size() == 3);
    CHECK(all[0]["name"] == "alpha");
    CHECK(all[0]["held"] == 1);
    CHECK(all[0]["limit"] == 3);
    CHECK(all[0]["waiting"] == 0);
    CHECK(all[0]["oldest_holder"]["label"] == "job alpha");

    const json other =
        json::parse(run_redsem({"status", "--json", "--prefix", "elsewhere"}, env_for(server)).out);
    REQUIRE(other.size() == 1);
    CHECK(other[0]["name"] == "other");
    // Glob characters in a prefix are taken literally.
    const json none =
        json::parse(run_redsem({"status", "--json", "--prefix", "*"}, env_for(server)).out);
    CHECK(none.empty());
}

TEST_CASE("gc removes expired holders and dead waiters, and deletes what is left empty") {
    RedisServer server;
    Connection admin = server.admin();
    acquire_json(server, {"dead", "--ttl", "150ms", "--label", "crashed"});
    const auto live = acquire_json(server, {"mixed", "-n", "3", "--label", "alive"});
    acquire_json(server, {"mixed", "-n", "3", "--ttl", "150ms", "--label", "crashed too"});
    acquire_json(server, {"queued", "--label", "holds queued"});
    const std::string ghost = generate_token();
    add_dead_waiter(server, "queued", ghost, 1);
    std::this_thread::sleep_for(300ms);

    const auto before = snapshot(admin);
    const auto dry = run_redsem({"gc", "--dry-run", "--json"}, env_for(server));
    REQUIRE(dry.exit_code == 0);
    CHECK(snapshot(admin) == before); // a dry run changes nothing
    const json planned = json::parse(dry.out);
    CHECK(planned["dry_run"] == true);
    CHECK(planned["removed"].size() == 3);
    CHECK(planned["deleted"] == json::array({"dead"}));

    const auto done = run_redsem({"gc", "--json"}, env_for(server));
    REQUIRE(done.exit_code == 0);
    const json report = json::parse(done.out);
    CHECK(report["dry_run"] == false);
    std::map<std::string, json> by_label;
    for (const auto& entry : report["removed"]) {
        by_label[entry["label"].get<std::string>()] = entry;
    }
    REQUIRE(by_label.size() == 3);
    CHECK(by_label["crashed"]["name"] == "dead");
    CHECK(by_label["crashed"]["kind"] == "holder");
    CHECK(by_label["crashed"]["dead_for_ms"].get<long long>() >= 100);
    CHECK(by_label["crashed too"]["name"] == "mixed");
    CHECK(by_label["dead waiter"]["kind"] == "waiter");
    CHECK(by_label["dead waiter"]["token"] == ghost);
    CHECK(by_label["dead waiter"]["host"] == "ghost");
    CHECK(by_label["dead waiter"]["pid"] == 4242);
    CHECK(report["deleted"] == json::array({"dead"}));

    // Only its history stays (with its gc events), expiring as the keys would have.
    const Reply left = admin.call({"KEYS", "redsem:{dead}:*"});
    REQUIRE(left.as_array().size() == 1);
    CHECK(left.at(0).as_string() == "redsem:{dead}:log");
    CHECK(admin.call({"PTTL", "redsem:{dead}:log"}).as_integer() > 0);
    CHECK(zcard(admin, "redsem:{mixed}:holders") == 1);
    CHECK(admin.call({"ZSCORE", "redsem:{mixed}:holders", live["token"].get<std::string>()}).type ==
          Reply::Type::string);
    CHECK(zcard(admin, "redsem:{queued}:queue") == 0);
    CHECK(zcard(admin, "redsem:{queued}:holders") == 1);

    const auto again = run_redsem({"gc"}, env_for(server));
    CHECK(again.exit_code == 0);
    CHECK(again.out.empty());
    CHECK(again.err == "redsem: nothing to clean\n");
}

TEST_CASE("gc of named semaphores only, and of records nobody owns") {
    RedisServer server;
    Connection admin = server.admin();
    acquire_json(server, {"a", "--ttl", "150ms"});
    acquire_json(server, {"b", "--ttl", "150ms"});
    acquire_json(server, {"c"});
    admin.call({"HSET", "redsem:{c}:info", std::string(32, 'e'), "h 5 1 1 100 {}"});
    std::this_thread::sleep_for(300ms);
    const json report = json::parse(run_redsem({"gc", "a", "c", "--json"}, env_for(server)).out);
    REQUIRE(report["removed"].size() == 2);
    CHECK(report["removed"][0]["name"] == "a");
    CHECK(report["removed"][1]["name"] == "c");
    CHECK(report["removed"][1]["kind"] == "orphan");
    CHECK(admin.call({"EXISTS", "redsem:{b}:holders"}).as_integer() == 1);
    CHECK(admin.call({"HLEN", "redsem:{c}:info"}).as_integer() == 1);
    const auto text = run_redsem({"gc", "b"}, env_for(server));
    CHECK(text.out.find("removed 1 dead entry; deleted the keys of 1 empty semaphore") !=
          std::string::npos);
}

TEST_CASE("gc never removes a live holder that keeps renewing") {
    RedisServer server;
    Connection admin = server.admin();
    // A lease of 1s, renewed every third of it, through three of its lifetimes of gc runs:
    // long enough that a renewal late on a loaded machine (or under ThreadSanitizer) does not
    // lose it; 300ms once did, which said nothing about gc.
    Child live({"run", "busy", "-n", "3", "--ttl", "1s", "--label", "renewing", "--", "sleep", "4"},
               env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{busy}:holders") >= 1; }, 10s));
    int removed_live = 0;
    const auto until = std::chrono::steady_clock::now() + 3500ms;
    while (std::chrono::steady_clock::now() < until) {
        acquire_json(server, {"busy", "-n", "3", "--ttl", "100ms", "--label", "dying"});
        const json report = json::parse(run_redsem({"gc", "busy", "--json"}, env_for(server)).out);
        for (const auto& entry : report["removed"]) {
            removed_live += entry["label"] == "renewing" ? 1 : 0;
        }
        std::this_thread::sleep_for(50ms);
    }
    CHECK(removed_live == 0);
    CHECK(live.wait(15s).exit_code == 0); // its lease was never lost
}

TEST_CASE("gc reports a semaphore it cannot clean and still cleans the others") {
    RedisServer server;
    Connection admin = server.admin();
    acquire_json(server, {"fine", "--ttl", "150ms"});
    acquire_json(server, {"foreign", "--ttl", "60s"});
    admin.call({"DEL", "redsem:{foreign}:state"});
    admin.call({"SET", "redsem:{foreign}:state", "somebody else's"});
    std::this_thread::sleep_for(300ms);
    const auto result = run_redsem({"gc", "--json"}, env_for(server));
    CHECK(result.exit_code == 65);
    CHECK(result.err.find("gc of 'foreign'") != std::string::npos);
    const json report = json::parse(result.out);
    CHECK(report["deleted"] == json::array({"fine"}));
    CHECK(report["failed"][0]["name"] == "foreign");
    CHECK(admin.call({"GET", "redsem:{foreign}:state"}).as_string() == "somebody else's");
}

TEST_CASE("status counts a waiter that took a handed-over slot as a live holder after the claim "
          "window") {
    RedisServer server;
    const json first = acquire_json(server, {"handed", "--ttl", "60s"});
    Child waiter({"acquire", "handed", "--ttl", "60s"}, env_for(server));
    Connection admin = server.admin();
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{handed}:queue") == 1; }, 10s));
    REQUIRE(run_redsem({"release", "handed", first["token"]}, env_for(server)).exit_code == 0);
    REQUIRE(waiter.wait(10s).exit_code == 0); // popped its grant from its wake list
    // Past the 3s window for collecting a hand-over: the claim entry is still there (the next
    // script prunes it), but the grant was collected.
    std::this_thread::sleep_for(3500ms);
    const json status =
        json::parse(run_redsem({"status", "handed", "--json"}, env_for(server)).out);
    CHECK(status["held"] == 1);
    REQUIRE(status["holders"].size() == 1);
    CHECK(status["holders"][0]["expired"] == false);
    const json all = json::parse(run_redsem({"status", "--json"}, env_for(server)).out);
    REQUIRE(all.size() == 1);
    CHECK(all[0]["held"] == 1);
    CHECK(all[0]["expired_holders"] == 0);
}

TEST_CASE("status without NAME lists the semaphores it can read and names a foreign key in "
          "each of the others") {
    RedisServer server;
    const auto env = env_for(server);
    acquire_json(server, {"good", "--ttl", "10m"});
    Connection admin = server.admin();
    admin.call({"SET", "redsem:{bad}:state", "by hand"});
    admin.call({"HSET", "redsem:{bad2}:state", "limit", "1"});
    admin.call({"SET", "redsem:{bad2}:queue", "by hand"});
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"status"}, std::vector<std::string>{"status", "--json"},
          std::vector<std::string>{"status", "--format", "prometheus"}}) {
        const ProcessResult result = run_redsem(args, env);
        INFO(args.back() << ": " << result.out << result.err);
        CHECK(result.exit_code == 0);
        CHECK(result.out.find("good") != std::string::npos);
        CHECK(result.out.find("bad") == std::string::npos);
        CHECK(result.err ==
              "redsem: warning: semaphore 'bad' is left out: key 'redsem:{bad}:state' holds a "
              "string, not what redsem keeps there\n"
              "redsem: warning: semaphore 'bad2' is left out: key 'redsem:{bad2}:queue' holds a "
              "string, not what redsem keeps there\n");
    }
    // Named, the foreign key is the error, named; the other names are still shown.
    const ProcessResult named = run_redsem({"status", "bad2", "good"}, env);
    CHECK(named.exit_code == 65);
    CHECK(named.out.find("good") != std::string::npos);
    CHECK(named.err.rfind("redsem: error: key 'redsem:{bad2}:queue' of semaphore 'bad2' holds a "
                          "string, not the zset redsem keeps there",
                          0) == 0);
    CHECK(line_count(named.err) == 1);
    // So in the Prometheus format.
    const ProcessResult metrics =
        run_redsem({"status", "bad2", "good", "--format", "prometheus"}, env);
    CHECK(metrics.exit_code == 65);
    CHECK(metrics.out.find("name=\"good\"") != std::string::npos);
    CHECK(metrics.err.rfind("redsem: error: semaphore 'bad2' cannot be read: key "
                            "'redsem:{bad2}:queue' holds a string",
                            0) == 0);
}

TEST_CASE("a foreign key that appears in a semaphore in use: one code and one message naming "
          "it, for every subcommand") {
    RedisServer server;
    const auto env = env_for(server);
    const json held = acquire_json(server, {"used", "--ttl", "10m"});
    const std::string token = held["token"];
    Connection admin = server.admin();
    admin.call({"DEL", "redsem:{used}:holders"});
    admin.call({"SET", "redsem:{used}:holders", "by hand"});
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"release", "used", token},
          std::vector<std::string>{"renew", "used", token},
          std::vector<std::string>{"acquire", "used", "-w", "0"},
          std::vector<std::string>{"status", "used"}, std::vector<std::string>{"gc", "used"}}) {
        const ProcessResult result = run_redsem(args, env);
        INFO(args.front() << ": " << result.err);
        CHECK(result.exit_code == 65);
        CHECK(result.err.find("key 'redsem:{used}:holders' of semaphore 'used' holds a string, "
                              "not the zset redsem keeps there") != std::string::npos);
        CHECK(line_count(result.err) == 1);
    }
}

TEST_CASE("an operator's limit and history length stay through gc and key expiry until "
          "limit --unset") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    Connection admin = server.admin();
    auto pttl = [&](const std::string& key) { return admin.call({"PTTL", key}).as_integer(); };
    REQUIRE(run_redsem({"limit", "op", "1"}, env).exit_code == 0);
    REQUIRE(run_redsem({"limit", "hist", "--history", "5"}, env).exit_code == 0);
    CHECK(pttl("redsem:{op}:state") == -1);
    CHECK(pttl("redsem:{hist}:state") == -1);

    // Used and idle again: the other keys expire, the state does not; gc leaves it.
    const json held = acquire_json(server, {"op", "--ttl", "30s"});
    REQUIRE(run_redsem({"release", "op", held["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(pttl("redsem:{op}:state") == -1);
    const json other = acquire_json(server, {"gone", "--ttl", "30s"});
    REQUIRE(run_redsem({"release", "gone", other["token"].get<std::string>()}, env).exit_code == 0);
    const ProcessResult gc = run_redsem({"gc"}, env);
    CHECK(gc.exit_code == 0);
    // The table names what it deleted, and only that.
    CHECK(gc.out == "removed 0 dead entries; deleted the keys of 1 empty semaphore: gone\n");
    CHECK(admin.call({"HGET", "redsem:{op}:state", "limit"}).as_string() == "1");
    CHECK(admin.call({"EXISTS", "redsem:{op}:slots"}).as_integer() == 0); // empty keys do go
    CHECK(admin.call({"HGET", "redsem:{hist}:state", "history"}).as_string() == "5");
    const json dry = json::parse(run_redsem({"gc", "--dry-run", "--json"}, env).out);
    CHECK(dry["deleted"] == json::array());

    // Listed while nobody is in it, and still the operator's: a caller's -n does not reset it.
    const ProcessResult status = run_redsem({"status"}, env);
    CHECK(status.out.find("\nop ") != std::string::npos);
    CHECK(run_redsem({"status", "op"}, env).out == "op: no holders and no waiters (limit 1)\n");
    const ProcessResult other_n = run_redsem({"acquire", "op", "-n", "5", "-w", "0"}, env);
    CHECK(other_n.exit_code == 65);
    const json info = json::parse(run_redsem({"limit", "op", "--json"}, env).out);
    CHECK(info["limit"] == 1);
    CHECK(info["set_by"] == "operator");

    // Unset while idle: gone, as gc would delete it; the next acquire's -n applies.
    const json unset = json::parse(run_redsem({"limit", "op", "--unset", "--json"}, env).out);
    CHECK(unset["stored"] == false);
    CHECK(admin.call({"EXISTS", "redsem:{op}:state"}).as_integer() == 0);
    const json five = acquire_json(server, {"op", "-n", "5", "--ttl", "30s"});
    CHECK(five["limit"] == 5);

    // Unset while in use: the limit stays in force, as the callers'; the keys expire again
    // once idle.
    REQUIRE(run_redsem({"limit", "busy", "2"}, env).exit_code == 0);
    const json busy = acquire_json(server, {"busy", "--ttl", "30s"});
    const json in_use = json::parse(run_redsem({"limit", "busy", "--unset", "--json"}, env).out);
    CHECK(in_use["limit"] == 2);
    CHECK(in_use["set_by"] == "caller");
    CHECK(in_use["held"] == 1);
    REQUIRE(run_redsem({"release", "busy", busy["token"].get<std::string>()}, env).exit_code == 0);
    CHECK(pttl("redsem:{busy}:state") > 0);
    CHECK(run_redsem({"limit", "hist", "--unset"}, env).exit_code == 0);
    CHECK(admin.call({"EXISTS", "redsem:{hist}:state"}).as_integer() == 0);

    // --unset takes no new value.
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"limit", "op", "3", "--unset"},
          std::vector<std::string>{"limit", "op", "--unset", "--history", "5"}}) {
        const ProcessResult refused = run_redsem(args, env);
        CHECK(refused.exit_code == 64);
        CHECK(refused.err.rfind("redsem: ", 0) == 0);
    }
}

TEST_CASE("with nothing to show, status, gc and log print a notice on stderr and nothing on "
          "stdout") {
    RedisServer server;
    const auto env = env_for(server);
    const auto status = run_redsem({"status"}, env);
    const auto gc = run_redsem({"gc"}, env);
    const auto log = run_redsem({"log"}, env);
    for (const ProcessResult* result : {&status, &gc, &log}) {
        INFO(result->err);
        CHECK(result->exit_code == 0);
        CHECK(result->out.empty()); // before: status and gc said so on stdout
        CHECK(result->err.rfind("redsem: ", 0) == 0);
        CHECK(line_count(result->err) == 1);
    }
    CHECK(status.err == "redsem: no semaphores under prefix 'redsem'\n");
}

TEST_CASE("holders say which CI job they are: status, status --json and log show it, an "
          "explicit --label wins") {
    const RedisServer server;
    EnvChanges gitlab = env_for(server);
    gitlab["GITLAB_CI"] = "true";
    gitlab["CI_JOB_URL"] = "https://gitlab.example.com/acme/app/-/jobs/4711";
    gitlab["CI_PROJECT_PATH"] = "acme/app";
    gitlab["CI_JOB_NAME"] = "deploy \x1b[31mprod";
    const std::string redsem = redsem_binary();
    const ProcessResult inside =
        run_redsem({"run", "deploy", "--", "sh", "-c",
                    redsem + " status deploy; " + redsem + " status deploy --json"},
                   gitlab);
    REQUIRE(inside.exit_code == 0);
    // The table: the label, then the job's URL.
    CHECK(inside.out.find("sh https://gitlab.example.com/acme/app/-/jobs/4711") !=
          std::string::npos);
    const std::string json_line = inside.out.substr(inside.out.rfind("\n{") + 1);
    const auto status = nlohmann::json::parse(json_line);
    const auto& ci = status["holders"][0]["ci"];
    CHECK(ci["system"] == "gitlab");
    CHECK(ci["url"] == "https://gitlab.example.com/acme/app/-/jobs/4711");
    CHECK(ci["pipeline"] == "acme/app");
    CHECK(ci["job"] == "deploy \x1b[31mprod"); // exact in JSON
    // The history keeps it; a table escapes what came from the environment.
    const ProcessResult log = run_redsem({"log", "deploy", "--json"}, env_for(server));
    REQUIRE(log.exit_code == 0);
    int with_job = 0;
    std::istringstream events(log.out);
    for (std::string line; std::getline(events, line);) {
        const auto event = nlohmann::json::parse(line);
        if (event["event"] == "acquired" || event["event"] == "released") {
            CHECK(event["ci"]["job"] == "deploy \x1b[31mprod");
            ++with_job;
        }
    }
    CHECK(with_job == 2);
    gitlab.erase("CI_JOB_URL"); // no URL: the table names system, pipeline and job
    const ProcessResult no_url =
        run_redsem({"run", "deploy", "--", "sh", "-c", redsem + " status deploy"}, gitlab);
    CHECK(no_url.out.find("sh (gitlab acme/app deploy \\x1b[31mprod)") != std::string::npos);
    CHECK(no_url.out.find('\x1b') == std::string::npos);

    // --label says all; --label '' records nothing.
    for (const std::string label : {"mine", ""}) {
        const ProcessResult labelled = run_redsem(
            {"run", "deploy", "--label", label, "--", redsem, "status", "deploy", "--json"},
            gitlab);
        REQUIRE(labelled.exit_code == 0);
        const auto holder = nlohmann::json::parse(labelled.out)["holders"][0];
        CHECK(holder["label"] == label);
        CHECK(holder["ci"].is_null());
    }
    // Outside a CI job: nothing.
    const ProcessResult outside =
        run_redsem({"run", "deploy", "--", redsem, "status", "deploy", "--json"}, env_for(server));
    CHECK(nlohmann::json::parse(outside.out)["holders"][0]["ci"].is_null());
}

TEST_CASE("status: hand-edited times (negative, huge, -inf) give valid ISO 8601 and no "
          "overflowing numbers") {
    const RedisServer server;
    const std::string token = first_line(run_redsem({"acquire", "tm"}, env_for(server)).out);
    REQUIRE(token.size() == 32);
    Connection admin = server.admin();
    const Keys keys = Keys::make("redsem", "tm");
    const std::string record = admin.call({"HGET", keys.info, token}).as_string();
    const std::size_t json_at = record.find('{');
    REQUIRE(json_at != std::string::npos);
    for (const std::string& since_ttl :
         {std::string("-5 -5"), std::string("-9223372036854775808 -9223372036854775808"),
          std::string("9223372036854775807 9223372036854775807")}) {
        std::istringstream fields(record);
        std::string kind, slot, fence;
        fields >> kind >> slot >> fence;
        admin.call(
            {"HSET", keys.info, token,
             kind + " " + slot + " " + fence + " " + since_ttl + " " + record.substr(json_at)});
        for (const std::string score : {"-inf", "+inf", "1e300", "-5"}) {
            admin.call({"ZADD", keys.holders, score, token});
            const ProcessResult table = run_redsem({"status", "tm"}, env_for(server));
            INFO(since_ttl << " " << score << ": " << table.err);
            CHECK(table.exit_code == 0);
            CHECK(table.out.find("-1067") == std::string::npos); // no wrapped durations
            const ProcessResult as_json = run_redsem({"status", "tm", "--json"}, env_for(server));
            REQUIRE(as_json.exit_code == 0);
            const auto holder = nlohmann::json::parse(as_json.out)["holders"][0];
            for (const char* field : {"acquired", "renewed", "deadline"}) {
                const std::string time = holder[field];
                // YYYY-MM-DDTHH:MM:SS.mmmZ
                CHECK(time.size() == 24);
                CHECK(time[4] == '-');
                CHECK(time[10] == 'T');
                CHECK(time[19] == '.');
                CHECK(time.back() == 'Z');
            }
            // Within what the clamped times allow: no wrapped 64-bit arithmetic.
            CHECK(std::llabs(holder["held_for_ms"].get<long long>()) < 600'000'000'000'000LL);
            CHECK(std::llabs(holder["expires_in_ms"].get<long long>()) < 600'000'000'000'000LL);
        }
    }
}

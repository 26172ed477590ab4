// Faults and hostile input: restarts, lost replies, corrupted keys, secrets, malformed input.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "redis/topology.hpp"
#include "semaphore/keys.hpp"
#include "support/helpers.hpp"
#include "support/loopback_proxy.hpp"
#include "util/name.hpp"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sys/syscall.h>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

#ifdef SYS_poll
// Whether the process `pid` is asleep in poll(2) for `timeout`, as /proc shows its system call
// ("NUMBER FDS NFDS TIMEOUT ..."). (Where poll is no system call of its own, as on arm64, glibc
// calls ppoll, whose timeout /proc does not show.)
bool asleep_in_poll(int pid, std::chrono::milliseconds timeout) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
    long long number = -1;
    std::string fds, count, argument;
    in >> number >> fds >> count >> argument;
    return in && number == SYS_poll && std::stoll(argument, nullptr, 16) == timeout.count();
}
#endif

RedisServer::Options with_args(std::vector<std::string> args, bool tcp = false) {
    RedisServer::Options options;
    options.tcp = tcp;
    options.extra_args = std::move(args);
    return options;
}

} // namespace

TEST_CASE("Redis restarted with persistence: the command runs on, the lease continues") {
    RedisServer server(with_args({"--appendonly", "yes", "--appendfsync", "always"}));
    const std::string ready = server.dir() + "/ready";
    Child run({"run", "restart", "--ttl", "2s", "--", "sh", "-c", "touch " + ready + "; sleep 3"},
              env_for(server));
    REQUIRE(wait_for_file(ready, 10s));
    std::this_thread::sleep_for(500ms);
    server.restart();
    const auto result = run.wait(20s);
    CHECK(result.exit_code == 0);
    CHECK(result.err.find("lost") == std::string::npos);
    Connection admin = server.admin();
    CHECK(zcard(admin, "redsem:{restart}:holders") == 0); // released at the end
}

TEST_CASE("Redis restarted without persistence: the lease is lost and handled as --on-lost says") {
    RedisServer server;
    const std::string ready = server.dir() + "/ready";
    Child run({"run", "amnesia", "--ttl", "1s", "--", "sh", "-c", "touch " + ready + "; sleep 30"},
              env_for(server));
    REQUIRE(wait_for_file(ready, 10s));
    server.restart();
    const auto result = run.wait(20s); // nothing hangs
    INFO(result.err);
    CHECK(result.exit_code == 76);
    CHECK(result.err.find("lost the slot of 'amnesia'") != std::string::npos);

    const std::string ready2 = server.dir() + "/ready2";
    // Admitted once the loss grace after the restart has passed.
    Child ignoring({"run", "amnesia", "--ttl", "1s", "--loss-grace", "1s", "--on-lost", "ignore",
                    "--", "sh", "-c", "touch " + ready2 + "; sleep 2; exit 4"},
                   env_for(server));
    REQUIRE(wait_for_file(ready2, 10s));
    server.restart();
    const auto ignored = ignoring.wait(20s);
    CHECK(ignored.exit_code == 4);
    CHECK(ignored.err.find("warning: lost the slot") != std::string::npos);
}

TEST_CASE("a waiter rides out a Redis restart and keeps its place") {
    RedisServer server(with_args({"--appendonly", "yes", "--appendfsync", "always"}));
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"patient"});
    // A restart may have lost the last writes: admission reopens after the loss grace.
    Child waiter({"acquire", "patient", "--loss-grace", "1s"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{patient}:queue") >= 1; }, 10s));
    server.restart();
    std::this_thread::sleep_for(300ms);
    CHECK_FALSE(waiter.finished());
    Connection after = server.admin();
    CHECK(zcard(after, "redsem:{patient}:queue") == 1);
    REQUIRE(run_redsem({"release", "patient", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto result = waiter.wait(10s);
    CHECK(result.exit_code == 0);
    CHECK(result.out.size() == 33); // a token and a newline
}

TEST_CASE("a waiter stopped through an outage for longer than its window retries when it "
          "wakes, and does not give up on its first failure") {
    // The outage window counts the time a loop tried, not the time it was stopped: the world
    // it wakes to is not the one it left (the chaos test saw a waiter stopped through the end
    // of a restart give up at its first try on waking).
#ifndef SYS_poll
    REDSEM_SKIP("poll(2) as a system call (the test finds the waiter's retry delay in /proc)");
#else
    RedisServer server(with_args({}, true));
    Connection admin = server.admin();
    std::atomic<int> cut_from{std::numeric_limits<int>::max()};  // proxy connections cut: from
    std::atomic<int> pass_from{std::numeric_limits<int>::max()}; // ... up to this one
    std::atomic<int> last_seen{-1};
    LoopbackProxy proxy(server.port(), [&](int connection, const char*, long long size) {
        last_seen = std::max(last_seen.load(), connection);
        return connection >= cut_from && connection < pass_from ? -1 : size;
    });
    const auto holder = acquire_json(server, {"asleep"});
    EnvChanges env = {{"REDSEM_URL", "redis://127.0.0.1:" + std::to_string(proxy.port())},
                      {"REDSEM_LOSS_GRACE", "0"}};
    Child waiter({"acquire", "asleep"}, env);
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{asleep}:queue") >= 1; }, 10s));
    // Cut it off: its connection is killed, and every new one is closed at the first reply.
    cut_from = 0;
    admin.call({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    // Its tries fail, 100, 200 and 400 ms apart; it is stopped as it sleeps the next 800.
    REQUIRE(wait_until([&] { return asleep_in_poll(waiter.pid(), 800ms); }, 10s));
    waiter.signal(SIGSTOP);
    const auto stopped_at = std::chrono::steady_clock::now();
    REQUIRE_FALSE(waiter.finished()); // it had not given up before it was stopped
    // Stopped for longer than the window; then the first try on waking fails too.
    REQUIRE(wait_until(
        [&] { return std::chrono::steady_clock::now() - stopped_at > k_reconnect_window + 1s; },
        20s));
    pass_from = last_seen + 2;
    waiter.signal(SIGCONT);
    REQUIRE(wait_until([&] { return last_seen >= pass_from; }, 10s));
    REQUIRE(run_redsem({"release", "asleep", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto result = waiter.wait(20s);
    INFO(result.err);
    CHECK(result.exit_code == 0);
    CHECK(result.out.size() == 33); // a token and a newline
    CHECK(zcard(admin, "redsem:{asleep}:holders") == 1);
#endif
}

TEST_CASE("a first request cut off by a Redis shutting down: the acquire waits for it") {
    // The connection was accepted, so the address is right: what follows is a restart to ride
    // out, not a wrong address to report at once (RetryPolicy).
    RedisServer server(with_args({"--appendonly", "yes", "--appendfsync", "always"}));
    Connection admin = server.admin();
    // Holds the acquire's script (a write) unanswered; the observer's INFO still runs.
    admin.call({"CLIENT", "PAUSE", "30000", "WRITE"});
    Child acquire({"acquire", "cut-off", "--loss-grace", "1s"}, env_for(server));
    REQUIRE(
        wait_until([&] { return info_field(admin, "clients", "blocked_clients") == "1"; }, 10s));
    // Down for a while: every reconnection in the meantime finds no socket.
    server.restart(1s);
    const auto result = acquire.wait(20s);
    CHECK(result.exit_code == 0);
    CHECK(result.out.size() == 33); // a token and a newline
    INFO(result.err);
    CHECK(result.err.find("error") == std::string::npos);
    Connection after = server.admin();
    CHECK(zcard(after, "redsem:{cut-off}:holders") == 1);
}

TEST_CASE("a hand-over nobody collected is deleted with its lease, never read later") {
    RedisServer server;
    Connection admin = server.admin();
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    const Keys keys = Keys::make("redsem", "stale");
    auto acquire = [&](const std::string& token, Milliseconds ttl, bool known) {
        return acquire_by_script(client, keys, token, ttl, known);
    };
    const std::string holder(32, 'a');
    const std::string stalled(32, 'b');
    const std::string next(32, 'c');
    REQUIRE(reply_kind(acquire(holder, 60s, false)) == "ok");
    REQUIRE(reply_kind(acquire(stalled, 300ms, false)) == "wait");
    REQUIRE(reply_kind(acquire(next, 60s, false)) == "wait");
    // The release hands the slot to `stalled`, which never collects it, and its lease runs out.
    release_by_script(client, keys, holder);
    CHECK(admin.call({"EXISTS", keys.wake_prefix + stalled}).as_integer() == 1);
    std::this_thread::sleep_for(400ms);
    // `next` refreshing prunes it and collects the slot at once; the old grant goes with the
    // old lease.
    const Reply refreshed = acquire(next, 60s, true);
    CHECK(reply_kind(refreshed) == "ok");
    CHECK(wire::Fields(refreshed, "acquire.lua").integer("slot") == 0); // slot 0, handed on
    CHECK(zcard(admin, keys.holders) == 1);
    CHECK(admin.call({"ZSCORE", keys.holders, next}).type == Reply::Type::string);
    CHECK(admin.call({"EXISTS", keys.wake_prefix + stalled}).as_integer() == 0);
    // The stalled client coming back queues again and finds no stale grant.
    CHECK(reply_kind(acquire(stalled, 300ms, true)) == "wait");
    CHECK(admin.call({"BLPOP", keys.wake_prefix + stalled, "0.2"}).is_nil());
}

namespace {

// A waiter of `name`, stopped (SIGSTOP) with the grant of a hand-over in its socket: its BLPOP
// took it off the wake list, and it never read it. Releases `holder` for that, and while the
// release came as the waiter's BLPOP ended to refresh its place (every 1.5 s), the grant stays
// in the list: then the waiter, continued, collects it, and the next one tries with its token
// as the holder.
struct StoppedAtHandOver {
    std::unique_ptr<Child> waiter;
    std::string token;
};

StoppedAtHandOver stopped_at_hand_over(Connection& admin, const EnvChanges& env,
                                       const std::string& name, std::string holder) {
    const std::string queue = semaphore_key(name, "queue");
    for (int round = 0; round < 5; ++round) {
        auto waiter = std::make_unique<Child>(std::vector<std::string>{"acquire", name}, env);
        REQUIRE(wait_until(
            [&] {
                return zcard(admin, queue) == 1 &&
                       info_field(admin, "clients", "blocked_clients") == "1";
            },
            10s));
        std::string token = admin.call({"ZRANGE", queue, "0", "0"}).at(0).as_string();
        waiter->signal(SIGSTOP);
        REQUIRE(run_redsem({"release", name, holder}, env).exit_code == 0);
        REQUIRE(admin.call({"ZSCORE", semaphore_key(name, "holders"), token}).type ==
                Reply::Type::string);
        if (admin.call({"EXISTS", semaphore_key(name, "wake:" + token)}).as_integer() == 0) {
            return {std::move(waiter), std::move(token)};
        }
        waiter->signal(SIGCONT);
        const auto line = waiter->wait_for_line(10s);
        REQUIRE(line);
        holder = *line;
        CHECK(waiter->wait(5s).exit_code == 0);
    }
    FAIL("the release never came while the waiter's BLPOP was waiting");
    return {};
}

std::vector<std::string> holders_of(Connection& admin, const std::string& name) {
    std::vector<std::string> tokens;
    const Reply listed = admin.call({"ZRANGE", semaphore_key(name, "holders"), "0", "-1"});
    for (const Reply& token : listed.as_array()) {
        tokens.push_back(token.as_string());
    }
    return tokens;
}

} // namespace

TEST_CASE("a waiter killed after its BLPOP took a hand-over it never read passes the slot on "
          "within seconds") {
    RedisServer server;
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    auto stopped = stopped_at_hand_over(admin, env, "h",
                                        acquire_json(server, {"h"})["token"].get<std::string>());
    Child survivor({"acquire", "h"}, env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("h", "queue")) == 1; }, 10s));
    stopped.waiter->signal(SIGKILL);
    stopped.waiter->wait();
    // Its claim window (3 s) and a refresh of the survivor (1.5 s), not its lease (60 s).
    const auto start = std::chrono::steady_clock::now();
    const auto line = survivor.wait_for_line(30s);
    REQUIRE(line);
    CHECK(std::chrono::steady_clock::now() - start < 15s);
    CHECK(holders_of(admin, "h") == std::vector<std::string>{*line});
    std::vector<nlohmann::json> unclaimed;
    for (const nlohmann::json& event : history_events(server, "h")) {
        if (event["event"] == "unclaimed") {
            unclaimed.push_back(event);
        }
    }
    REQUIRE(unclaimed.size() == 1);
    CHECK(unclaimed[0]["token"] == stopped.token);
}

TEST_CASE("a waiter stopped for longer than its claim window after its BLPOP took a hand-over "
          "holds nothing when continued, and waits again") {
    RedisServer server;
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    auto stopped = stopped_at_hand_over(admin, env, "h",
                                        acquire_json(server, {"h"})["token"].get<std::string>());
    Child survivor({"acquire", "h"}, env);
    const auto survivor_token = survivor.wait_for_line(30s); // the claim window ran out
    REQUIRE(survivor_token);
    stopped.waiter->signal(SIGCONT);
    REQUIRE(wait_until(
        [&] {
            return admin.call({"ZSCORE", semaphore_key("h", "queue"), stopped.token}).type ==
                   Reply::Type::string;
        },
        10s));
    CHECK(stopped.waiter->out_so_far().empty());
    CHECK(holders_of(admin, "h") == std::vector<std::string>{*survivor_token});
    REQUIRE(run_redsem({"release", "h", *survivor_token}, env).exit_code == 0);
    const auto line = stopped.waiter->wait_for_line(10s);
    REQUIRE(line);
    CHECK(*line == stopped.token);
    CHECK(stopped.waiter->wait(5s).exit_code == 0);
}

TEST_CASE("a reply lost on a broken connection: the retry does not take a second slot") {
    RedisServer server(with_args({}, true));
    Connection admin = server.admin();
    CuttingProxy proxy(server.port());
    const auto result = run_redsem({"acquire", "cut", "-n", "5", "--json", "--url",
                                    "redis://127.0.0.1:" + std::to_string(proxy.port())});
    REQUIRE(result.exit_code == 0);
    CHECK(proxy.cuts() == 1); // the first reply really was lost after the script ran
    const json lease = json::parse(result.out);
    CHECK(zcard(admin, "redsem:{cut}:holders") == 1);
    CHECK(admin.call({"ZSCORE", "redsem:{cut}:holders", lease["token"].get<std::string>()}).type ==
          Reply::Type::string);
    CHECK(lease["slot"] == 0);
    // One fence was taken, by the one acquire that ran.
    CHECK(std::stoll(admin.call({"HGET", "redsem:{cut}:state", "fence"}).as_string()) ==
          lease["fence"].get<long long>());
}

TEST_CASE("hand-corrupted keys: clear errors, no crash, no over-admission, and gc cleans up") {
    RedisServer server;
    Connection admin = server.admin();

    // A holder whose metadata vanished still counts.
    const auto lease = acquire_json(server, {"corrupt", "--ttl", "3s"});
    admin.call({"HDEL", "redsem:{corrupt}:info", lease["token"].get<std::string>()});
    CHECK(run_redsem({"acquire", "corrupt", "-w", "0"}, env_for(server)).exit_code == 75);
    const auto status = run_redsem({"status", "corrupt"}, env_for(server));
    CHECK(status.exit_code == 0);
    CHECK(status.out.find("?") != std::string::npos);
    CHECK(run_redsem({"status", "corrupt", "--json"}, env_for(server)).exit_code == 0);
    REQUIRE(wait_until(
        [&] {
            const auto view = run_redsem({"status", "corrupt", "--json"}, env_for(server));
            return json::parse(view.out)["expired_holders"] == 1;
        },
        10s));
    const auto gc = run_redsem({"gc", "corrupt", "--json"}, env_for(server));
    CHECK(gc.exit_code == 0);
    CHECK(json::parse(gc.out)["removed"].size() == 1);
    CHECK(run_redsem({"acquire", "corrupt", "-w", "0"}, env_for(server)).exit_code == 0);

    // A limit that is not a number: a clear conflict, never a guess.
    // (A lease long enough to outlast two process starts of a sanitized build.)
    const auto held = acquire_json(server, {"badlimit", "--ttl", "3s"});
    admin.call({"HSET", "redsem:{badlimit}:state", "limit", "many"});
    const auto refused = run_redsem({"acquire", "badlimit", "-w", "0"}, env_for(server));
    CHECK(refused.exit_code == 65);
    CHECK(refused.err.find("not a number") != std::string::npos);
    CHECK(zcard(admin, "redsem:{badlimit}:holders") == 1);
    // Once the lease ran out by the server's clock, gc cleans up what a foreign limit left.
    const long long deadline_ms = std::stoll(
        admin.call({"ZSCORE", "redsem:{badlimit}:holders", held["token"].get<std::string>()})
            .as_string());
    REQUIRE(wait_until(
        [&] {
            const Reply time = admin.call({"TIME"});
            return std::stoll(time.at(0).as_string()) * 1000 +
                       std::stoll(time.at(1).as_string()) / 1000 >
                   deadline_ms;
        },
        10s));
    CHECK(run_redsem({"gc", "badlimit"}, env_for(server)).exit_code == 0);
    CHECK(admin.call({"EXISTS", "redsem:{badlimit}:state"}).as_integer() == 0);
    CHECK(run_redsem({"acquire", "badlimit", "-w", "0"}, env_for(server)).exit_code == 0);

    // A slot number out of range in a holder's record: released all the same (it was a
    // script error, exit 70), and the semaphore admits again.
    for (const char* slot : {"1e12", "-3", "2.5"}) {
        INFO(slot);
        const auto odd = acquire_json(server, {"oddslot", "--ttl", "30s"});
        const std::string token = odd["token"];
        std::string record = admin.call({"HGET", "redsem:{oddslot}:info", token}).as_string();
        const std::size_t first = record.find(' ');
        const std::size_t second = record.find(' ', first + 1);
        record = record.substr(0, first + 1) + std::string(slot) + record.substr(second);
        admin.call({"HSET", "redsem:{oddslot}:info", token, record});
        const ProcessResult released = run_redsem({"release", "oddslot", token}, env_for(server));
        INFO(released.err);
        CHECK(released.exit_code == 0);
        CHECK(run_redsem({"acquire", "oddslot", "-w", "0"}, env_for(server)).exit_code == 0);
        REQUIRE(run_redsem({"gc", "oddslot"}, env_for(server)).exit_code == 0);
        admin.call({"DEL", "redsem:{oddslot}:holders", "redsem:{oddslot}:info",
                    "redsem:{oddslot}:slots", "redsem:{oddslot}:state"});
    }

    // Garbage in a record: status and gc survive it.
    acquire_json(server, {"garbage"});
    admin.call({"HSET", "redsem:{garbage}:info", std::string(32, 'd'), "\xff\x00 not a record"});
    CHECK(run_redsem({"status", "garbage", "--json"}, env_for(server)).exit_code == 0);
    const auto swept = run_redsem({"gc", "garbage", "--json"}, env_for(server));
    CHECK(swept.exit_code == 0);
    CHECK(json::parse(swept.out)["removed"][0]["kind"] == "orphan");
}

TEST_CASE("secrets: a password never shows in output, status, JSON, errors or the child") {
    const std::string secret = "Hunter2-" + std::to_string(getpid()) + "-pw";
    RedisServer::Options options;
    options.tcp = true;
    options.extra_args = {"--requirepass", secret};
    options.admin_password = secret;
    RedisServer server(options);
    const std::string port = std::to_string(server.port());
    const std::string url_with = "redis://:" + secret + "@127.0.0.1:" + port;
    const std::string url_without = "redis://127.0.0.1:" + port;
    const EnvChanges env_password{{"REDSEM_PASSWORD", secret}, {"REDSEM_URL", url_without}};

    std::vector<ProcessResult> results;
    results.push_back(run_redsem({"acquire", "s", "--label", "l"}, env_password));
    results.push_back(run_redsem({"status", "s"}, env_password));
    results.push_back(run_redsem({"status", "s", "--json"}, env_password));
    results.push_back(run_redsem({"status", "--json"}, env_password));
    results.push_back(run_redsem({"gc", "--json"}, env_password));
    results.push_back(run_redsem(
        {"run", "child", "--", "sh", "-c", "env; tr '\\0' ' ' < /proc/$$/cmdline; ps -ef"},
        env_password));
    results.push_back(run_redsem({"run", "child", "--", "env"}, {{"REDSEM_URL", url_with}}));
    results.push_back(run_redsem({"run", "child", "--", "env"}, {{"REDIS_URL", url_with}}));
    // A redsem inside the command authenticates as the outer one (before: 77, "set
    // REDSEM_PASSWORD", which the user had done), two levels deep too, and the password
    // reaches no environment on the way.
    const std::string nested = "\"$REDSEM_BIN\" status child --json && env && \"$REDSEM_BIN\" "
                               "run inner -- sh -c 'env; \"$REDSEM_BIN\" status inner'";
    for (const EnvChanges& outer :
         {env_password, EnvChanges{{"REDSEM_URL", url_with}},
          EnvChanges{{"REDSEM_URL", url_without}, {"REDISCLI_AUTH", secret}}}) {
        EnvChanges with_bin = outer;
        with_bin["REDSEM_BIN"] = redsem_binary();
        const auto inside = run_redsem({"run", "child", "-c", nested}, with_bin);
        INFO(inside.err);
        CHECK(inside.exit_code == 0);
        CHECK(inside.out.find("inner: 1/1 held") != std::string::npos);
        results.push_back(inside);
    }
    for (const auto& result : results) {
        CHECK(result.exit_code == 0);
        CHECK(result.err.find("warning") == std::string::npos); // no password in argv
    }
    const auto argv_password = run_redsem({"acquire", "s2", "--url", url_with});
    CHECK(argv_password.exit_code == 0);
    CHECK(argv_password.err.rfind("redsem: warning: ", 0) == 0);
    results.push_back(argv_password);
    results.push_back(
        run_redsem({"acquire", "s3", "--url", "redis://:" + secret + "x@127.0.0.1:" + port}));
    results.push_back(run_redsem({"acquire", "s3"},
                                 {{"REDSEM_URL", url_without}, {"REDSEM_PASSWORD", secret + "x"}}));
    results.push_back(
        run_redsem({"acquire", "s3", "--url", "redis://:" + secret + "@127.0.0.1:99999"}));
    results.push_back(
        run_redsem({"acquire", "s3", "--url", "redis://:" + secret + "@127.0.0.1:1"}));
    CHECK(results[results.size() - 4].exit_code == 77);
    CHECK(results[results.size() - 3].exit_code == 77);
    CHECK(results[results.size() - 2].exit_code == 64);
    CHECK(results[results.size() - 1].exit_code == 69);
    for (const auto& result : results) {
        CHECK(result.out.find(secret) == std::string::npos);
        CHECK(result.err.find(secret) == std::string::npos);
    }
}

TEST_CASE(
    "a table of malformed input: each gives its exit code and one clear line, never a crash") {
    RedisServer server;
    const std::string token(32, 'c');
    struct Case {
        std::vector<std::string> args;
        int exit_code;
    };
    const std::vector<Case> cases{
        // URLs
        {{"acquire", "x", "--url", "http://localhost"}, 64},
        {{"acquire", "x", "--url", "redis://host:99999"}, 64},
        {{"acquire", "x", "--url", "redis://host:0"}, 64},
        {{"acquire", "x", "--url", "redis://host:port"}, 64},
        {{"acquire", "x", "--url", "redis://[::1"}, 64},
        {{"acquire", "x", "--url", "redis:///2"}, 64},
        {{"acquire", "x", "--url", "rediss://"}, 64},
        {{"acquire", "x", "--url", "rediss://host:0"}, 64},
        // TLS options and password files
        {{"acquire", "x", "--url", "redis://127.0.0.1:1", "--cacert", "/etc/hostname"}, 64},
        {{"acquire", "x", "--url", "redis://127.0.0.1:1", "--insecure"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cert", "/etc/hostname"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--key", "/etc/hostname"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cacert", "/nonexistent.pem"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cacert", "/etc/hostname"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cert", "/nonexistent.pem", "--key",
          "/nonexistent.key"},
         64},
        {{"acquire", "x", "--password-file", "/nonexistent/password"}, 64},
        {{"acquire", "x", "--password-file", "/dev/null"}, 64},
        {{"acquire", "x", "--password-file", "/tmp"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--sni", ""}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cacertdir", "/etc/hostname"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cacertdir", "/nonexistent"}, 64},
        {{"acquire", "x", "--url", "rediss://127.0.0.1:1", "--cacert", "/etc"}, 64},
        {{"acquire", "x", "--url", "unix://relative.sock"}, 64},
        {{"acquire", "x", "--url", "unix:///tmp/r.sock?db=x"}, 64},
        {{"acquire", "x", "--url", "nonsense"}, 64},
        {{"acquire", "x", "--url", ""}, 64},
        // durations
        {{"acquire", "x", "--ttl", "0"}, 64},
        {{"acquire", "x", "--ttl", "-5s"}, 64},
        {{"acquire", "x", "--ttl", "50ms"}, 64},
        {{"acquire", "x", "--ttl", "soon"}, 64},
        {{"acquire", "x", "--ttl", "1e3"}, 64},
        {{"acquire", "x", "--ttl", "400d"}, 64},
        {{"acquire", "x", "--ttl", "99999999999999999999h"}, 64},
        {{"acquire", "x", "--ttl", "1h1h"}, 64},
        {{"acquire", "x", "--wait", "forever"}, 64},
        {{"acquire", "x", "--wait", "-1"}, 64},
        {{"acquire", "x", "--connect-timeout", "0"}, 64},
        {{"run", "x", "--kill-after", "later", "--", "true"}, 64},
        {{"renew", "x", token, "--ttl", "0"}, 64},
        // names
        {{"acquire", ""}, 64},
        {{"acquire", std::string(201, 'n')}, 64},
        {{"acquire", "a{b}"}, 64},
        {{"acquire", "a b"}, 64},
        {{"acquire", "a\nb"}, 64},
        {{"acquire", "a\tb"}, 64},
        {{"acquire", "\xff\xfe"}, 64},
        {{"acquire", "\xc0\xaf"}, 64},
        {{"status", "bad name"}, 64},
        {{"gc", "bad}name"}, 64},
        {{"acquire", "x", "--prefix", ""}, 64},
        {{"acquire", "x", "--prefix", "a}"}, 64},
        // limits and codes
        {{"acquire", "x", "-n", "0"}, 64},
        {{"acquire", "x", "-n", "-1"}, 64},
        {{"acquire", "x", "-n", "100001"}, 64},
        {{"acquire", "x", "-n", "abc"}, 64},
        {{"acquire", "x", "-n", "1e3"}, 64},
        {{"acquire", "x", "-n", "3.5"}, 64},
        {{"acquire", "x", "-n", "99999999999999999999999"}, 64},
        {{"acquire", "x", "-E", "256"}, 64},
        {{"acquire", "x", "-E", "-1"}, 64},
        {{"run", "x", "--lost-exit-code", "300", "--", "true"}, 64},
        // options and arguments
        {{"acquire", "x", "--bogus"}, 64},
        {{"acquire"}, 64},
        {{"acquire", "x", "y"}, 64},
        {{"release", "x"}, 64},
        {{"release", "x", "not-a-token"}, 64},
        {{"release", "x", token, "extra"}, 64},
        {{"renew", "x"}, 64},
        {{"status", "--names", "x"}, 64},
        {{"frobnicate"}, 64},
        {{}, 64},
        // run and its --
        {{"run", "x"}, 64},
        {{"run", "x", "--"}, 64},
        {{"run", "x", "-c", "true", "--", "true"}, 64},
        {{"run", "x", "--on-lost", "explode", "--", "true"}, 64},
        {{"run", "--", "true"}, 64},
        {{"run", "exec", "--", "/nonexistent/command"}, 127},
        {{"run", "exec", "--", "/"}, 126},
        {{"run", "exec", "--", ""}, 127},
    };
    REQUIRE(cases.size() >= 60);
    for (const auto& [args, code] : cases) {
        std::string shown;
        for (const auto& arg : args) {
            shown += "[" + printable(arg) + "] ";
        }
        INFO(shown);
        const auto result = run_redsem(args, env_for(server));
        CHECK(result.exit_code == code);
        CHECK(result.signal == 0);
        CHECK(result.out.empty());
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(line_count(result.err) <= 2); // the error, and "Try 'redsem ... --help'."
    }
    Connection admin = server.admin();
    // Usage errors wrote nothing, under any prefix; the commands that could not run took
    // their slot and gave it back.
    const Reply keys = admin.call({"KEYS", "*"});
    for (const Reply& key : keys.as_array()) {
        INFO(key.as_string());
        CHECK(
            (key.as_string().rfind("redsem:{exec}:", 0) == 0 || key.as_string() == "redsem:epoch"));
    }
    CHECK(zcard(admin, "redsem:{exec}:holders") == 0);
}

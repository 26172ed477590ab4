// One run per occurrence (`run --once-per WINDOW`), and every skip on record: cron on several
// hosts with skewed clocks, a run that fails or loses its slot, waiters that wait for a run's
// outcome, gc, and a busy try (-w 0) in the history. Real processes, a real redis-server; the
// observer is the file each run appends to, not redsem's word.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/occurrence.hpp"
#include "support/prerequisites.hpp"
#include "support/skip.hpp"

#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

// `env` with the wall clock moved by `skew` for redsem (libfaketime), the monotonic clock real.
EnvChanges skewed(EnvChanges env, const std::string& library, const std::string& skew) {
    env["LD_PRELOAD"] = library;
    env["FAKETIME"] = skew;
    env["FAKETIME_NO_CACHE"] = "1";
    env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1";
    const char* asan = std::getenv("ASAN_OPTIONS");
    env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0";
    return env;
}

} // namespace

TEST_CASE("run --once-per runs the job once for three hosts with skewed clocks and starts "
          "further apart than the job lasts, and the others skip, exit 0, and are on record") {
    const auto faketime = find_libfaketime();
    if (!faketime) {
        REDSEM_SKIP("libfaketime (Debian package faketime)");
    }
    RedisServer server;
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const EnvChanges env = env_for(server);
    const auto host_a = run_redsem(job({"--once-per", "20h", "-q"}, "nightly", "a", ran),
                                   skewed(env, *faketime, "-3m"));
    REQUIRE(host_a.exit_code == 0);
    REQUIRE(read_file(ran) == "a\n");
    // After the job ended: a lock alone would let these run it again.
    const auto host_b =
        run_redsem(job({"--once-per", "20h"}, "nightly", "b", ran), skewed(env, *faketime, "+5m"));
    const auto host_c = run_redsem(job({"--once-per", "20h", "-q", "-w", "0"}, "nightly", "c", ran),
                                   skewed(env, *faketime, "+10m x1.1"));
    CHECK(read_file(ran) == "a\n");
    CHECK(host_b.exit_code == 0);
    CHECK(line_count(host_b.err) == 1);
    CHECK(host_b.err.find("redsem: skipped 'nightly': it ran on ") == 0);
    CHECK(host_b.err.find(" and succeeded; the next run may start at ") != std::string::npos);
    CHECK(host_c.exit_code == 0);
    CHECK(host_c.err.empty()); // -q keeps stderr quiet; the history still has it
    // `redsem log` answers "did it run, where, who skipped".
    const auto acquired = events_of(server, "nightly", "acquired");
    const auto released = events_of(server, "nightly", "released");
    const auto skipped = events_of(server, "nightly", "skipped");
    REQUIRE(acquired.size() == 1);
    REQUIRE(released.size() == 1);
    CHECK(released[0]["exit_status"] == 0);
    REQUIRE(skipped.size() == 2);
    for (const json& skip : skipped) {
        CHECK(skip["skipped"] == "ran");
        REQUIRE(skip["by"].size() == 1);
        CHECK(skip["by"][0]["token"] == acquired[0]["token"]);
        // The claim starts at the grant, read at the start of the script that logged it.
        const long long since = skip["by"][0]["since_ms"].get<long long>();
        CHECK(since <= acquired[0]["time_ms"].get<long long>());
        CHECK(since >= acquired[0]["time_ms"].get<long long>() - 1000);
        CHECK(skip["by"][0]["until_ms"] == since + 20 * 3600'000LL);
        CHECK(skip["token"] != acquired[0]["token"]);
    }
    const auto table = run_redsem({"log", "nightly"}, env);
    CHECK(table.out.find("skipped") != std::string::npos);
    CHECK(table.out.find("ran on ") != std::string::npos);
}

TEST_CASE("run --once-per on a Redis restarted just before: three hosts with skewed clocks "
          "wait for admission to open, and the job runs once") {
    const auto faketime = find_libfaketime();
    if (!faketime) {
        REDSEM_SKIP("libfaketime (Debian package faketime)");
    }
    RedisServer::Options options;
    options.new_data_set = true; // admission is closed for the loss grace
    RedisServer server(options);
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const EnvChanges env = env_for(server);
    std::vector<std::unique_ptr<Child>> hosts;
    for (const auto& [who, skew] : {std::pair{"a", "-2m"}, {"b", "+0"}, {"c", "+7m x1.1"}}) {
        hosts.push_back(std::make_unique<Child>(
            job({"--once-per", "20h", "-q", "--loss-grace", "2s"}, "nightly", who, ran),
            skewed(env, *faketime, skew)));
    }
    for (auto& host : hosts) {
        const auto result = host->wait(60s);
        INFO(result.err);
        CHECK(result.exit_code == 0);
        // -q keeps the skip quiet; the closed admission is told (one line), as documented.
        CHECK(line_count(result.err) <= 1);
        CHECK(result.err.find("skipped") == std::string::npos);
    }
    CHECK(line_count(read_file(ran)) == 1);
    CHECK(events_of(server, "nightly", "acquired").size() == 1);
    CHECK(events_of(server, "nightly", "skipped").size() == 2);
}

TEST_CASE("run --once-per: a run that fails gives the occurrence back, a waiter waits for the "
          "outcome and runs, and one that would not wait skips while it runs") {
    RedisServer server;
    Connection admin = server.admin();
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const std::string go = scratch.path("go");
    const EnvChanges env = env_for(server);
    const std::string wait_then_fail = "while [ ! -e " + go + " ]; do sleep 0.05; done; exit 3";
    Child first(job({"--once-per", "1h", "-q"}, "backup", "a", ran, wait_then_fail), env);
    REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
    // -w 0 while it runs: skips at once, runs nothing.
    const auto hasty = run_redsem(job({"--once-per", "1h", "-w", "0"}, "backup", "c", ran), env);
    CHECK(hasty.exit_code == 0);
    CHECK(hasty.err.find("redsem: skipped 'backup': it is running on ") == 0);
    // Two waiters queue behind it, in this order.
    Child second(job({"--once-per", "1h", "-q"}, "backup", "b", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("backup", "queue")) == 1; }, 20s));
    Child third(job({"--once-per", "1h"}, "backup", "e", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("backup", "queue")) == 2; }, 20s));
    std::fclose(std::fopen(go.c_str(), "w"));
    CHECK(first.wait().exit_code == 3);
    // The failed run gave the occurrence back: the first waiter ran it; the second then
    // skipped, as that run succeeded.
    CHECK(second.wait().exit_code == 0);
    const auto skipped = third.wait();
    CHECK(skipped.exit_code == 0);
    CHECK(skipped.err.find("it ran on ") != std::string::npos);
    CHECK(read_file(ran) == "a\nb\n");
    const auto released = events_of(server, "backup", "released");
    REQUIRE(released.size() == 2);
    CHECK(released[0]["exit_status"] == 3);
    CHECK(released[1]["exit_status"] == 0);
    const auto skips = events_of(server, "backup", "skipped");
    REQUIRE(skips.size() == 2);
    CHECK(skips[0]["skipped"] == "running");
    CHECK(skips[0]["by"][0]["token"] == released[0]["token"]);
    CHECK(skips[1]["skipped"] == "ran");
    CHECK(skips[1]["by"][0]["token"] == released[1]["token"]);
    // Nothing is left queued or held.
    CHECK(zcard(admin, semaphore_key("backup", "queue")) == 0);
    CHECK(zcard(admin, semaphore_key("backup", "holders")) == 0);
}

TEST_CASE("run --once-per with a limit above 1: a waiter waits for the run's outcome though a "
          "slot is free, and runs the job if that run fails") {
    RedisServer server;
    Connection admin = server.admin();
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const EnvChanges env = env_for(server);
    for (const int status : {1, 0}) {
        INFO("the first run exits " << status);
        const std::string name = "wide" + std::to_string(status);
        const std::string go = scratch.path("go" + std::to_string(status));
        std::fclose(std::fopen(ran.c_str(), "w"));
        Child first(
            job({"--once-per", "1h", "-n", "2", "-q"}, name, "a", ran,
                "while [ ! -e " + go + " ]; do sleep 0.05; done; exit " + std::to_string(status)),
            env);
        REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
        Child second(job({"--once-per", "1h", "-n", "2", "-q"}, name, "b", ran), env);
        // Queued behind the run, with a slot free.
        REQUIRE(wait_until([&] { return zcard(admin, semaphore_key(name, "queue")) == 1; }, 20s));
        CHECK(zcard(admin, semaphore_key(name, "holders")) == 1);
        std::fclose(std::fopen(go.c_str(), "w"));
        CHECK(first.wait().exit_code == status);
        CHECK(second.wait().exit_code == 0);
        CHECK(read_file(ran) == (status == 0 ? "a\n" : "a\nb\n"));
    }
}

TEST_CASE("run --once-per: a waiter that died after a failed run was handed the slot does not "
          "keep the occurrence from the next waiter") {
    RedisServer server;
    Connection admin = server.admin();
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const std::string go = scratch.path("go");
    const EnvChanges env = env_for(server);
    Child first(job({"--once-per", "1h", "-q"}, "dead", "a", ran,
                    "while [ ! -e " + go + " ]; do sleep 0.05; done; exit 1"),
                env);
    REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
    Child doomed(job({"--once-per", "1h", "-q"}, "dead", "b", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("dead", "queue")) == 1; }, 20s));
    Child third(job({"--once-per", "1h"}, "dead", "c", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("dead", "queue")) == 2; }, 20s));
    doomed.signal(SIGKILL);
    doomed.wait();
    std::fclose(std::fopen(go.c_str(), "w"));
    CHECK(first.wait().exit_code == 1);
    // The dead waiter's hand-over goes unclaimed; the occurrence goes with it, to the next.
    const auto result = third.wait(30s);
    INFO(result.err);
    CHECK(result.exit_code == 0);
    CHECK(read_file(ran) == "a\nc\n");
    CHECK(events_of(server, "dead", "skipped").empty());
}

TEST_CASE("run --once-per: a run that lost its slot gives the occurrence back") {
    RedisServer server;
    Connection admin = server.admin();
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const EnvChanges env = env_for(server);
    Child stopped(job({"--once-per", "1h", "--ttl", "1s", "-q"}, "lost", "a", ran, "sleep 30"),
                  env);
    REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
    const std::string holders = semaphore_key("lost", "holders");
    const std::string token = admin.call({"ZRANGE", holders, "0", "0"}).at(0).as_string();
    stopped.signal(SIGSTOP); // no renewal: the lease runs out by the server's clock
    REQUIRE(wait_until(
        [&] {
            const Reply deadline = admin.call({"ZSCORE", holders, token});
            return deadline.is_nil() ||
                   std::atoll(deadline.as_string().c_str()) < server_time_ms(admin);
        },
        20s));
    const auto next = run_redsem(job({"--once-per", "1h", "-w", "0"}, "lost", "b", ran), env);
    CHECK(next.exit_code == 0);
    CHECK(read_file(ran) == "a\nb\n");
    stopped.signal(SIGCONT);
    CHECK(stopped.wait().exit_code == 76);
}

TEST_CASE("run --once-per: a new run may start once the window ended, and gc keeps the claim "
          "until then") {
    RedisServer server;
    Connection admin = server.admin();
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem(job({"--once-per", "2s"}, "hourly", "a", ran), env).exit_code == 0);
    const long long ends = claim_ends_ms(admin, "hourly");
    REQUIRE(ends > 0);
    // gc leaves an idle semaphore whose claim is in force.
    REQUIRE(run_redsem({"gc", "hourly"}, env).exit_code == 0);
    if (server_time_ms(admin) < ends) {
        CHECK(claim_ends_ms(admin, "hourly") == ends);
        CHECK(run_redsem(job({"--once-per", "2s"}, "hourly", "b", ran), env).exit_code == 0);
        if (server_time_ms(admin) < ends) {
            CHECK(read_file(ran) == "a\n");
        }
    }
    REQUIRE(wait_until([&] { return server_time_ms(admin) >= ends; }, 20s));
    REQUIRE(run_redsem(job({"--once-per", "2s"}, "hourly", "c", ran), env).exit_code == 0);
    CHECK(read_file(ran).ends_with("c\n"));
    // A caller without --once-per ignores the claim.
    REQUIRE(run_redsem(job({}, "hourly", "d", ran), env).exit_code == 0);
    CHECK(read_file(ran).ends_with("c\nd\n"));
}

TEST_CASE("a try refused as busy (-w 0) is on record as skipped, with the holder, also with -q") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    const json held = acquire_json(server, {"deploy", "--ttl", "1m", "--label", "release 7"});
    for (const bool quiet : {false, true}) {
        std::vector<std::string> args{"run", "-w", "0", "deploy", "--", "true"};
        if (quiet) {
            args.insert(args.begin() + 1, "-q");
        }
        const auto busy = run_redsem(args, env);
        CHECK(busy.exit_code == 75);
        CHECK(busy.err.empty() == quiet);
    }
    const auto skipped = events_of(server, "deploy", "skipped");
    REQUIRE(skipped.size() == 2);
    for (const json& skip : skipped) {
        CHECK(skip["skipped"] == "busy");
        REQUIRE(skip["by"].size() == 1);
        CHECK(skip["by"][0]["token"] == held["token"]);
        CHECK(skip["by"][0]["label"] == "release 7");
        CHECK(skip["by"][0]["until_ms"].is_null());
    }
    const auto table = run_redsem({"log", "deploy"}, env);
    CHECK(table.out.find("busy: held by ") != std::string::npos);
}

TEST_CASE("a try refused with a slot free, while admission is closed or paused, is on record "
          "as such, not as busy") {
    RedisServer server;
    EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"lost"}, env).exit_code == 0); // closed for the loss grace
    const auto closed = run_redsem({"run", "-w", "0", "deploy", "--", "true"}, env);
    INFO(closed.err);
    CHECK(closed.exit_code == 73);
    env["REDSEM_LOSS_GRACE"] = "0"; // this caller's own grace: admission is open to it
    REQUIRE(run_redsem({"pause", "deploy", "--reason", "freeze"}, env).exit_code == 0);
    const auto paused = run_redsem({"run", "-w", "0", "deploy", "--", "true"}, env);
    INFO(paused.err);
    CHECK(paused.exit_code != 0);
    const auto skipped = events_of(server, "deploy", "skipped");
    REQUIRE(skipped.size() == 2);
    CHECK(skipped[0]["skipped"] == "closed");
    CHECK(skipped[0]["cause"] == "declared");
    CHECK(skipped[0]["by"].empty());
    CHECK(skipped[1]["skipped"] == "paused");
    CHECK(skipped[1]["by"].empty());
    CHECK_FALSE(skipped[1].contains("cause"));
    const auto table = run_redsem({"log", "deploy"}, env);
    CHECK(table.out.find("admission closed: an operator declared") != std::string::npos);
    CHECK(table.out.find("busy") == std::string::npos);
}

TEST_CASE("run --once-per refuses a window it cannot keep") {
    RedisServer server;
    for (const char* window : {"0", "500ms", "367d", "soon", "", "20", "1.5"}) {
        INFO(window);
        const auto refused =
            run_redsem({"run", "--once-per", window, "job", "--", "true"}, env_for(server));
        CHECK(refused.exit_code == 64);
        CHECK(first_line(refused.err).starts_with("redsem: error: --once-per: "));
    }
    // A bare number, which other durations take as seconds, names the unit it lacks.
    const auto bare = run_redsem({"run", "--once-per", "20", "job", "--", "true"}, env_for(server));
    CHECK(first_line(bare.err) == "redsem: error: --once-per: '20' has no unit; give the window "
                                  "with one, as in 20h, 30m or 90s (units: ms, s, m, h, d)");
}

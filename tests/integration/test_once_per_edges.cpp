// One run per occurrence at the edges a fleet meets (issue 51): a done claim on a Redis that
// evicts keys with an expiry, a success whose release comes after its lease ran out (Redis
// hung, redsem stopped, Redis restarted without its data), and a window that ends while a
// caller of its occurrence still waits. Real processes, real signals, a real redis-server;
// the observer is the file each run appends to and the keys as the admin connection reads
// them, not redsem's word.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/occurrence.hpp"

#include <csignal>
#include <cstdlib>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr int k_lost = 76; // ExitCode::lost

// Whether the only holder of `name` has a lease that ran out by the server's clock (or none).
bool lease_ran_out(Connection& admin, const std::string& name, const std::string& token) {
    const Reply deadline = admin.call({"ZSCORE", semaphore_key(name, "holders"), token});
    return deadline.is_nil() || std::atoll(deadline.as_string().c_str()) < server_time_ms(admin);
}

std::string only_holder(Connection& admin, const std::string& name) {
    return admin.call({"ZRANGE", semaphore_key(name, "holders"), "0", "0"}).at(0).as_string();
}

// A test's own Redis (no persistence), its admin connection (the observer of the keys), a
// scratch directory, and `ran`, the file each job appends its host's name to.
struct Fleet {
    RedisServer server;
    Connection admin = server.admin();
    Scratch scratch;
    std::string ran = scratch.path("ran");
    EnvChanges env = env_for(server);
};

} // namespace

TEST_CASE("a done claim is kept from eviction under every volatile policy until its window "
          "ends, and the next host skips after cache traffic evicted keys") {
    for (const std::string policy : {"volatile-lru", "volatile-ttl", "volatile-random"}) {
        DYNAMIC_SECTION(policy) {
            RedisServer::Options options;
            options.extra_args = {"--maxmemory", "3mb", "--maxmemory-policy", policy};
            RedisServer server(options);
            Connection admin = server.admin();
            const Scratch scratch;
            const std::string ran = scratch.path("ran");
            const EnvChanges env = env_for(server);
            REQUIRE(
                run_redsem(job({"--once-per", "20h", "-q"}, "nightly", "a", ran), env).exit_code ==
                0);
            // Idle, with a claim in force: nothing of it carries an expiry.
            CHECK(admin.call({"PTTL", semaphore_key("nightly", "state")}).as_integer() == -1);
            // Cache traffic with ordinary expiries, well past maxmemory.
            const std::string value(20 * 1024, 'x');
            const long long before = evicted_keys(admin);
            for (int i = 0; i < 600; ++i) {
                (void)admin.command(std::vector<std::string>{"SET", "cache:" + std::to_string(i),
                                                             value, "EX", "600"});
            }
            REQUIRE(evicted_keys(admin) > before);
            CHECK(claim_of(admin, "nightly").find(" done ") != std::string::npos);
            const auto host_c =
                run_redsem(job({"--once-per", "20h", "-q", "-w", "0"}, "nightly", "c", ran), env);
            INFO(host_c.err);
            CHECK(host_c.exit_code == 0);
            CHECK(read_file(ran) == "a\n");
        }
    }
}

TEST_CASE_METHOD(Fleet, "a claim's keys get their expiry back once its window ended, and gc then "
                        "deletes the idle semaphore") {
    REQUIRE(run_redsem(job({"--once-per", "2s"}, "brief", "a", ran), env).exit_code == 0);
    const long long ends = claim_ends_ms(admin, "brief");
    REQUIRE(ends > 0);
    const std::string state = semaphore_key("brief", "state");
    REQUIRE(run_redsem({"gc", "brief"}, env).exit_code == 0);
    if (server_time_ms(admin) < ends) {
        CHECK(admin.call({"PTTL", state}).as_integer() == -1); // kept, and pinned
        CHECK(admin.call({"EXISTS", state}).as_integer() == 1);
    }
    REQUIRE(wait_until([&] { return server_time_ms(admin) >= ends; }, 20s));
    // Any later call gives the keys their expiry back: a caller without --once-per, say.
    REQUIRE(run_redsem(job({}, "brief", "b", ran), env).exit_code == 0);
    CHECK(admin.call({"PTTL", state}).as_integer() > 0);
    REQUIRE(run_redsem({"gc", "brief"}, env).exit_code == 0);
    CHECK(admin.call({"EXISTS", state}).as_integer() == 0);
}

TEST_CASE_METHOD(Fleet, "a success whose release comes after its lease ran out, while Redis "
                        "hung, marks the occurrence done, and the next host skips") {
    const std::string up = scratch.path("up");
    const std::string go = scratch.path("go");
    Child host_a(job({"--once-per", "1h", "--ttl", "3s", "-q"}, "late", "a", ran, until_go(up, go)),
                 env);
    REQUIRE(wait_for_file(up, 20s));
    server.signal(SIGSTOP); // Redis hangs: no renewal, no release can land
    const auto stopped_at = std::chrono::steady_clock::now();
    touch(go); // the job ends with status 0 while Redis cannot answer
    // Redis's clock runs on while it is stopped: once a whole ttl (3s) has passed here since
    // the last renewal could have landed, the lease has run out by the server's clock too.
    // (Nothing to poll while the server is stopped.)
    std::this_thread::sleep_until(stopped_at + 4s);
    server.signal(SIGCONT);
    const auto result = host_a.wait(60s);
    INFO(result.err);
    CHECK(result.exit_code == 0);
    CHECK(claim_of(admin, "late").find(" done ") != std::string::npos);
    const auto host_b = run_redsem(job({"--once-per", "1h", "-w", "0"}, "late", "b", ran), env);
    INFO(host_b.err);
    CHECK(host_b.exit_code == 0);
    CHECK(host_b.err.find("skipped") != std::string::npos);
    CHECK(read_file(ran) == "a\n");
    const auto released = events_of(server, "late", "released");
    REQUIRE(released.size() == 1);
    CHECK(released[0]["exit_status"] == 0);
    CHECK(released[0]["late"] == "done");
    CHECK(run_redsem({"log", "late"}, env).out.find("the occurrence is done") != std::string::npos);
}

TEST_CASE_METHOD(Fleet, "a success that comes after another host took the occurrence over says "
                        "so on stderr, also with -q, exits 76, and is on record") {
    const std::string up = scratch.path("up");
    const std::string go = scratch.path("go");
    Child host_a(
        job({"--once-per", "1h", "--ttl", "1s", "-q"}, "taken", "a", ran, until_go(up, go)), env);
    REQUIRE(wait_for_file(up, 20s));
    const std::string token = only_holder(admin, "taken");
    host_a.signal(SIGSTOP); // redsem stopped (swap, a paused VM): its lease runs out
    touch(go);              // the job ends with status 0 meanwhile
    REQUIRE(wait_until([&] { return lease_ran_out(admin, "taken", token); }, 20s));
    const auto host_b = run_redsem(job({"--once-per", "1h", "-q"}, "taken", "b", ran), env);
    CHECK(host_b.exit_code == 0);
    REQUIRE(read_file(ran) == "a\nb\n"); // at least once: the lapsed claim was given back
    host_a.signal(SIGCONT);
    const auto result = host_a.wait(60s);
    INFO(result.err);
    CHECK(result.exit_code == k_lost);
    CHECK(result.err.find("another run has claimed this occurrence since") != std::string::npos);
    bool late_on_record = false;
    for (const json& event : events_of(server, "taken", "released")) {
        late_on_record = late_on_record || event["late"] == "taken";
    }
    CHECK(late_on_record);
}

TEST_CASE_METHOD(Fleet, "a success whose claim Redis lost while it was down says so, exits 76, "
                        "and the next host runs the job") {
    const std::string up = scratch.path("up");
    const std::string go = scratch.path("go");
    const std::string done = scratch.path("done");
    Child host_a(job({"--once-per", "1h", "--ttl", "3s", "-q"}, "gone", "a", ran,
                     until_go(up, go) + "; touch " + done),
                 env);
    REQUIRE(wait_for_file(up, 20s));
    server.signal(SIGSTOP); // nothing lands from here on: no renewal, no release
    touch(go);
    REQUIRE(wait_for_file(done, 20s)); // the job succeeded
    server.kill();                     // and Redis goes down, and comes back without the claim
    server.restart();
    const auto result = host_a.wait(60s);
    INFO(result.err);
    CHECK(result.exit_code == k_lost);
    CHECK(result.err.find("the occurrence's claim is gone") != std::string::npos);
    // At least once (the default): the next host runs it, once admission lets it in.
    EnvChanges throwaway = env;
    throwaway["REDSEM_LOSS_GRACE"] = "0";
    const auto host_b =
        run_redsem(job({"--once-per", "1h", "-q", "-w", "0"}, "gone", "b", ran), throwaway);
    CHECK(host_b.exit_code == 0);
    CHECK(read_file(ran) == "a\nb\n");
}

TEST_CASE_METHOD(Fleet, "a waiter of an occurrence skips when its run succeeds after the window "
                        "ended, and is never let in beside that run (limits 1 and 2)") {
    for (const int limit : {1, 2}) {
        DYNAMIC_SECTION("limit " << limit) {
            const std::string up = scratch.path("up");
            const std::string go = scratch.path("go");
            const std::string n = std::to_string(limit);
            Child host_a(
                job({"--once-per", "2s", "-n", n, "-q"}, "short", "a", ran, until_go(up, go)), env);
            REQUIRE(wait_for_file(up, 20s));
            const long long ends = claim_ends_ms(admin, "short");
            REQUIRE(ends > 0);
            Child host_b(job({"--once-per", "2s", "-n", n, "-q"}, "short", "b", ran), env);
            const std::string queue = semaphore_key("short", "queue");
            const std::string alive = semaphore_key("short", "alive");
            REQUIRE(wait_until([&] { return zcard(admin, queue) == 1; }, 20s));
            const std::string waiter = admin.call({"ZRANGE", queue, "0", "0"}).at(0).as_string();
            // Past the window's end, and until the waiter refreshed its place after it: it
            // still waits, and nobody holds a slot beside the run.
            REQUIRE(wait_until([&] { return server_time_ms(admin) > ends; }, 20s));
            const Reply seen = admin.call({"ZSCORE", alive, waiter});
            REQUIRE_FALSE(seen.is_nil());
            const std::string refreshed_before = seen.as_string();
            REQUIRE(wait_until(
                [&] {
                    const Reply now = admin.call({"ZSCORE", alive, waiter});
                    return now.is_nil() || now.as_string() != refreshed_before;
                },
                20s));
            CHECK(zcard(admin, semaphore_key("short", "holders")) == 1);
            CHECK(read_file(ran) == "a\n");
            touch(go);
            const auto a = host_a.wait(30s);
            CHECK(a.exit_code == 0);
            CHECK(a.err.find("longer than its --once-per window of 2s") != std::string::npos);
            const auto b = host_b.wait(30s);
            INFO(b.err);
            CHECK(b.exit_code == 0);
            CHECK(read_file(ran) == "a\n");
        }
    }
}

TEST_CASE_METHOD(Fleet, "status shows the claim of an occurrence in force, idle or running, in "
                        "the table, JSON and Prometheus") {
    const std::string up = scratch.path("up");
    const std::string go = scratch.path("go");
    Child host_a(job({"--once-per", "20h", "-q", "--label", "nightly backup"}, "shown", "a", ran,
                     until_go(up, go)),
                 env);
    REQUIRE(wait_for_file(up, 20s));
    const json running = json::parse(run_redsem({"status", "shown", "--json"}, env).out);
    CHECK(running["occurrence"]["stage"] == "run");
    CHECK(running["occurrence"]["label"] == "nightly backup");
    CHECK(running["occurrence"]["token"] == only_holder(admin, "shown"));
    touch(go);
    REQUIRE(host_a.wait(30s).exit_code == 0);

    const auto table = run_redsem({"status", "shown"}, env);
    INFO(table.out);
    CHECK(table.out.find("shown: no holders and no waiters") == 0);
    CHECK(table.out.find("occurrence: ran on ") != std::string::npos);
    CHECK(table.out.find("'nightly backup') at ") != std::string::npos);
    CHECK(table.out.find("and succeeded; callers with --once-per skip until ") !=
          std::string::npos);
    const json done = json::parse(run_redsem({"status", "shown", "--json"}, env).out);
    CHECK(done["occurrence"]["stage"] == "done");
    CHECK(done["occurrence"]["until_ms"].get<long long>() -
              done["occurrence"]["since_ms"].get<long long>() ==
          20 * 3600'000LL);
    const json listed = json::parse(run_redsem({"status", "--json"}, env).out);
    REQUIRE(listed.size() == 1);
    CHECK(listed[0]["occurrence"]["stage"] == "done");
    const std::string metrics = run_redsem({"status", "--format", "prometheus"}, env).out;
    CHECK(metrics.find("redsem_occurrence_done{prefix=\"redsem\",name=\"shown\"} 1\n") !=
          std::string::npos);
    // Without a claim: none shown.
    REQUIRE(run_redsem({"run", "plain", "--", "true"}, env).exit_code == 0);
    CHECK(json::parse(run_redsem({"status", "plain", "--json"}, env).out)["occurrence"].is_null());
    CHECK(run_redsem({"status", "--format", "prometheus"}, env)
              .out.find("redsem_occurrence_done{prefix=\"redsem\",name=\"plain\"} 0\n") !=
          std::string::npos);
}

TEST_CASE_METHOD(Fleet, "run --at-most-once skips, on record and on stderr also with -q, an "
                        "occurrence whose claim a restart lost, and without it the job runs "
                        "again") {
    env["REDSEM_LOSS_GRACE"] = "0"; // the restarted Redis is a throwaway one: admit at once
    const std::vector<std::string> strict{"--once-per", "1h", "--at-most-once", "-q", "-w", "0"};
    REQUIRE(run_redsem(job(strict, "billing", "a", ran), env).exit_code == 0);
    server.restart();
    const auto host_b = run_redsem(job(strict, "billing", "b", ran), env);
    INFO(host_b.err);
    CHECK(host_b.exit_code == 0);
    CHECK(read_file(ran) == "a\n");
    CHECK(line_count(host_b.err) == 1);
    CHECK(host_b.err.find("redsem: skipped 'billing': Redis may have lost data at ") == 0);
    CHECK(host_b.err.find("--at-most-once the job does not run again before ") !=
          std::string::npos);
    const auto skipped = events_of(server, "billing", "skipped");
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0]["skipped"] == "lost");
    CHECK(skipped[0]["cause"] == "start");
    CHECK(skipped[0]["lost_at_ms"].is_number_integer());
    CHECK(run_redsem({"log", "billing"}, env).out.find("Redis may have lost data at ") !=
          std::string::npos);
    // The default, at least once: the job runs again, and its claim then covers the
    // occurrence for every caller.
    const auto host_c =
        run_redsem(job({"--once-per", "1h", "-q", "-w", "0"}, "billing", "c", ran), env);
    CHECK(host_c.exit_code == 0);
    CHECK(read_file(ran) == "a\nc\n");
    const auto host_d = run_redsem(job(strict, "billing", "d", ran), env);
    CHECK(host_d.exit_code == 0);
    CHECK(host_d.err.empty()); // a plain skip: the run is known, and -q keeps it quiet
    CHECK(read_file(ran) == "a\nc\n");
}

TEST_CASE_METHOD(Fleet, "run --at-most-once skips an occurrence whose run left without finishing") {
    const std::string up = scratch.path("up");
    Child host_a(job({"--once-per", "1h", "--ttl", "1s", "-q"}, "mailout", "a", ran,
                     "touch " + up + "; sleep 60"),
                 env);
    REQUIRE(wait_for_file(up, 20s));
    const std::string token = only_holder(admin, "mailout");
    host_a.signal(SIGSTOP); // its lease runs out while the job may be half done
    REQUIRE(wait_until([&] { return lease_ran_out(admin, "mailout", token); }, 20s));
    const auto host_b = run_redsem(
        job({"--once-per", "1h", "--at-most-once", "-q", "-w", "0"}, "mailout", "b", ran), env);
    INFO(host_b.err);
    CHECK(host_b.exit_code == 0);
    CHECK(host_b.err.find("left without finishing") != std::string::npos);
    CHECK(read_file(ran) == "a\n");
    const auto skipped = events_of(server, "mailout", "skipped");
    REQUIRE(skipped.size() == 1);
    CHECK(skipped[0]["skipped"] == "lapsed");
    CHECK(skipped[0]["by"][0]["token"] == token);
    host_a.signal(SIGKILL);
    host_a.wait();
}

TEST_CASE_METHOD(Fleet, "run --at-most-once skips an occurrence whose run, handed the slot by "
                        "a release, left without finishing") {
    const std::string up = scratch.path("up");
    const std::string holder = acquire_json(server, {"handoff"})["token"];
    Child host_a(job({"--once-per", "1h", "--ttl", "1s", "-q"}, "handoff", "a", ran,
                     "touch " + up + "; sleep 60"),
                 env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("handoff", "queue")) == 1; }, 20s));
    REQUIRE(run_redsem({"release", "handoff", holder}, env).exit_code == 0);
    REQUIRE(wait_for_file(up, 20s)); // A collected the hand-over (a BLPOP) and its job began
    const std::string token = only_holder(admin, "handoff");
    host_a.signal(SIGSTOP); // its lease runs out while the job may be half done
    REQUIRE(wait_until([&] { return lease_ran_out(admin, "handoff", token); }, 20s));
    const auto host_b = run_redsem(
        job({"--once-per", "1h", "--at-most-once", "-q", "-w", "0"}, "handoff", "b", ran), env);
    INFO(host_b.err);
    CHECK(host_b.exit_code == 0);
    CHECK(host_b.err.find("left without finishing") != std::string::npos);
    CHECK(read_file(ran) == "a\n");
    host_a.signal(SIGKILL);
    host_a.wait();
}

TEST_CASE("run --at-most-once without --once-per is a usage error") {
    RedisServer server;
    const auto refused =
        run_redsem({"run", "--at-most-once", "job", "--", "true"}, env_for(server));
    CHECK(refused.exit_code == 64);
    CHECK(first_line(refused.err) ==
          "redsem: error: --at-most-once needs --once-per WINDOW: it says what a lost claim of "
          "an occurrence means");
}

TEST_CASE_METHOD(Fleet, "a job that fails is tried on as many hosts as --attempts allows, then "
                        "the occurrence is skipped, with the attempts linked on record") {
    const std::vector<std::string> cron{"--once-per", "1h", "-q", "-w", "0"};
    // The default: two attempts.
    CHECK(run_redsem(job(cron, "nightly", "a", ran, "exit 1"), env).exit_code == 1);
    CHECK(claim_of(admin, "nightly").find(" failed 1 ") != std::string::npos);
    CHECK(run_redsem(job(cron, "nightly", "b", ran, "exit 2"), env).exit_code == 2);
    const auto host_c = run_redsem(job({"--once-per", "1h", "-w", "0"}, "nightly", "c", ran), env);
    INFO(host_c.err);
    CHECK(host_c.exit_code == 0);
    CHECK(read_file(ran) == "a\nb\n");
    CHECK(first_line(host_c.err)
              .find("redsem: skipped 'nightly': this occurrence was tried 2 "
                    "times, the most --attempts allows; the last run, on ") == 0);
    CHECK(host_c.err.find("failed (exit 2); the next run may start at ") != std::string::npos);
    // Quiet with -q: the failed runs spoke for themselves.
    const auto host_d = run_redsem(job(cron, "nightly", "d", ran), env);
    CHECK(host_d.exit_code == 0);
    CHECK(host_d.err.empty());

    // On record: the second grant names the first run, the skips name the last one.
    const auto grants = events_of(server, "nightly", "acquired");
    REQUIRE(grants.size() == 2);
    CHECK(grants[0].count("attempt") == 0);
    CHECK(grants[1]["attempt"] == 2);
    CHECK(grants[1]["after"] == grants[0]["token"]);
    const auto skips = events_of(server, "nightly", "skipped");
    REQUIRE(skips.size() == 2);
    CHECK(skips[0]["skipped"] == "attempts");
    CHECK(skips[0]["by"][0]["token"] == grants[1]["token"]);
    CHECK(skips[0]["by"][0]["attempt"] == 2);
    CHECK(skips[0]["by"][0]["exit_status"] == 2);
    const std::string log = run_redsem({"log", "nightly"}, env).out;
    CHECK(log.find("attempt 2 of the occurrence (after ") != std::string::npos);
    CHECK(log.find("tried 2 times (--attempts); the last run, on ") != std::string::npos);
    const json shown = json::parse(run_redsem({"status", "nightly", "--json"}, env).out);
    CHECK(shown["occurrence"]["stage"] == "failed");
    CHECK(shown["occurrence"]["attempt"] == 2);
    CHECK(shown["occurrence"]["exit_status"] == 2);
    CHECK(run_redsem({"status", "nightly"}, env).out.find("(attempt 2) failed (exit 2)") !=
          std::string::npos);

    // A caller that allows more attempts makes one more; then a success ends the occurrence
    // for all.
    std::vector<std::string> patient = cron;
    patient.insert(patient.end(), {"--attempts", "3"});
    CHECK(run_redsem(job(patient, "nightly", "e", ran), env).exit_code == 0);
    CHECK(run_redsem(job(patient, "nightly", "f", ran), env).exit_code == 0);
    CHECK(read_file(ran) == "a\nb\ne\n");
    CHECK(events_of(server, "nightly", "acquired").back()["attempt"] == 3);
}

TEST_CASE_METHOD(Fleet, "with --attempts 1 a waiter skips when the run it waited for fails, and "
                        "a run that left without finishing counts as an attempt") {
    const std::string go = scratch.path("go");
    const std::vector<std::string> once{"--once-per", "1h", "--attempts", "1"};
    Child host_a(
        job(once, "single", "a", ran, "while [ ! -e " + go + " ]; do sleep 0.05; done; exit 1"),
        env);
    REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
    Child host_b(job(once, "single", "b", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("single", "queue")) == 1; }, 20s));
    touch(go);
    CHECK(host_a.wait().exit_code == 1);
    const auto waited = host_b.wait();
    INFO(waited.err);
    CHECK(waited.exit_code == 0);
    CHECK(waited.err.find("this occurrence was tried 1 time, the most --attempts allows") !=
          std::string::npos);
    CHECK(read_file(ran) == "a\n");
    CHECK(zcard(admin, semaphore_key("single", "queue")) == 0);

    // A run whose lease ran out (stopped past it) used its occurrence's only attempt too.
    const std::string up = scratch.path("up");
    Child stopped(job({"--once-per", "1h", "--attempts", "1", "--ttl", "1s", "-q"}, "stalled", "c",
                      ran, "touch " + up + "; sleep 60"),
                  env);
    REQUIRE(wait_for_file(up, 20s));
    const std::string token = only_holder(admin, "stalled");
    stopped.signal(SIGSTOP);
    REQUIRE(wait_until([&] { return lease_ran_out(admin, "stalled", token); }, 20s));
    const auto next = run_redsem(job(once, "stalled", "d", ran), env);
    INFO(next.err);
    CHECK(next.exit_code == 0);
    CHECK(next.err.find("left without finishing; the next run may start at ") != std::string::npos);
    CHECK(read_file(ran) == "a\nc\n");
    stopped.signal(SIGKILL);
    stopped.wait();
}

TEST_CASE_METHOD(Fleet, "a waiter that was handed the slot but died before it ran (stopped as "
                        "the hand-over reached it) does not use up an attempt") {
    const std::string go = scratch.path("go");
    const std::vector<std::string> cron{"--once-per", "1h", "--ttl", "2s", "-q"};
    Child host_a(
        job(cron, "handed", "a", ran, "while [ ! -e " + go + " ]; do sleep 0.05; done; exit 1"),
        env);
    REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
    const std::string queue = semaphore_key("handed", "queue");
    Child host_b(job(cron, "handed", "b", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 1; }, 20s));
    Child host_c(job(cron, "handed", "c", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 2; }, 20s));
    // B is blocked on its wake list: the hand-over is served to its connection, and B never
    // reads it.
    host_b.signal(SIGSTOP);
    touch(go);
    CHECK(host_a.wait().exit_code == 1);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 1; }, 20s)); // handed to B
    host_b.signal(SIGKILL);
    host_b.wait();
    // C runs once B's lease is gone: as the second attempt, after A's run.
    const auto result = host_c.wait(30s);
    INFO(result.err);
    CHECK(result.exit_code == 0);
    CHECK(read_file(ran) == "a\nc\n");
    const auto grants = events_of(server, "handed", "acquired");
    REQUIRE(grants.size() == 3);
    CHECK(grants[2]["attempt"] == 2);
    CHECK(grants[2]["after"] == grants[0]["token"]);
    CHECK(admin.call({"HEXISTS", semaphore_key("handed", "state"), "occurrence_prior"})
              .as_integer() == 0);
}

TEST_CASE_METHOD(Fleet, "waiters of an occurrence whose window ended while its run ran are its "
                        "next attempts when that run fails") {
    const std::string go = scratch.path("go");
    const std::vector<std::string> cron{"--once-per", "5s", "-q"};
    Child host_a(
        job(cron, "long", "a", ran, "while [ ! -e " + go + " ]; do sleep 0.05; done; exit 3"), env);
    REQUIRE(wait_until([&] { return read_file(ran) == "a\n"; }, 20s));
    const std::string queue = semaphore_key("long", "queue");
    const long long ends_ms = claim_ends_ms(admin, "long");
    Child host_b(job(cron, "long", "b", ran, "exit 3"), env);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 1; }, 20s));
    Child host_c(job(cron, "long", "c", ran, "exit 3"), env);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 2; }, 20s));
    // (The window leaves a loaded machine seconds to start the waiters inside it.)
    REQUIRE(server_time_ms(admin) < ends_ms);
    REQUIRE(wait_until([&] { return server_time_ms(admin) > ends_ms; }, 20s));
    touch(go);
    CHECK(host_a.wait().exit_code == 3);
    CHECK(host_b.wait().exit_code == 3);
    const auto skipped = host_c.wait();
    CHECK(skipped.exit_code == 0);
    CHECK(read_file(ran) == "a\nb\n");
    const auto grants = events_of(server, "long", "acquired");
    REQUIRE(grants.size() == 2);
    CHECK(grants[1]["attempt"] == 2);
    const auto skips = events_of(server, "long", "skipped");
    REQUIRE(skips.size() == 1);
    CHECK(skips[0]["skipped"] == "attempts");
}

TEST_CASE("run --attempts needs --once-per and a whole number of at least 1") {
    RedisServer server;
    const EnvChanges env = env_for(server);
    const auto alone = run_redsem({"run", "--attempts", "2", "job", "--", "true"}, env);
    CHECK(alone.exit_code == 64);
    CHECK(first_line(alone.err) == "redsem: error: --attempts needs --once-per WINDOW: it bounds "
                                   "the runs of one occurrence");
    for (const std::string bad : {"0", "two", "1.5", "1001"}) {
        INFO(bad);
        const auto refused =
            run_redsem({"run", "--once-per", "1h", "--attempts", bad, "job", "--", "true"}, env);
        CHECK(refused.exit_code == 64);
        CHECK(first_line(refused.err) ==
              "redsem: error: --attempts: '" + bad + "' is not a whole number from 1 to 1000");
    }
}

TEST_CASE_METHOD(Fleet, "a waiter stopped for so long that it lost its place still belongs to "
                        "the occurrence it started in when it queues again after the window") {
    const std::string up = scratch.path("up");
    const std::string go = scratch.path("go");
    Child host_a(job({"--once-per", "3s", "-n", "2", "-q"}, "paused", "a", ran, until_go(up, go)),
                 env);
    REQUIRE(wait_for_file(up, 20s));
    const long long ends = claim_ends_ms(admin, "paused");
    const std::string queue = semaphore_key("paused", "queue");
    Child host_b(job({"--once-per", "3s", "-n", "2", "-q"}, "paused", "b", ran), env);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 1; }, 20s));
    REQUIRE(server_time_ms(admin) < ends); // it queued inside the window
    host_b.signal(SIGSTOP); // a laptop lid: it stops refreshing its place, and is dropped
    REQUIRE(wait_until(
        [&] {
            // Dropped once its liveness ran out, by gc here (a call on the semaphore prunes).
            std::this_thread::sleep_for(200ms);
            REQUIRE(run_redsem({"gc", "paused"}, env).exit_code == 0);
            return zcard(admin, queue) == 0 && server_time_ms(admin) > ends;
        },
        30s));
    host_b.signal(SIGCONT); // it queues again, after the window: still of the first occurrence
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 1; }, 20s));
    CHECK(zcard(admin, semaphore_key("paused", "holders")) == 1);
    touch(go);
    CHECK(host_a.wait(30s).exit_code == 0);
    const auto b = host_b.wait(30s);
    INFO(b.err);
    CHECK(b.exit_code == 0);
    CHECK(read_file(ran) == "a\n");
}

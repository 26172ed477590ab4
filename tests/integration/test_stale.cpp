// Never act on a stale lease: a client stopped past its lease, a lost lease whose command
// ignores SIGTERM, a Redis that lost its data, a hand-over to a dead waiter, phantom gc
// entries, per-slot fences, and a Redis that is still loading. Real processes, real signals,
// a real redis-server.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "semaphore/semaphore.hpp"
#include "support/helpers.hpp"
#include "support/skip.hpp"
#include "util/token.hpp"

#include <csignal>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

// The holder of `name`'s only slot, by token, from the holders key.
std::string only_holder(Connection& admin, const std::string& name) {
    const Reply holders = admin.call({"ZRANGE", "redsem:{" + name + "}:holders", "0", "-1"});
    return holders.as_array().size() == 1 ? holders.at(0).as_string() : "";
}

// What a Redis that lost a grant but kept the queue entry looks like (a restart from an older
// snapshot, a failback to a replica that never had the grant): `token` queued behind "other".
void roll_back_to_queued(Connection& admin, const Keys& keys, const std::string& token) {
    REQUIRE(release_by_script(admin, keys, token) == ReleaseOutcome::released);
    REQUIRE(reply_kind(acquire_by_script(admin, keys, "other", 600s, false)) == "ok");
    REQUIRE(reply_kind(acquire_by_script(admin, keys, token, 600s, true)) == "wait");
}

} // namespace

TEST_CASE("a run stopped while its grant arrives never starts its command on a lost lease") {
    RedisServer server;
    Connection admin = server.admin();
    const std::string started = server.dir() + "/started";
    const auto holder = acquire_json(server, {"stale", "--ttl", "60s"});
    Child waiter({"run", "stale", "--ttl", "1s", "--", "touch", started}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{stale}:queue") == 1; }, 10s));
    // Stopped while blocked for its turn (a paused VM, a swapped-out process): the release
    // hands it the slot, and its 1s lease runs out while it cannot act.
    waiter.signal(SIGSTOP);
    REQUIRE(run_redsem({"release", "stale", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    // Someone else takes the slot once the stopped waiter's grant has lapsed.
    const auto next =
        run_redsem({"acquire", "stale", "--ttl", "60s", "-w", "10s", "--json"}, env_for(server));
    REQUIRE(next.exit_code == 0);
    const json next_lease = json::parse(next.out);
    waiter.signal(SIGCONT);
    // The resumed waiter must find out that its grant is gone and queue again, not run.
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{stale}:queue") == 1; }, 10s));
    CHECK_FALSE(std::filesystem::exists(started));
    CHECK(only_holder(admin, "stale") == next_lease["token"].get<std::string>());
    // Its turn comes after the new holder's.
    REQUIRE(
        run_redsem({"release", "stale", next_lease["token"].get<std::string>()}, env_for(server))
            .exit_code == 0);
    CHECK(waiter.wait(10s).exit_code == 0);
    CHECK(std::filesystem::exists(started));
}

TEST_CASE("an acquire stopped while its grant arrives never prints a token that ran out") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"stale2", "--ttl", "60s"});
    Child waiter({"acquire", "stale2", "--ttl", "1s", "--json"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{stale2}:queue") == 1; }, 10s));
    waiter.signal(SIGSTOP);
    REQUIRE(run_redsem({"release", "stale2", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto next =
        run_redsem({"acquire", "stale2", "--ttl", "60s", "-w", "10s", "--json"}, env_for(server));
    REQUIRE(next.exit_code == 0);
    const json next_lease = json::parse(next.out);
    waiter.signal(SIGCONT);
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{stale2}:queue") == 1; }, 10s));
    CHECK(waiter.out_so_far().empty()); // no token printed while another holds the slot
    REQUIRE(
        run_redsem({"release", "stale2", next_lease["token"].get<std::string>()}, env_for(server))
            .exit_code == 0);
    const auto result = waiter.wait(10s);
    REQUIRE(result.exit_code == 0);
    const json lease = json::parse(result.out);
    // The token it prints holds the slot now, with a deadline still ahead.
    CHECK(only_holder(admin, "stale2") == lease["token"].get<std::string>());
    CHECK(lease["deadline_ms"].get<long long>() > server_time_ms(admin));
    CHECK(lease["fence"].get<long long>() > next_lease["fence"].get<long long>());
}

TEST_CASE("an acquire stopped while its grant arrives, resumed with part of the lease spent, "
          "prints a token with its whole ttl ahead") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"late", "--ttl", "60s"});
    // A 4s lease: its safety margin is 1s.
    Child waiter({"acquire", "late", "--ttl", "4s", "--json"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{late}:queue") == 1; }, 10s));
    waiter.signal(SIGSTOP);
    REQUIRE(run_redsem({"release", "late", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const std::string token = only_holder(admin, "late");
    REQUIRE_FALSE(token.empty());
    const long long handed_over_deadline =
        std::stoll(admin.call({"ZSCORE", "redsem:{late}:holders", token}).as_string());
    // Resumed once more than the margin of the grant is spent, while it still holds: a script
    // given this token would overrun a lease with under 2.5s left.
    REQUIRE(wait_until([&] { return server_time_ms(admin) >= handed_over_deadline - 2500; }, 10s));
    waiter.signal(SIGCONT);
    const auto result = waiter.wait(10s);
    REQUIRE(result.exit_code == 0);
    const json lease = json::parse(result.out);
    CHECK(lease["token"] == token);
    // Renewed before it was printed (or, had it run out meanwhile, granted again).
    CHECK(lease["deadline_ms"].get<long long>() > handed_over_deadline);
    CHECK(only_holder(admin, "late") == token);
}

TEST_CASE("a lost lease: a command that ignores SIGTERM is killed before the lease ends") {
    RedisServer server;
    Connection admin = server.admin();
    const std::string ready = server.dir() + "/ready";
    const std::string pid_file = server.dir() + "/pid";
    // The command traps TERM and carries on; --kill-after 10s is longer than the lease.
    Child run({"run", "stubborn", "--ttl", "4s", "--kill-after", "10s", "--", "sh", "-c",
               "trap '' TERM; echo $$ > " + pid_file + "; touch " + ready +
                   "; while :; do sleep 0.05; done"},
              env_for(server));
    REQUIRE(wait_for_file(ready, 10s));
    const int command_pid = std::stoi(read_file(pid_file));
    // Redis stops answering: no renewal can be confirmed from now on, so the server may hand
    // the slot on at most one ttl (4s) after now.
    admin.call({"CLIENT", "PAUSE", "8000", "ALL"});
    const auto paused_at = Clock::now();
    REQUIRE(wait_until([&] { return process_gone(command_pid); }, 15s));
    const auto dead_after = Clock::now() - paused_at;
    CHECK(dead_after < 4s);
    const auto result = run.wait(20s);
    CHECK(result.exit_code == 76);
}

TEST_CASE("Redis restarted without its data: fences go on rising and nobody is admitted while "
          "an old lease may run") {
    RedisServer server; // no persistence
    const std::string ready = server.dir() + "/ready";
    const std::string fence_file = server.dir() + "/fence";
    const std::string ended = server.dir() + "/ended";
    Child old_holder(
        {"run", "amnesia", "--ttl", "3s", "--", "sh", "-c",
         "echo $REDSEM_FENCE > " + fence_file + "; touch " + ready + "; sleep 30; touch " + ended},
        env_for(server));
    REQUIRE(wait_for_file(ready, 10s));
    const long long old_fence = std::stoll(read_file(fence_file));
    // The new server process starts (and loses the data) after this instant.
    const long long restarting_ns = real_now_ns();
    server.restart();
    // A newcomer: the server forgot the old lease, but must not admit anyone until its loss
    // grace (4s) has passed since the restart, by which time the old command has stopped.
    const auto newcomer = run_redsem(
        {"acquire", "amnesia", "--ttl", "3s", "--loss-grace", "4s", "--json"}, env_for(server));
    const long long admitted_ns = real_now_ns();
    REQUIRE(newcomer.exit_code == 0);
    // (The restart lost the epoch key too: what redsem knows is when the server started.)
    CHECK(newcomer.err.find("has no record of redsem") != std::string::npos);
    CHECK(newcomer.err.find("forgot who held 'amnesia'") != std::string::npos);
    CHECK(admitted_ns - restarting_ns >= 4'000'000'000LL);
    // The old command was stopped (its renewal found nothing) before the newcomer got in.
    const auto old_result = old_holder.wait(20s);
    CHECK(old_result.exit_code == 76);
    CHECK_FALSE(std::filesystem::exists(ended));
    // The new fence is above every fence handed out before the loss.
    CHECK(json::parse(newcomer.out)["fence"].get<long long>() > old_fence);
}

TEST_CASE("a brand-new Redis admits nobody until the loss grace has passed since it started") {
    RedisServer::Options options;
    options.new_data_set = true;
    RedisServer server(options);
    const auto started = Clock::now();
    // -w 0: refused at once with its own exit code (not 75: nobody holds a slot), saying why
    // and what the way out costs on a Redis in use; -E does not change it.
    const auto refused = run_redsem(
        {"acquire", "fresh", "-w", "0", "-E", "0", "--loss-grace", "3s"}, env_for(server));
    CHECK(refused.exit_code == 73);
    CHECK(line_count(refused.err) == 1);
    CHECK(refused.err.find("redsem: error: Redis has no record of redsem and started") == 0);
    CHECK(refused.err.find("REDSEM_LOSS_GRACE=0 admit this caller at once: on one in use it lets "
                           "it in beside a holder Redis forgot") != std::string::npos);
    // Waiting: admitted once the grace has passed, and no sooner.
    const auto waited =
        run_redsem({"acquire", "fresh", "--loss-grace", "3s", "--json"}, env_for(server));
    CHECK(waited.exit_code == 0);
    CHECK(Clock::now() - started >= 2s);
    // -q does not hide it (it is not "busy"); --loss-grace 0 (or REDSEM_LOSS_GRACE=0) admits
    // at once.
    RedisServer::Options other;
    other.new_data_set = true;
    RedisServer second(other);
    const auto quiet = run_redsem({"acquire", "q", "-w", "0", "-q"}, env_for(second));
    CHECK(quiet.exit_code == 73);
    CHECK(quiet.err.find("nobody is admitted for") != std::string::npos);
    EnvChanges env = env_for(second);
    env["REDSEM_LOSS_GRACE"] = "0";
    CHECK(run_redsem({"acquire", "q", "-w", "0"}, env).exit_code == 0);
    CHECK(run_redsem({"acquire", "q2", "-w", "0", "--loss-grace", "soon"}, env_for(second))
              .exit_code == 64);
    env["REDSEM_LOSS_GRACE"] = "-1s";
    const auto bad_env = run_redsem({"acquire", "q3", "-w", "0"}, env);
    CHECK(bad_env.exit_code == 64);
    CHECK(bad_env.err.find("REDSEM_LOSS_GRACE") != std::string::npos);
}

TEST_CASE("the cron form with --through-loss runs once admission opens on a Redis restarted "
          "just before, and still skips a busy semaphore at once") {
    RedisServer::Options options;
    options.new_data_set = true;
    RedisServer server(options);
    const auto started = Clock::now();
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    // Says why once, waits until admission opens, and runs the job.
    const auto cron = run_redsem({"run", "-w", "0", "-E", "0", "--through-loss", "--loss-grace",
                                  "3s", "nightly", "--", "sh", "-c", "echo x >> " + ran},
                                 env_for(server));
    CHECK(cron.exit_code == 0);
    CHECK(Clock::now() - started >= 2s);
    CHECK(read_file(ran) == "x\n");
    CHECK(line_count(cron.err) == 1);
    CHECK(cron.err.find("redsem: Redis has no record of redsem and started") == 0);
    CHECK(cron.err.find("; waiting for that (--through-loss), then trying once") !=
          std::string::npos);
    // Open, and busy: it skips at once, with -E's code, and runs nothing.
    const json held = acquire_json(server, {"nightly", "--ttl", "1m", "--loss-grace", "0"});
    const auto busy = run_redsem({"run", "-w", "0", "-E", "0", "--through-loss", "-q", "nightly",
                                  "--", "sh", "-c", "echo y >> " + ran},
                                 env_for(server));
    CHECK(busy.exit_code == 0);
    CHECK(busy.err.empty());
    CHECK(read_file(ran) == "x\n");
    // -q: the same wait, told all the same (it is not "busy").
    RedisServer::Options other;
    other.new_data_set = true;
    RedisServer second(other);
    const auto quiet = run_redsem(
        {"acquire", "q", "-w", "0", "-q", "--through-loss", "--loss-grace", "2s"}, env_for(second));
    CHECK(quiet.exit_code == 0);
    CHECK(line_count(quiet.err) == 1);
    CHECK(quiet.err.find("; waiting for that (--through-loss), then trying once") !=
          std::string::npos);
    // Only with -w 0.
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"acquire", "q", "--through-loss"},
          std::vector<std::string>{"acquire", "q", "-w", "5s", "--through-loss"}}) {
        const auto usage = run_redsem(args, env_for(second));
        CHECK(usage.exit_code == 64);
        CHECK(first_line(usage.err) ==
              "redsem: error: --through-loss goes with -w 0 (a longer wait "
              "already waits through a closed admission)");
    }
}

TEST_CASE("the quiet cron form with --through-loss says once that it waits after a restart, "
          "then runs the job") {
    // Before issue 52, -q kept this wait of up to the loss grace silent, against redsem(1).
    RedisServer server; // long in use: its epoch names this server process
    const auto env = env_for(server);
    server.admin().call({"SAVE"});
    server.restart(); // a new process from the snapshot: data may have been lost
    const Scratch scratch;
    const std::string ran = scratch.path("ran");
    const auto started = Clock::now();
    const auto cron =
        run_redsem({"run", "-w", "0", "-E", "0", "-q", "--through-loss", "--loss-grace", "2s",
                    "nightly", "--", "sh", "-c", "echo x >> " + ran},
                   env);
    INFO(cron.err);
    CHECK(cron.exit_code == 0);
    CHECK(Clock::now() - started >= 1s);
    CHECK(read_file(ran) == "x\n");
    CHECK(line_count(cron.err) == 1);
    CHECK(cron.err.find("redsem: Redis may have lost leases of 'nightly'") == 0);
    CHECK(cron.err.find("; waiting for that (--through-loss), then trying once\n") !=
          std::string::npos);
}

TEST_CASE("a pause is no loss of data: run with -w 0 exits 73 at once, whatever -E says") {
    RedisServer server;
    const auto env = env_for(server);
    REQUIRE(run_redsem({"pause", "frozen", "--reason", "maintenance"}, env).exit_code == 0);
    const auto paused = run_redsem({"run", "-w", "0", "-E", "0", "frozen", "--", "true"}, env);
    CHECK(paused.exit_code == 73);
    CHECK(paused.err.find("paused") != std::string::npos);
    CHECK(line_count(paused.err) == 1);
}

TEST_CASE("a slot handed to a waiter killed with SIGKILL moves on within the claim window") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"dead", "--ttl", "60s"});
    Child waiter({"acquire", "dead", "--ttl", "40s"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{dead}:queue") == 1; }, 10s));
    waiter.signal(SIGKILL);
    waiter.wait(5s);
    // Handed to the dead waiter, whose 40s lease would block the slot.
    REQUIRE(run_redsem({"release", "dead", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto handed_at = Clock::now();
    // Nobody calls for longer than the claim window and the old wake-list expiry (6s).
    std::this_thread::sleep_for(7s);
    const auto newcomer = run_redsem({"acquire", "dead", "-w", "5s"}, env_for(server));
    CHECK(newcomer.exit_code == 0);
    CHECK(Clock::now() - handed_at < 10s);
}

TEST_CASE("an expired hand-over leaves no phantom waiter for gc to report") {
    RedisServer server;
    Connection admin = server.admin();
    Connection client(ConnectOptions{parse_redis_url(server.socket_url())});
    const Keys keys = Keys::make("redsem", "phantom");
    auto acquire = [&](const std::string& token, Milliseconds ttl, bool known) {
        return acquire_by_script(client, keys, token, ttl, known);
    };
    const std::string holder(32, 'a');
    const std::string stalled(32, 'b');
    const std::string other(32, 'c');
    REQUIRE(reply_kind(acquire(holder, 60s, false)) == "ok");
    REQUIRE(reply_kind(acquire(stalled, 300ms, false)) == "wait");
    release_by_script(client, keys, holder);
    // The hand-over's 300ms lease runs out before its 3s claim window; a call prunes it.
    std::this_thread::sleep_for(400ms);
    acquire(other, 60s, false);
    CHECK(admin.call({"ZSCORE", keys.alive, stalled}).is_nil());
    const auto dry = run_redsem({"gc", "phantom", "--dry-run", "--json"}, env_for(server));
    REQUIRE(dry.exit_code == 0);
    const json report = json::parse(dry.out);
    for (const auto& entry : report["removed"]) {
        CHECK(entry["token"] != stalled);
        CHECK(entry["kind"] != "waiter");
    }
}

TEST_CASE("per slot, fences strictly increase across many hand-overs") {
    RedisServer server;
    Connection connection(ConnectOptions{parse_redis_url(server.socket_url())});
    Semaphore semaphore(connection, "redsem", "perslot");
    std::mt19937 random(20261122);
    std::vector<Lease> held;
    std::map<long long, long long> last_fence; // slot -> fence
    AcquireOptions options;
    options.limit = 3;
    options.wait = 0ms;
    int checked = 0;
    for (int round = 0; round < 300; ++round) {
        if (held.size() < 3 && (held.empty() || random() % 2 == 0)) {
            auto lease = semaphore.acquire(options, generate_token());
            REQUIRE(lease);
            CHECK(lease->slot < 3);
            if (last_fence.count(lease->slot) != 0) {
                CHECK(lease->fence > last_fence[lease->slot]);
                ++checked;
            }
            last_fence[lease->slot] = lease->fence;
            held.push_back(*lease);
        } else {
            const std::size_t victim = random() % held.size();
            CHECK(semaphore.release(held[victim].token) == ReleaseOutcome::released);
            held.erase(held.begin() + static_cast<long>(victim));
        }
    }
    CHECK(checked > 50);
}

TEST_CASE("a waiter rides out Redis loading its data set (LOADING) instead of failing") {
    RedisServer::Options options;
    // Loading takes a while: 5ms per key (key-load-delay), a sleep rather than work, so that
    // it takes about 1.5s however loaded the machine is (a waiter gives up after 4s of
    // unbroken failure, k_reconnect_window, which loading a big data set on a busy machine
    // took); clients are answered (LOADING) every 1 KB loaded.
    options.extra_args = {"--enable-debug-command",
                          "yes",
                          "--key-load-delay",
                          "5000",
                          "--loading-process-events-interval-bytes",
                          "1024"};
    RedisServer server(options);
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"loading", "--ttl", "60s"});
    // The data, saved where the restart will load it from (through a connection that waits
    // long enough for that on a loaded machine).
    Connection patient(ConnectOptions{.url = parse_redis_url(server.socket_url()),
                                      .connect_timeout = 30s,
                                      .command_timeout = 120s});
    patient.call({"DEBUG", "POPULATE", "300", "filler", "16"});
    patient.call({"SAVE"});
    Child waiter({"acquire", "loading", "--loss-grace", "0", "-w", "60s"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{loading}:queue") == 1; }, 10s));
    server.restart(); // returns once PING answers (it does while loading)
    Connection after = server.admin();
    std::string errors;
    // The waiter meets LOADING.
    CHECK(wait_until(
        [&] {
            errors = after.call({"INFO", "errorstats"}).as_string();
            return errors.find("errorstat_LOADING") != std::string::npos;
        },
        10s));
    INFO(errors);
    REQUIRE(wait_until(
        [&] {
            return after.call({"INFO", "persistence"}).as_string().find("loading:0") !=
                   std::string::npos;
        },
        30s));
    CHECK_FALSE(waiter.finished());
    REQUIRE(run_redsem({"release", "loading", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto result = waiter.wait(20s);
    CHECK(result.exit_code == 0);
    INFO(result.err);
    CHECK(result.out.size() == 33);
}

TEST_CASE("gc works through a big semaphore in bounded calls, and a dry run reports the same") {
    RedisServer server;
    Connection admin = server.admin();
    Connection connection(ConnectOptions{parse_redis_url(server.socket_url())});
    Semaphore semaphore(connection, "redsem", "big");
    AcquireOptions options;
    options.limit = 1000;
    options.ttl = 1min; // none runs out (and is pruned) while filling, however slow the build
    options.wait = 0ms;
    std::vector<std::string> expire{"ZADD", "redsem:{big}:holders", "XX"};
    for (int i = 0; i < 1000; ++i) {
        const auto lease = semaphore.acquire(options, generate_token());
        REQUIRE(lease);
        expire.push_back("0"); // the score, replaced below
        expire.push_back(lease->token);
    }
    // Every lease runs out now, on the server's clock, before gc looks.
    const long long now_ms = std::stoll(admin.call({"TIME"}).at(0).as_string()) * 1000;
    for (std::size_t i = 3; i < expire.size(); i += 2) {
        expire[i] = std::to_string(now_ms - 1000);
    }
    admin.call(expire);
    REQUIRE(zcard(admin, "redsem:{big}:holders") == 1000);
    auto script_calls = [&] { // as functions (FCALL) or by EVALSHA
        const std::string stats = admin.call({"INFO", "commandstats"}).as_string();
        long long calls = 0;
        for (const std::string field : {"cmdstat_fcall:calls=", "cmdstat_evalsha:calls="}) {
            const std::size_t at = stats.find(field);
            calls += at == std::string::npos ? 0LL : std::stoll(stats.substr(at + field.size()));
        }
        return calls;
    };

    const long long calls_before_dry = script_calls();
    const auto dry = run_redsem({"gc", "big", "--dry-run", "--json"}, env_for(server));
    REQUIRE(dry.exit_code == 0);
    const json dry_report = json::parse(dry.out);
    CHECK(dry_report["removed"].size() == 1000);
    CHECK(dry_report["deleted"] == json::array({"big"}));
    CHECK(zcard(admin, "redsem:{big}:holders") == 1000); // a dry run changes nothing
    // 1000 entries at k_gc_entries_per_call (100) a call: at least 10 calls, none long.
    CHECK(script_calls() - calls_before_dry >= 10);

    const long long calls_before = script_calls();
    const auto real = run_redsem({"gc", "big", "--json"}, env_for(server));
    REQUIRE(real.exit_code == 0);
    const json report = json::parse(real.out);
    CHECK(report["removed"].size() == 1000);
    for (const auto& entry : report["removed"]) {
        CHECK(entry["kind"] == "holder");
    }
    CHECK(report["deleted"] == json::array({"big"}));
    CHECK(script_calls() - calls_before >= 10);
    const Reply left = admin.call({"KEYS", "redsem:{big}*"}); // only the history stays
    REQUIRE(left.as_array().size() == 1);
    CHECK(left.at(0).as_string() == "redsem:{big}:log");
}

TEST_CASE("a run stopped past its lease while its command ended reports the lost slot") {
    RedisServer server;
    const std::string ready = server.dir() + "/ready";
    Child run({"run", "unseen", "--ttl", "1s", "--", "sh", "-c", "touch " + ready + "; sleep 1.5"},
              env_for(server));
    REQUIRE(wait_for_file(ready, 10s));
    // Only redsem stops (the command runs on and ends): only fencing could have helped the
    // resource, but the caller must learn that exclusivity was not kept.
    run.signal(SIGSTOP);
    std::this_thread::sleep_for(3s);
    run.signal(SIGCONT);
    const auto result = run.wait(10s);
    CHECK(result.exit_code == 76);
    CHECK(result.err.find("lost the slot of 'unseen' before the command ended") !=
          std::string::npos);
}

TEST_CASE("run renews and ends normally with its wall clock an hour off (libfaketime)") {
    const auto faketime = find_libfaketime();
    if (!faketime) {
        REDSEM_SKIP("libfaketime (Debian package faketime)");
    }
    RedisServer server;
    for (const char* skew : {"+1h", "-1h", "+1h x1.05", "-1h x0.95"}) {
        INFO(skew);
        EnvChanges env = env_for(server);
        env["LD_PRELOAD"] = *faketime;
        env["FAKETIME"] = skew;
        env["FAKETIME_NO_CACHE"] = "1";
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1";
        const char* asan = std::getenv("ASAN_OPTIONS");
        env["ASAN_OPTIONS"] =
            std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0";
        // Several renewals (every 400ms for 3s), each timed by the local clocks: leases of
        // 1.2s, so that a renewal is not late merely because the machine is loaded (300ms
        // leases were lost on a busy 2-core machine) or the binary sanitized.
        const auto result =
            run_redsem({"run", "skewed", "--ttl", "1200ms", "--", "sleep", "3"}, env);
        INFO(result.err);
        CHECK(result.exit_code == 0);
        CHECK(result.err.empty());
    }
}

TEST_CASE("with --replicas, a grant whose confirming renewal finds the token queued (a new master "
          "after a failover) keeps its place and waits again") {
    RedisServer::Options tcp;
    tcp.tcp = true;
    RedisServer master(tcp);
    RedisServer replica;
    Connection replica_admin = replica.admin();
    replica_admin.call({"REPLICAOF", "127.0.0.1", std::to_string(master.port())});
    Connection admin = master.admin();
    REQUIRE(wait_until(
        [&] {
            return info_field(admin, "replication", "slave0").find("state=online") !=
                   std::string::npos;
        },
        20s));
    const auto env = env_for(master);
    const Keys keys = Keys::make("redsem", "moved");
    const auto holder = acquire_json(master, {"moved", "--ttl", "60s"});
    Child waiter({"acquire", "moved", "--ttl", "60s", "--replicas", "1", "-w", "60s", "--json"},
                 env);
    // Blocked on its wake list, so that the hand-over's grant goes straight to its socket.
    REQUIRE(wait_until(
        [&] {
            return zcard(admin, keys.queue) == 1 &&
                   info_field(admin, "clients", "blocked_clients") == "1";
        },
        20s));
    const std::string token = admin.call({"ZRANGE", keys.queue, "0", "0"}).at(0).as_string();
    waiter.signal(SIGSTOP);
    REQUIRE(run_redsem({"release", "moved", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    REQUIRE(only_holder(admin, "moved") == token);
    roll_back_to_queued(admin, keys, token);
    waiter.signal(SIGCONT);
    // It waits again in its place (before: it gave the place up and exited 1).
    REQUIRE(
        wait_until([&] { return info_field(admin, "clients", "blocked_clients") == "1"; }, 20s));
    CHECK_FALSE(waiter.finished());
    CHECK(zcard(admin, keys.queue) == 1);
    REQUIRE(release_by_script(admin, keys, "other") == ReleaseOutcome::released);
    const ProcessResult result = waiter.wait(30s);
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(json::parse(result.out)["token"] == token);
    CHECK(only_holder(admin, "moved") == token);
}

TEST_CASE("a hand-over collected late whose confirming renewal finds the token queued (a "
          "failback) keeps its place and waits again") {
    RedisServer server;
    Connection admin = server.admin();
    const auto env = env_for(server);
    const Keys keys = Keys::make("redsem", "rolled");
    const auto holder = acquire_json(server, {"rolled", "--ttl", "60s"});
    Child waiter({"acquire", "rolled", "--ttl", "1s", "-w", "60s", "--json"}, env);
    // Blocked on its wake list, so that the hand-over's grant goes straight to its socket.
    REQUIRE(wait_until(
        [&] {
            return zcard(admin, keys.queue) == 1 &&
                   info_field(admin, "clients", "blocked_clients") == "1";
        },
        20s));
    const std::string token = admin.call({"ZRANGE", keys.queue, "0", "0"}).at(0).as_string();
    waiter.signal(SIGSTOP);
    REQUIRE(run_redsem({"release", "rolled", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    REQUIRE(only_holder(admin, "rolled") == token);
    roll_back_to_queued(admin, keys, token);
    // Stopped for more than the quarter of its 1s lease a grant may lose before it is acted on:
    // the waiter renews the grant first, and that renewal finds the token queued.
    std::this_thread::sleep_for(600ms);
    waiter.signal(SIGCONT);
    // It waits again in its place (before: exit 1, "that token is waiting for a slot").
    REQUIRE(wait_until(
        [&] { return waiter.finished() || info_field(admin, "clients", "blocked_clients") == "1"; },
        20s));
    REQUIRE_FALSE(waiter.finished());
    CHECK(zcard(admin, keys.queue) == 1);
    REQUIRE(release_by_script(admin, keys, "other") == ReleaseOutcome::released);
    const ProcessResult result = waiter.wait(30s);
    INFO(result.err);
    REQUIRE(result.exit_code == 0);
    CHECK(json::parse(result.out)["token"] == token);
    CHECK(only_holder(admin, "rolled") == token);
}

TEST_CASE("a run whose renewal finds its token queued again (a failback) stops its command "
          "for the lost slot and leaves the queue") {
    RedisServer server;
    Connection admin = server.admin();
    const auto env = env_for(server);
    const Keys keys = Keys::make("redsem", "requeued");
    Child run({"run", "requeued", "--ttl", "3s", "--", "sleep", "60"}, env);
    REQUIRE(
        wait_until([&] { return run.finished() || !only_holder(admin, "requeued").empty(); }, 20s));
    const std::string token = only_holder(admin, "requeued");
    REQUIRE_FALSE(token.empty());
    roll_back_to_queued(admin, keys, token);
    const ProcessResult result = run.wait(30s);
    INFO(result.err);
    CHECK(result.exit_code == 76);
    // Told by the server at its next renewal (before: renewals failed until the lease ran out
    // by the local clock, "no renewal was confirmed in time").
    CHECK(result.err.find("no longer holds a slot") != std::string::npos);
    CHECK(result.err.find("no renewal was confirmed in time") == std::string::npos);
    CHECK(zcard(admin, keys.queue) == 0);
    CHECK(only_holder(admin, "requeued") == "other");
}

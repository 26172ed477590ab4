// A long queue: waiters far back refresh their place rarely (lua/acquire.lua), and must still
// take a slot promptly once the queue has carried them to the head.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"

#include <csignal>
#include <filesystem>
#include <memory>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

namespace {

using Children = std::vector<std::unique_ptr<Child>>;

// Starts `count` redsem processes with `args`, one after the other, each queued on `name`
// before the next starts, so that the queue holds them in that order.
void queue_in_order(const RedisServer& server, Children& into, int count,
                    const std::vector<std::string>& args, const std::string& name) {
    Connection admin = server.admin();
    const std::string queue = "redsem:{" + name + "}:queue";
    for (int i = 0; i < count; ++i) {
        const long long before = zcard(admin, queue);
        into.push_back(std::make_unique<Child>(args, env_for(server)));
        REQUIRE(wait_until([&] { return zcard(admin, queue) == before + 1; }, 10s));
    }
}

// The tokens of the last `count` waiters queued on `name`, in queue order.
std::vector<std::string> last_queued(Connection& admin, const std::string& name, int count) {
    const Reply tokens =
        admin.call({"ZRANGE", "redsem:{" + name + "}:queue", std::to_string(-count), "-1"});
    std::vector<std::string> out;
    for (const Reply& token : tokens.as_array()) {
        out.push_back(token.as_string());
    }
    return out;
}

// How far the liveness deadline of waiter `token` lies past the server's clock: more than
// k_waiter_liveness_ms once the waiter has refreshed its place far back, and so sleeps longer
// than the head until the queue nudges it (lua/acquire.lua).
long long liveness_ahead_ms(Connection& admin, const std::string& name, const std::string& token) {
    const Reply alive = admin.call({"ZSCORE", "redsem:{" + name + "}:alive", token});
    return alive.is_nil() ? 0 : std::stoll(alive.as_string()) - server_time_ms(admin);
}

// Waits until the last `count` waiters queued on `name` have refreshed their place far back.
void await_far_back_refresh(const RedisServer& server, const std::string& name, int count) {
    Connection admin = server.admin();
    for (const std::string& token : last_queued(admin, name, count)) {
        REQUIRE(wait_until(
            [&] { return liveness_ahead_ms(admin, name, token) > k_waiter_liveness_ms; }, 30s));
    }
}

} // namespace

TEST_CASE("a waiter that queued far back takes a slot whose lease ran out within about its ttl") {
    RedisServer server;
    const auto env = env_for(server);
    const auto first = acquire_json(server, {"far", "--ttl", "1m"});
    Children quick;
    queue_in_order(server, quick, 20, {"run", "far", "--", "true"}, "far");
    Children dying; // takes the slot and exits: its 2s lease is never renewed
    queue_in_order(server, dying, 1, {"acquire", "far", "--ttl", "2s"}, "far");
    Children last; // queued 22nd: it refreshes its place about every 14s
    queue_in_order(server, last, 1, {"run", "far", "--", "true"}, "far");
    await_far_back_refresh(server, "far", 1);

    REQUIRE(run_redsem({"release", "far", first["token"].get<std::string>()}, env).exit_code == 0);
    REQUIRE(wait_until([&] { return dying.front()->finished(); }, 60s));
    const auto granted_by = Clock::now();
    REQUIRE(wait_until([&] { return last.front()->finished(); }, 60s));
    const auto waited = Clock::now() - granted_by;
    // The slot is free 2s after `dying` got it. The waiter moved up near the head without
    // refreshing its place: the queue nudges it (before, it slept ~12s more).
    CHECK(waited < 8s);
    CHECK(dying.front()->wait().exit_code == 0);
    CHECK(last.front()->wait().exit_code == 0);
    for (auto& child : quick) {
        CHECK(child->wait().exit_code == 0);
    }
}

TEST_CASE("dead waiters in a row at the head are passed over within seconds each, however far "
          "back the live ones behind them refresh") {
    RedisServer server;
    const auto env = env_for(server);
    const auto first = acquire_json(server, {"row", "--ttl", "1m"});
    Children quick;
    queue_in_order(server, quick, 30, {"run", "row", "--", "true"}, "row");
    Children dead;
    queue_in_order(server, dead, 3, {"acquire", "row"}, "row");
    Children behind; // queued 34th and 35th: they refresh about every 27s
    queue_in_order(server, behind, 2, {"run", "row", "--", "true"}, "row");
    await_far_back_refresh(server, "row", 2);
    for (auto& child : dead) {
        child->signal(SIGKILL);
        child->wait();
    }

    const auto released_at = Clock::now();
    REQUIRE(run_redsem({"release", "row", first["token"].get<std::string>()}, env).exit_code == 0);
    for (auto& child : behind) {
        REQUIRE(wait_until([&] { return child->finished(); }, 90s));
    }
    const auto took = Clock::now() - released_at;
    // 30 quick runs, then each dead waiter is handed the slot and loses it 3s later when a
    // live waiter near the head looks again (within 1.5s): about 12s here. Before, the live
    // waiters slept until their own refresh, about 27s after they queued.
    CHECK(took < 22s);
    for (auto& child : quick) {
        CHECK(child->wait().exit_code == 0);
    }
}

TEST_CASE("a waiter that has not refreshed its place since it queued is not woken as it "
          "moves up near the head, as it looks again within the head's interval anyway") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    // The observer: every push to a nudge list, also one served at once to a blocked BLPOP.
    admin.call({"CONFIG", "SET", "notify-keyspace-events", "Kl"});
    const auto pushes = Child::shell("exec redis-cli -s " + server.dir() +
                                     "/redis.sock psubscribe '__keyspace@0__:*:nudge'");
    REQUIRE(wait_until([&] { return pushes->out_so_far().find("psubscribe") != std::string::npos; },
                       10s));
    int marks = 0;
    // Every push so far is in the observer's output once it shows a push made after them.
    const auto observed = [&] {
        const std::string mark = "redsem:{mark}:wake:" + std::to_string(++marks) + ":nudge";
        admin.call({"RPUSH", mark, "1"});
        admin.call({"DEL", mark});
        REQUIRE(
            wait_until([&] { return pushes->out_so_far().find(mark) != std::string::npos; }, 10s));
        return pushes->out_so_far();
    };

    // The entrant is stopped, so that it cannot refresh its place (and get the extra of one far
    // back) before the queue moves. Stopped past its liveness (a machine stalled for seconds)
    // it is dropped from the queue, and the attempt tells nothing: tried again, a few times.
    constexpr long long k_near_head_places = 1 + k_near_head; // limit 1
    bool judged = false;
    for (int attempt = 0; attempt < 3 && !judged; ++attempt) {
        const std::string name = "fresh" + std::to_string(attempt);
        const auto holder = acquire_json(server, {name, "--ttl", "10m"});
        Children ahead;
        queue_in_order(server, ahead, static_cast<int>(k_near_head_places),
                       {"acquire", name, "-w", "10m"}, name);
        Children entrant;
        queue_in_order(server, entrant, 1, {"acquire", name, "-w", "10m"}, name);
        entrant.front()->signal(SIGSTOP);
        const auto queued = last_queued(admin, name, static_cast<int>(k_near_head_places + 1));
        const std::string& token = queued.back();
        // It may have refreshed its place just before it stopped (1s extra, at this place).
        REQUIRE(wait_until(
            [&] { return liveness_ahead_ms(admin, name, token) <= k_waiter_liveness_ms; }, 30s));
        REQUIRE(run_redsem({"release", name, queued.front()}, env).exit_code == 1); // left
        const std::string seen = observed();
        const Reply place = admin.call({"ZRANK", "redsem:{" + name + "}:queue", token});
        if (!place.is_nil()) {
            judged = true;
            CHECK(place.as_integer() == k_near_head_places - 1);
            CHECK(seen.find("wake:" + token + ":nudge") == std::string::npos);
        }
        entrant.front()->signal(SIGCONT);
    }
    CHECK(judged);
}

TEST_CASE("a renew never shortens a lease: a shorter --ttl keeps the deadline, and the next "
          "waiter waits for it") {
    RedisServer server;
    const auto env = env_for(server);
    const auto holder = acquire_json(server, {"shorten", "--ttl", "1m"});
    const std::string token = holder["token"].get<std::string>();
    Children next;
    queue_in_order(server, next, 1, {"acquire", "shorten"}, "shorten");
    Connection admin = server.admin();
    const auto deadline = [&] {
        return std::stoll(admin.call({"ZSCORE", "redsem:{shorten}:holders", token}).as_string());
    };
    const long long before = deadline();
    REQUIRE(run_redsem({"renew", "shorten", token, "--ttl", "1s"}, env).exit_code == 0);
    CHECK(deadline() >= before);
    // Well past the second a shortened lease would have had: the holder still holds.
    const long long renewed_at = server_time_ms(admin);
    REQUIRE(wait_until([&] { return server_time_ms(admin) > renewed_at + 3000; }, 30s));
    CHECK_FALSE(next.front()->finished());
    CHECK(zcard(admin, "redsem:{shorten}:holders") == 1);
    CHECK(admin.call({"ZSCORE", "redsem:{shorten}:holders", token}).is_nil() == false);
    // A longer --ttl still extends it.
    REQUIRE(run_redsem({"renew", "shorten", token, "--ttl", "10m"}, env).exit_code == 0);
    CHECK(deadline() >= server_time_ms(admin) + 9 * 60 * 1000);
    REQUIRE(run_redsem({"release", "shorten", token}, env).exit_code == 0);
    CHECK(next.front()->wait().exit_code == 0);
}

TEST_CASE("a waiter whose token 'redsem release' takes out of the queue ends at once with 1, "
          "holding nothing, and never queues again") {
    RedisServer server;
    const auto env = env_for(server);
    Scratch scratch;
    const std::string ran = scratch.path("ran");
    const auto holder = acquire_json(server, {"cancel", "--ttl", "10m"});
    Children waiting;
    queue_in_order(server, waiting, 1, {"acquire", "cancel", "--ttl", "10m", "-w", "10m"},
                   "cancel");
    queue_in_order(server, waiting, 1, {"run", "cancel", "-w", "10m", "--", "touch", ran},
                   "cancel");
    Connection admin = server.admin();
    const Reply queued = admin.call({"ZRANGE", "redsem:{cancel}:queue", "0", "-1"});
    REQUIRE(queued.as_array().size() == 2);

    for (std::size_t i = 0; i < waiting.size(); ++i) {
        const std::string token = queued.at(i).as_string();
        const ProcessResult release = run_redsem({"release", "cancel", token}, env);
        CHECK(release.exit_code == 1);
        CHECK(release.err.find("has left the queue") != std::string::npos);
        // Well inside the 10m wait: the release ends it, not the wait running out.
        const ProcessResult ended = waiting[i]->wait(60s);
        CHECK(ended.exit_code == 1);
        CHECK(ended.out.empty());
        CHECK(ended.err.find("place in the queue of 'cancel' (token " + token.substr(0, 8) +
                             ") was released") != std::string::npos);
        CHECK(line_count(without_wait_lines(ended.err)) == 1);
    }
    CHECK(zcard(admin, "redsem:{cancel}:queue") == 0);
    CHECK_FALSE(std::filesystem::exists(ran));
    // The holder still holds, and nobody else is waiting for its slot.
    CHECK(zcard(admin, "redsem:{cancel}:holders") == 1);
    REQUIRE(run_redsem({"release", "cancel", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    CHECK(zcard(admin, "redsem:{cancel}:holders") == 0);
}

TEST_CASE("a released waiter that refreshes its place between two waits is told so") {
    RedisServer server;
    Connection admin = server.admin();
    const Keys keys = Keys::make("redsem", "between");
    REQUIRE(reply_kind(acquire_by_script(admin, keys, "holder", 600s, false)) == "ok");
    const std::string token = "waiter";
    REQUIRE(reply_kind(acquire_by_script(admin, keys, token, 600s, true)) == "wait");
    REQUIRE(release_by_script(admin, keys, token) == ReleaseOutcome::left_queue);
    // The note says why, and the client reads it (no script reads lists): it stays until then.
    CHECK(reply_kind(acquire_by_script(admin, keys, token, 600s, true)) == "left");
    CHECK(zcard(admin, keys.queue) == 0);
    const Reply note = admin.call({"LRANGE", keys.wake_prefix + token + ":left", "0", "-1"});
    REQUIRE(note.as_array().size() == 1);
    CHECK(note.at(0).as_string() == "1");
    CHECK(reply_kind(acquire_by_script(admin, keys, token, 600s, true)) == "left");
}

TEST_CASE("a waiter that gives up leaves no note of a release behind") {
    RedisServer server;
    const auto env = env_for(server);
    acquire_json(server, {"giveup", "--ttl", "10m"});
    const ProcessResult result = run_redsem({"acquire", "giveup", "-w", "300ms"}, env);
    CHECK(result.exit_code == 75);
    Connection admin = server.admin();
    CHECK(admin.call({"KEYS", "redsem:{giveup}:wake:*"}).as_array().empty());
    CHECK(zcard(admin, "redsem:{giveup}:queue") == 0);
}

TEST_CASE("run --supersede: a newer superseding waiter takes the older one's place, which "
          "exits 80 naming it, while holders and plain waiters keep theirs") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    Scratch scratch;
    const std::string queue = semaphore_key("deploy", "queue");
    const auto holder = acquire_json(server, {"deploy", "--ttl", "10m"});
    const auto ran = [&](const std::string& what) {
        return std::vector<std::string>{"touch", scratch.path(what)};
    };
    const auto run_args = [&](std::vector<std::string> options, const std::string& what) {
        std::vector<std::string> args{"run", "deploy", "-w", "5m"};
        args.insert(args.end(), options.begin(), options.end());
        args.push_back("--");
        const auto command = ran(what);
        args.insert(args.end(), command.begin(), command.end());
        return args;
    };
    Children waiting;
    queue_in_order(server, waiting, 1, run_args({}, "plain-1"), "deploy");
    queue_in_order(server, waiting, 1, run_args({"--supersede", "--label", "build-1"}, "build-1"),
                   "deploy");
    queue_in_order(server, waiting, 1, run_args({}, "plain-2"), "deploy");
    const std::vector<std::string> before = last_queued(admin, "deploy", 3);

    // The newer one: the older superseding waiter leaves at once, told by whom, and the newer
    // one waits in its place (second), ahead of the plain waiter that queued after it.
    auto newer =
        std::make_unique<Child>(run_args({"--supersede", "--label", "build-2"}, "build-2"), env);
    const ProcessResult superseded = waiting[1]->wait(60s);
    INFO(superseded.err);
    CHECK(superseded.exit_code == 80);
    CHECK(superseded.out.empty());
    CHECK(
        superseded.err.find("redsem: superseded in the queue of 'deploy' by a newer waiter on ") !=
        std::string::npos);
    CHECK(superseded.err.find("'build-2') (--supersede); nothing is held") != std::string::npos);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 3; }, 10s));
    const std::vector<std::string> after = last_queued(admin, "deploy", 3);
    CHECK(after[0] == before[0]);
    CHECK(after[1] != before[1]);
    CHECK(after[2] == before[2]);
    CHECK(zcard(admin, semaphore_key("deploy", "holders")) == 1);

    // The history says who superseded whom.
    const std::string log = run_redsem({"log", "deploy"}, env).out;
    INFO(log);
    CHECK(log.find("superseded by a newer waiter (--supersede) on ") != std::string::npos);
    bool told = false;
    for (const json& event : history_events(server, "deploy")) {
        if (event.value("event", "") == "skipped" && event["token"] == before[1]) {
            CHECK(event["skipped"] == "superseded");
            CHECK(event["label"] == "build-1");
            told = true;
        }
    }
    CHECK(told);

    // Each runs in its turn; the superseded one never does.
    REQUIRE(run_redsem({"release", "deploy", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    CHECK(waiting[0]->wait(60s).exit_code == 0);
    CHECK(newer->wait(60s).exit_code == 0);
    CHECK(waiting[2]->wait(60s).exit_code == 0);
    for (const char* what : {"plain-1", "build-2", "plain-2"}) {
        CHECK(std::filesystem::exists(scratch.path(what)));
    }
    CHECK_FALSE(std::filesystem::exists(scratch.path("build-1")));
    CHECK(admin.call({"KEYS", "redsem:{deploy}:wake:*"}).as_array().empty());
}

TEST_CASE("acquire --max-waiting: a newcomer beyond N is refused at once with 81, a "
          "superseding one makes room by superseding, else it is refused too") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const std::string queue = semaphore_key("q", "queue");
    const auto holder = acquire_json(server, {"q", "--ttl", "10m"});
    Children waiting;
    queue_in_order(server, waiting, 1, {"acquire", "q", "--max-waiting", "2"}, "q");
    queue_in_order(server, waiting, 1, {"acquire", "q", "--supersede", "--max-waiting", "2"}, "q");

    // A plain newcomer: refused, one line, nothing queued or held.
    const ProcessResult refused = run_redsem({"acquire", "q", "--max-waiting", "2"}, env);
    CHECK(refused.exit_code == 81);
    CHECK(refused.out.empty());
    CHECK(refused.err == "redsem: the queue of 'q' is full: 2 waiting, and --max-waiting 2 lets "
                         "no more in; nothing is held\n");
    const ProcessResult quiet =
        run_redsem({"run", "q", "--max-waiting", "2", "-q", "--", "true"}, env);
    CHECK(quiet.exit_code == 81);
    CHECK(quiet.err.empty());
    // Without the option the queue takes anyone: the bound is the newcomer's.
    Children more;
    queue_in_order(server, more, 1, {"acquire", "q", "-w", "5m"}, "q");
    CHECK(run_redsem({"acquire", "q", "--max-waiting", "3"}, env).exit_code == 81);

    // A superseding newcomer at the bound: the superseding waiter leaves, and it takes its place.
    auto newer = std::make_unique<Child>(
        std::vector<std::string>{"acquire", "q", "--supersede", "--max-waiting", "3", "-w", "5m"},
        env);
    CHECK(waiting[1]->wait(60s).exit_code == 80);
    REQUIRE(wait_until([&] { return zcard(admin, queue) == 3; }, 10s));
    // The history has the refusals as skips.
    std::size_t full = 0;
    for (const json& event : history_events(server, "q")) {
        full += event.value("skipped", "") == "full" ? 1 : 0;
    }
    CHECK(full == 3);
    CHECK(run_redsem({"log", "q"}, env).out.find("the queue was full (--max-waiting)") !=
          std::string::npos);

    // No superseding waiter to make room for another: it is refused, and nobody leaves.
    CHECK(run_redsem({"acquire", "fresh", "--ttl", "10m"}, env).exit_code == 0);
    Children plain;
    queue_in_order(server, plain, 1, {"acquire", "fresh", "-w", "5m"}, "fresh");
    CHECK(run_redsem({"acquire", "fresh", "--supersede", "--max-waiting", "1"}, env).exit_code ==
          81);
    CHECK(zcard(admin, semaphore_key("fresh", "queue")) == 1);
    CHECK_FALSE(plain[0]->finished());
}

TEST_CASE("acquire --supersede and --max-waiting: bad input is a usage error, and nothing is "
          "written") {
    RedisServer server;
    const auto env = env_for(server);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"acquire", "x", "--max-waiting", "0"},
             {"acquire", "x", "--max-waiting", "-1"},
             {"acquire", "x", "--max-waiting", "two"},
             {"acquire", "x", "--max-waiting", "1000001"},
             {"acquire", "x", "--max-waiting"},
             {"acquire", "x", "--supersede", "-w", "0"},
             {"run", "x", "--max-waiting", "2", "-w", "0", "--", "true"}}) {
        const ProcessResult result = run_redsem(args, env);
        INFO(args[2] << " " << result.err);
        CHECK(result.exit_code == 64);
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(result.out.empty());
    }
    Connection admin = server.admin();
    CHECK(admin.call({"KEYS", "redsem:{x}:*"}).as_array().empty());
}

TEST_CASE("acquire --supersede: a superseded waiter that was stopped meanwhile is told when it "
          "wakes, and one that lost its place does not supersede the newer one") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const std::string queue = semaphore_key("stop", "queue");
    const auto holder = acquire_json(server, {"stop", "--ttl", "10m"});
    Children waiting;
    queue_in_order(server, waiting, 1, {"acquire", "stop", "--supersede", "-w", "5m"}, "stop");
    const std::string stopped = last_queued(admin, "stop", 1).at(0);
    waiting[0]->signal(SIGSTOP);
    // Its wait for a hand-over (BLPOP) runs out while it is stopped: when it wakes it refreshes
    // its place, finds it gone, and reads why from the note.
    REQUIRE(
        wait_until([&] { return info_field(admin, "clients", "blocked_clients") == "0"; }, 20s));
    waiting.push_back(std::make_unique<Child>(
        std::vector<std::string>{"acquire", "stop", "--supersede", "-w", "5m"}, env));
    REQUIRE(wait_until(
        [&] { return zcard(admin, queue) == 1 && last_queued(admin, "stop", 1).at(0) != stopped; },
        10s));
    waiting[0]->signal(SIGCONT);
    const ProcessResult woken = waiting[0]->wait(60s);
    INFO(woken.err);
    CHECK(woken.exit_code == 80);
    CHECK(woken.err.find("superseded in the queue of 'stop'") != std::string::npos);
    CHECK_FALSE(waiting[1]->finished());

    // By the script alone: a waiter that lost its place (its liveness ran out, so it queues
    // again, known) after a newer superseding waiter queued is the one superseded.
    const Keys keys = Keys::make("redsem", "stop");
    const std::string late = "00000000000000000000000000aa0001";
    const long long first = server_time_ms(admin) - 60'000; // answered before the newer queued
    const Reply again =
        acquire_by_script(admin, keys, late, 60s, true,
                          {.limit = std::nullopt, .first_answer_ms = first, .supersede = true});
    CHECK(reply_kind(again) == "skipped");
    CHECK(zcard(admin, queue) == 1);
    CHECK_FALSE(waiting[1]->finished());
    REQUIRE(run_redsem({"release", "stop", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    CHECK(waiting[1]->wait(60s).exit_code == 0);
}

TEST_CASE("run --supersede under load: 20 superseding loops and plain ones while holders release "
          "never hold more than the limit, and the superseding ones still get their turns") {
    RedisServer server;
    const auto env = env_for(server);
    RunLoops plain(2, "burst", "-n 2 --ttl 10s", env);
    RunLoops newest(20, "burst", "-n 2 --ttl 10s --supersede", env);
    // Each newer superseding waiter is served where the first queued: the stream of newer ones
    // does not starve them behind the plain waiters that keep coming.
    REQUIRE(wait_until([&] { return newest.entries() >= 40 && plain.entries() >= 20; }, 120s));
    newest.stop();
    plain.stop();
    // The observer trusts only the commands' own log.
    CHECK(observe_inside({{plain.inside_log(), 1}, {newest.inside_log(), 1}}).most_inside <= 2);
    const auto statuses = [](const std::string& exits) {
        std::map<std::string, int> counted;
        for (const std::string& line : lines_of(exits)) {
            counted[line] += 1;
        }
        return counted;
    };
    const auto plain_exits = statuses(plain.exits());
    INFO(plain.exits());
    CHECK(plain_exits.size() == 1);
    CHECK(plain_exits.count("0") == 1);
    auto newest_exits = statuses(newest.exits());
    INFO(newest.exits());
    CHECK(newest_exits["0"] >= 40);
    CHECK(newest_exits["80"] >= 1);
    newest_exits.erase("0");
    newest_exits.erase("80");
    CHECK(newest_exits.empty());
    Connection admin = server.admin();
    CHECK(zcard(admin, semaphore_key("burst", "queue")) == 0);
    CHECK(zcard(admin, semaphore_key("burst", "holders")) == 0);
}

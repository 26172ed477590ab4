// A long queue: waiters far back refresh their place rarely (lua/acquire.lua), and must still
// take a slot promptly once the queue has carried them to the head.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"

#include <csignal>
#include <memory>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

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

TEST_CASE("a renew that shortens a lease lets the next waiter in when the shorter lease ends") {
    RedisServer server;
    const auto env = env_for(server);
    const auto holder = acquire_json(server, {"shorten", "--ttl", "1m"});
    Children next;
    queue_in_order(server, next, 1, {"acquire", "shorten"}, "shorten");
    // The scripts skip looking for expired leases before the earliest deadline they know of:
    // the renew must bring that forward from a minute to a second.
    REQUIRE(run_redsem({"renew", "shorten", holder["token"].get<std::string>(), "--ttl", "1s"}, env)
                .exit_code == 0);
    const auto renewed_at = Clock::now();
    Connection admin = server.admin();
    const long long deadline = std::stoll(
        admin.call({"ZSCORE", "redsem:{shorten}:holders", holder["token"].get<std::string>()})
            .as_string());
    const long long due =
        std::stoll(admin.call({"HGET", "redsem:{shorten}:state", "due"}).as_string());
    CHECK(due <= deadline);
    REQUIRE(wait_until([&] { return next.front()->finished(); }, 60s));
    CHECK(Clock::now() - renewed_at < 10s);
    CHECK(next.front()->wait().exit_code == 0);
}

// A Redis with a maxmemory that evicts (the managed services' default is volatile-lru): a
// filler client pushes it past maxmemory while a semaphore is held, and a second acquire must
// not get in, under every maxmemory-policy. Real redis-server processes; the observer is the
// admin connection.
#include <catch2/catch.hpp>

#include "semaphore/protocol.hpp"
#include "support/helpers.hpp"

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

constexpr int k_unavailable = 69; // ExitCode::unavailable
constexpr int k_timeout = 75;     // ExitCode::timeout: no slot (busy)
constexpr int k_closed = 73;      // ExitCode::closed: admission closed (a possible loss)

// Writes expiring cache entries of 20 KB (an application sharing the Redis) until 12 MB went
// in or Redis refused one (noeviction, full); returns how many went in.
int fill(Connection& admin) {
    const std::string value(20 * 1024, 'x');
    int written = 0;
    for (int i = 0; i < 600; ++i) {
        const Reply reply = admin.command(
            std::vector<std::string>{"SET", "cache:" + std::to_string(i), value, "PX", "600000"});
        if (reply.is_error()) {
            CHECK(is_error_code(reply, "OOM"));
            break;
        }
        ++written;
    }
    return written;
}

// Sets the maxmemory-policy and waits until calls that admit see it: each function library
// trusts the policy it read last for k_policy_fresh_ms of server time (lib/epoch.lua).
void set_policy(Connection& admin, const std::string& policy) {
    admin.call({"CONFIG", "SET", "maxmemory-policy", policy});
    const long long set_at = server_time_ms(admin);
    REQUIRE(wait_until([&] { return server_time_ms(admin) > set_at + k_policy_fresh_ms; },
                       std::chrono::seconds(10)));
}

// Writes keys without an expiry (an application that does not set one) into database 15
// until `evicted` more keys were evicted than before (from any database), or 40 MB went in;
// then deletes them. Returns how many were evicted meanwhile.
long long fill_until_evicted(Connection& admin, long long evicted) {
    const long long before = evicted_keys(admin);
    const std::string value(20 * 1024, 'y');
    admin.call({"SELECT", "15"});
    for (int i = 0; i < 2000 && evicted_keys(admin) - before < evicted; ++i) {
        admin.call({"SET", "persistent:" + std::to_string(i), value});
    }
    admin.call({"FLUSHDB"});
    admin.call({"SELECT", "0"});
    return evicted_keys(admin) - before;
}

} // namespace

TEST_CASE("eviction never lets a second holder into a held limit-1 semaphore, under every "
          "maxmemory-policy") {
    for (const std::string policy :
         {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru",
          "allkeys-lfu", "allkeys-random", "noeviction"}) {
        DYNAMIC_SECTION(policy) {
            RedisServer::Options options;
            options.extra_args = {"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"};
            RedisServer server(options);
            Connection admin = server.admin();
            const auto held =
                run_redsem({"acquire", "ev", "-n", "1", "--ttl", "5m", "-w", "0"}, env_for(server));
            REQUIRE(held.exit_code == 0);
            // The policy changes under a holder (an operator, or a Redis shared with a cache).
            set_policy(admin, policy);
            const int written = fill(admin);
            INFO(written << " cache entries written, " << evicted_keys(admin) << " keys evicted");
            if (policy != "noeviction") {
                REQUIRE(evicted_keys(admin) > 0); // the filler did push Redis to evict
            }

            const auto second = run_redsem({"acquire", "ev", "-w", "0"}, env_for(server));
            INFO("second acquire said: " << second.err);
            CHECK(second.exit_code != 0);
            if (policy.rfind("volatile-", 0) == 0) {
                // The semaphore in use has no expiry: nothing of it was evicted, and it is
                // busy. But keys were evicted after a CONFIG SET, which may have set any
                // policy meanwhile: a possible loss, and admission is closed for the grace.
                CHECK(second.exit_code == k_timeout);
                CHECK(zcard(admin, "redsem:{ev}:holders") == 1);
                const auto status = nlohmann::json::parse(
                    run_redsem({"status", "ev", "--json"}, env_for(server)).out);
                CHECK(status["admission"]["cause"] == "evicted");
            } else if (policy.rfind("allkeys-", 0) == 0) {
                CHECK(second.exit_code == k_unavailable);
                CHECK(second.err.find("maxmemory-policy " + policy) != std::string::npos);
            } else {
                CHECK((second.exit_code == k_unavailable || second.exit_code == k_timeout));
            }
        }
    }
}

TEST_CASE("a held semaphore survives a volatile-lru Redis that evicts all around it, and is "
          "released and expires as usual after") {
    RedisServer::Options options;
    options.extra_args = {"--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"};
    RedisServer server(options);
    Connection admin = server.admin();
    const auto held = run_redsem({"acquire", "ev2", "-n", "1", "--ttl", "5m"}, env_for(server));
    REQUIRE(held.exit_code == 0);
    Child waiter({"acquire", "ev2", "-w", "60s"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{ev2}:queue") == 1; }, 10s));
    fill(admin);
    REQUIRE(evicted_keys(admin) > 0);
    CHECK(zcard(admin, "redsem:{ev2}:holders") == 1);
    CHECK(zcard(admin, "redsem:{ev2}:queue") == 1);
    // Writes still work (volatile-lru evicts cache entries to make room): the waiter is
    // handed the slot, and once nobody holds, the keys expire again.
    REQUIRE(run_redsem({"release", "ev2", first_line(held.out)}, env_for(server)).exit_code == 0);
    const auto handed = waiter.wait(20s);
    REQUIRE(handed.exit_code == 0);
    REQUIRE(run_redsem({"release", "ev2", first_line(handed.out)}, env_for(server)).exit_code == 0);
    CHECK(admin.call({"PTTL", "redsem:{ev2}:state"}).as_integer() > 0);
}

TEST_CASE("a held semaphore that an older redsem gave an expiry is pinned anew by the next "
          "call, and gc --dry-run changes nothing") {
    RedisServer server;
    Connection admin = server.admin();
    REQUIRE(run_redsem({"acquire", "old", "--ttl", "5m", "-w", "0"}, env_for(server)).exit_code ==
            0);
    const std::vector<std::string> keys{"redsem:{old}:state", "redsem:{old}:holders",
                                        "redsem:{old}:info", "redsem:{old}:slots"};
    CHECK(admin.call({"PTTL", keys[0]}).as_integer() == -1); // pinned while held
    // As redsem 0.1 left it: every key with an expiry, no pin.
    admin.call({"HDEL", keys[0], "pinned"});
    for (const std::string& key : keys) {
        admin.call({"PEXPIRE", key, "86400000"});
    }

    REQUIRE(run_redsem({"gc", "--dry-run"}, env_for(server)).exit_code == 0);
    for (const std::string& key : keys) {
        INFO(key);
        CHECK(admin.call({"PTTL", key}).as_integer() > 0);
    }
    CHECK(admin.call({"HEXISTS", keys[0], "pinned"}).as_integer() == 0);

    REQUIRE(run_redsem({"gc"}, env_for(server)).exit_code == 0);
    for (const std::string& key : keys) {
        INFO(key);
        CHECK(admin.call({"PTTL", key}).as_integer() == -1);
    }
    CHECK(admin.call({"HGET", keys[0], "pinned"}).as_string() == "1");
}

TEST_CASE("a semaphore in use keeps its horizon out of 0.1.0's sight, and a key given an "
          "expiry with a `keep` written is pinned anew by the next call") {
    RedisServer server;
    Connection admin = server.admin();
    const nlohmann::json holder = nlohmann::json::parse(
        run_redsem({"acquire", "hz", "--ttl", "5m", "-w", "0", "--json"}, env_for(server)).out);
    const std::string state = "redsem:{hz}:state";
    const std::vector<std::string> others{"redsem:{hz}:holders", "redsem:{hz}:info",
                                          "redsem:{hz}:slots"};
    // 0.1.0 gives a key it creates an expiry only where it reads a horizon (field keep).
    CHECK(admin.call({"HEXISTS", state, "keep"}).as_integer() == 0);
    CHECK(admin.call({"HEXISTS", state, "horizon"}).as_integer() == 1);
    CHECK(admin.call({"PTTL", state}).as_integer() == -1);
    // As a writer that knows `keep` only leaves it: the state without an expiry, a key with.
    admin.call({"HSET", state, "keep", "9999999999999"});
    admin.call({"PEXPIRE", others[0], "86400000"});
    REQUIRE(run_redsem({"renew", "hz", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    for (const std::string& key : others) {
        INFO(key);
        CHECK(admin.call({"PTTL", key}).as_integer() == -1);
    }
    CHECK(admin.call({"HEXISTS", state, "keep"}).as_integer() == 0);
    // Released, the keys expire again at the horizon, which 0.1.0 reads as keep.
    REQUIRE(run_redsem({"release", "hz", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    CHECK(admin.call({"PTTL", state}).as_integer() > 0);
    CHECK(admin.call({"HEXISTS", state, "keep"}).as_integer() == 1);
    CHECK(admin.call({"HEXISTS", state, "horizon"}).as_integer() == 0);
}

TEST_CASE("an evicting policy that was set back keeps admission closed for the loss grace") {
    // Two holders of a limit-2 semaphore whose commands run on. An operator sets allkeys-lru
    // for a moment while an application writes keys without expiry, then sets volatile-lru
    // back. Whatever was evicted, nobody new may get in until the holders that lost their
    // keys have had the grace to find out and stop.
    const bool seen = GENERATE(true, false); // a call saw the policy in force, or none did
    CAPTURE(seen);
    RedisServer::Options options;
    options.extra_args = {"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"};
    RedisServer server(options);
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    for (int i = 0; i < 2; ++i) {
        REQUIRE(
            run_redsem({"acquire", "esem", "-n", "2", "--ttl", "60s", "-w", "0"}, env).exit_code ==
            0);
    }
    set_policy(admin, "allkeys-lru");
    if (seen) {
        const auto during = run_redsem({"acquire", "esem", "-n", "2", "-w", "0"}, env);
        CHECK(during.exit_code == k_unavailable);
    }
    // As the review saw it, the epoch key survives (whether it does is up to chance): else a
    // young server's missing epoch would close admission anyway, for another reason.
    const std::string epoch = admin.call({"DUMP", "redsem:epoch"}).as_string();
    REQUIRE(fill_until_evicted(admin, 50) >= 50);
    set_policy(admin, "volatile-lru");
    INFO("the semaphore's holders key "
         << (zcard(admin, "redsem:{esem}:holders") == 0 ? "was evicted" : "survived"));
    if (admin.call({"EXISTS", "redsem:epoch"}).as_integer() == 0) {
        admin.call({"RESTORE", "redsem:epoch", "0", epoch});
    }

    const long long left = zcard(admin, "redsem:{esem}:holders"); // what eviction left
    for (int i = 0; i < 3; ++i) {
        const auto after = run_redsem({"acquire", "esem", "-n", "2", "-w", "0"}, env);
        INFO("acquire after the policy was set back said: " << after.err);
        CHECK(after.exit_code == k_closed);
        CHECK(after.err.find("may have evicted the keys of 'esem'") != std::string::npos);
    }
    CHECK(zcard(admin, "redsem:{esem}:holders") == left); // nobody was admitted
    const auto status = nlohmann::json::parse(run_redsem({"status", "esem", "--json"}, env).out);
    CHECK(status["admission"]["closed"] == true);
    CHECK(status["admission"]["cause"] == "evicted");
    CHECK(status["admission"]["opens_in_ms"].get<long long>() <= 60000);
    const auto log = run_redsem({"log", "esem", "--json"}, env);
    CHECK(log.out.find("\"cause\":\"evicted\"") != std::string::npos);
    // A caller's own grace still applies to itself alone.
    EnvChanges throwaway = env;
    throwaway["REDSEM_LOSS_GRACE"] = "0";
    CHECK(run_redsem({"acquire", "esem", "-n", "2", "-w", "0"}, throwaway).exit_code == 0);
}

TEST_CASE("a policy set to allkeys-lru and back within the second a library trusts the policy "
          "it read: its evictions still close admission") {
    // The acquire just before the flip has the library keep "volatile-lru: evicts nothing" for
    // k_policy_fresh_ms; the acquire right after the flip back may still trust it. What it
    // must not trust is that nothing was evicted: the counter shows evictions that came after
    // a CONFIG SET, which the policy it knows does not explain.
    RedisServer::Options options;
    options.extra_args = {"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"};
    RedisServer server(options);
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"acquire", "blink", "-n", "2", "--ttl", "60s", "-w", "0"}, env).exit_code ==
            0);
    REQUIRE(run_redsem({"acquire", "blink", "-n", "2", "--ttl", "60s", "-w", "0"}, env).exit_code ==
            0);
    const long long primed_at = server_time_ms(admin);
    const std::string epoch = admin.call({"DUMP", "redsem:epoch"}).as_string();
    admin.call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
    REQUIRE(fill_until_evicted(admin, 50) >= 50);
    admin.call({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"});
    if (admin.call({"EXISTS", "redsem:epoch"}).as_integer() == 0) {
        admin.call({"RESTORE", "redsem:epoch", "0", epoch}); // else it closes for another cause
    }
    const long long left = zcard(admin, "redsem:{blink}:holders");
    const auto after = run_redsem({"acquire", "blink", "-n", "2", "-w", "0"}, env);
    INFO("the acquire came " << server_time_ms(admin) - primed_at
                             << " ms after the policy was read (trusted for " << k_policy_fresh_ms
                             << " ms); it said: " << after.err);
    CHECK(after.exit_code == k_closed);
    CHECK(after.err.find("may have evicted the keys of 'blink'") != std::string::npos);
    CHECK(zcard(admin, "redsem:{blink}:holders") == left); // nobody was admitted
}

TEST_CASE("an allkeys-lru policy set back to noeviction is seen by the very next call, though "
          "a sparing one is trusted for a second") {
    // The library trusts only a sparing policy for k_policy_fresh_ms: an evicting one is read
    // again, so that admission opens as soon as an operator sets the policy back. Each try
    // proves itself: the refusal and the acquire after it must fall within that second (a
    // loaded machine may need another try; where none fits, the acquire is still checked).
    RedisServer::Options options;
    options.extra_args = {"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-lru"};
    RedisServer server(options);
    Connection admin = server.admin();
    EnvChanges env = env_for(server);
    env["REDSEM_LOSS_GRACE"] = "0"; // a young server's missing epoch closes nothing
    bool within = false;
    for (int attempt = 0; attempt < 5 && !within; ++attempt) {
        admin.call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
        const long long before = server_time_ms(admin);
        const auto refused = run_redsem({"acquire", "back", "-w", "0"}, env);
        INFO("the acquire under allkeys-lru said: " << refused.err);
        REQUIRE(refused.exit_code == k_unavailable);
        REQUIRE(refused.err.find("allkeys-lru") != std::string::npos);
        admin.call({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
        const auto after = run_redsem({"acquire", "back", "-w", "0"}, env);
        const long long took = server_time_ms(admin) - before;
        within = took < k_policy_fresh_ms;
        INFO("try " << attempt << ": refused and acquired again within " << took
                    << " ms; the acquire after the policy was set back said: " << after.err);
        REQUIRE(after.exit_code == 0);
        REQUIRE(run_redsem({"release", "back", first_line(after.out)}, env).exit_code == 0);
    }
    if (!within) {
        WARN("no try fit the refusal and the next acquire within k_policy_fresh_ms: the "
             "acquires succeeded, but a policy trusted for that second would not have shown");
    }
}

TEST_CASE("evictions under the policy in force all along close nothing") {
    RedisServer::Options options;
    options.extra_args = {"--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"};
    RedisServer server(options);
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    REQUIRE(run_redsem({"acquire", "calm", "-n", "3", "--ttl", "5m", "-w", "0"}, env).exit_code ==
            0);
    fill(admin); // expiring cache entries, evicted to make room
    REQUIRE(evicted_keys(admin) > 0);
    const auto second = run_redsem({"acquire", "calm", "-n", "3", "-w", "0"}, env);
    INFO(second.err);
    CHECK(second.exit_code == 0);
    // A CONFIG SET of another setting, then more evictions: a possible loss (it could have
    // been the policy, set and set back).
    admin.call({"CONFIG", "SET", "maxmemory-samples", "6"});
    const long long before = evicted_keys(admin);
    const std::string value(20 * 1024, 'z');
    for (int i = 0; i < 600 && evicted_keys(admin) == before; ++i) {
        admin.call({"SET", "more:" + std::to_string(i), value, "PX", "600000"});
    }
    REQUIRE(evicted_keys(admin) > before);
    CHECK(run_redsem({"acquire", "calm", "-n", "3", "-w", "0"}, env).exit_code == k_closed);
}

TEST_CASE("a waiter whose record went (evicted, or deleted by hand) queues again when its turn "
          "comes, and is not told it was released") {
    RedisServer server;
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    const auto held = run_redsem({"acquire", "rec", "--ttl", "5m", "-w", "0"}, env);
    REQUIRE(held.exit_code == 0);
    Child waiter({"acquire", "rec", "--ttl", "5m", "-w", "60s"}, env);
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{rec}:queue") == 1; }, 10s));
    // The records of the holder and the waiter go (as an eviction of the key takes them):
    // the release cannot tell whose slot it was, and the waiter finds the slot free when it
    // next refreshes its place, which hands the slot to the head of the queue: itself,
    // without a record.
    admin.call({"DEL", "redsem:{rec}:info"});
    run_redsem({"release", "rec", first_line(held.out)}, env);
    const auto got = waiter.wait(30s);
    INFO(got.err);
    CHECK(got.exit_code == 0);
    CHECK(got.err.find("released") == std::string::npos);
    CHECK(zcard(admin, "redsem:{rec}:holders") == 1);
}

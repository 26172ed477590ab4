// The protocol through the core library, with real connections to a private redis-server.
#include <catch2/catch.hpp>

#include "process/holder_meta.hpp"
#include "semaphore/record.hpp"
#include "semaphore/semaphore.hpp"
#include "support/helpers.hpp"
#include "util/token.hpp"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

Connection connect_to(const RedisServer& server) {
    return Connection(ConnectOptions{parse_redis_url(server.socket_url())});
}

AcquireOptions options_for(long long limit, std::optional<Milliseconds> wait = std::nullopt) {
    AcquireOptions options;
    options.limit = limit;
    options.wait = wait;
    options.meta = holder_meta("test", getpid(), "run");
    return options;
}

} // namespace

TEST_CASE("a retried acquire with the same token does not take a second slot") {
    RedisServer server;
    Connection connection = connect_to(server);
    Semaphore semaphore(connection, "redsem", "idem");
    const std::string token = generate_token();
    const auto first = semaphore.acquire(options_for(2, 0ms), token);
    auto again = options_for(2, 0ms);
    again.retry = true;
    const auto retry = semaphore.acquire(again, token);
    REQUIRE(first);
    REQUIRE(retry);
    CHECK(retry->fence == first->fence);
    CHECK(retry->slot == first->slot);
    CHECK(retry->deadline_ms == first->deadline_ms);
    Connection admin = server.admin();
    CHECK(zcard(admin, "redsem:{idem}:holders") == 1);
    // The second slot is still free for somebody else.
    CHECK(semaphore.acquire(options_for(2, 0ms), generate_token()));
    CHECK_FALSE(semaphore.acquire(options_for(2, 0ms), generate_token()));
}

TEST_CASE("holder metadata is stored for inspection and pruned with the holder") {
    RedisServer server;
    Connection connection = connect_to(server);
    Semaphore semaphore(connection, "redsem", "meta");
    auto options = options_for(1, 0ms);
    options.meta = holder_meta("nightly \xff backup", getpid(), "run");
    options.ttl = 200ms;
    Connection admin = server.admin();
    const Reply time = admin.call({"TIME"});
    const long long before_ms = std::stoll(time.as_array()[0].as_string()) * 1000 +
                                std::stoll(time.as_array()[1].as_string()) / 1000;
    const auto lease = semaphore.acquire(options, generate_token());
    REQUIRE(lease);
    const auto record =
        parse_record(admin.call({"HGET", "redsem:{meta}:info", lease->token}).as_string());
    REQUIRE(record);
    CHECK(record->kind == Record::Kind::holder);
    CHECK(record->meta.pid == static_cast<long long>(getpid()));
    CHECK(record->meta.host == options.meta.host);
    CHECK(record->meta.user == options.meta.user);
    CHECK(record->meta.label.rfind("nightly ", 0) == 0);
    CHECK(record->slot == 0);
    CHECK(record->fence == lease->fence);
    // Granted in between (the lease's server_now_ms is later when a grant that arrived late
    // by the local clock was renewed first: a slow machine, a 200 ms lease).
    CHECK(record->since_ms >= before_ms);
    CHECK(record->since_ms <= lease->server_now_ms);
    CHECK(record->ttl_ms == 200);

    std::this_thread::sleep_for(300ms);
    // An acquire prunes the expired holder and its metadata before counting.
    const auto next = semaphore.acquire(options_for(1, 0ms), generate_token());
    REQUIRE(next);
    CHECK(semaphore.release(next->token) == ReleaseOutcome::released);
    CHECK(admin.call({"HLEN", "redsem:{meta}:info"}).as_integer() == 0);
    CHECK(zcard(admin, "redsem:{meta}:holders") == 0);
}

TEST_CASE("a blocked waiter is woken by the release, not by a polling interval") {
    RedisServer server;
    Connection holder_connection = connect_to(server);
    Semaphore holder(holder_connection, "redsem", "wake");
    const auto lease = holder.acquire(options_for(1, 0ms), generate_token());
    REQUIRE(lease);

    Connection admin = server.admin();
    std::atomic<bool> queued{false};
    std::optional<Lease> got;
    std::chrono::steady_clock::time_point woke;
    // The waiter queues after this, so it would refresh its place (the polling it must not
    // depend on) no sooner than k_waiter_refresh after it.
    const auto started = std::chrono::steady_clock::now();
    std::thread waiter([&] {
        Connection connection = connect_to(server);
        Semaphore semaphore(connection, "redsem", "wake");
        auto options = options_for(1);
        options.on_wait = [&](const QueuePosition&) { queued = true; };
        got = semaphore.acquire(options, generate_token());
        woke = std::chrono::steady_clock::now();
    });
    // Released once the waiter blocks in its read of the wake list.
    const bool was_blocked = wait_until(
        [&] {
            return queued.load() &&
                   admin.call({"INFO", "clients"}).as_string().find("\nblocked_clients:1\r") !=
                       std::string::npos;
        },
        10s);
    if (!was_blocked) {
        waiter.detach(); // its acquire has no end; the process fails the test
    }
    REQUIRE(was_blocked);
    CHECK(holder.release(lease->token) == ReleaseOutcome::released);
    waiter.join();
    REQUIRE(got);
    CHECK(got->waited);
    CHECK(got->handed_over);
    // It had the slot before its first refresh could have come: the release woke it. (Not a
    // bound on how quickly: only a test process stalled for over a second fails it wrongly.)
    CHECK(woke - started < k_waiter_refresh);
    CHECK(got->fence > lease->fence);
}

TEST_CASE("fences stay increasing after the semaphore's keys expire") {
    RedisServer server;
    Connection connection = connect_to(server);
    Semaphore semaphore(connection, "redsem", "fence");
    const auto first = semaphore.acquire(options_for(1, 0ms), generate_token());
    REQUIRE(first);
    Connection admin = server.admin();
    for (const auto& key : semaphore.keys().script_keys()) {
        if (key != semaphore.keys().epoch) {
            admin.call({"DEL", key});
        }
    }
    const auto second = semaphore.acquire(options_for(1, 0ms), generate_token());
    REQUIRE(second);
    CHECK(second->fence > first->fence);
}

TEST_CASE("32 concurrent clients on limit 3: an outside observer never sees more than 3") {
    RedisServer server;
    constexpr int k_clients = 32;
    constexpr int k_cycles_each = 32; // 1024 cycles in all
    constexpr long long k_limit = 3;
    std::atomic<long long> max_seen{0};
    std::atomic<int> cycles{0};
    std::atomic<int> failures{0};
    std::mutex slots_mutex;
    std::set<long long> slots_in_use;
    bool slot_clash = false;

    std::vector<std::thread> clients;
    for (int c = 0; c < k_clients; ++c) {
        clients.emplace_back([&] {
            try {
                Connection connection = connect_to(server);
                Connection observer = connect_to(server);
                Semaphore semaphore(connection, "redsem", "load");
                for (int i = 0; i < k_cycles_each; ++i) {
                    const auto lease = semaphore.acquire(options_for(k_limit), generate_token());
                    if (!lease) {
                        ++failures;
                        continue;
                    }
                    // The observer counts holders in a key of its own; redsem never sees it.
                    const long long inside =
                        observer.call({"INCR", "observer:inside"}).as_integer();
                    long long seen = max_seen.load();
                    while (inside > seen && !max_seen.compare_exchange_weak(seen, inside)) {
                    }
                    {
                        std::lock_guard lock(slots_mutex);
                        if (lease->slot < 0 || lease->slot >= k_limit ||
                            !slots_in_use.insert(lease->slot).second) {
                            slot_clash = true;
                        }
                    }
                    std::this_thread::sleep_for(std::chrono::microseconds(200));
                    {
                        std::lock_guard lock(slots_mutex);
                        slots_in_use.erase(lease->slot);
                    }
                    observer.call({"DECR", "observer:inside"});
                    if (semaphore.release(lease->token) != ReleaseOutcome::released) {
                        ++failures;
                    }
                    ++cycles;
                }
            } catch (const std::exception& error) {
                ++failures;
                UNSCOPED_INFO("client failed: " << error.what());
            }
        });
    }
    for (auto& client : clients) {
        client.join();
    }
    CHECK(failures == 0);
    CHECK(cycles == k_clients * k_cycles_each);
    CHECK(max_seen <= k_limit);
    CHECK(max_seen >= 2); // the run really was concurrent
    CHECK_FALSE(slot_clash);
    Connection admin = server.admin();
    CHECK(zcard(admin, "redsem:{load}:holders") == 0);
    CHECK(zcard(admin, "redsem:{load}:queue") == 0);
}

namespace {

// An acquire of `token` as this release sends it (names and values), without the flags
// Connection::eval adds.
std::vector<std::string> acquire_named(const Keys& keys, const std::string& token) {
    return keys.script_args(wire::acquire_args({.token = token,
                                                .limit = 2,
                                                .ttl = Milliseconds{60'000},
                                                .liveness = Milliseconds{60'000},
                                                .meta_json = R"({"host":"h","pid":1})",
                                                .loss_grace = Milliseconds{0}}));
}

// The keys of semaphore `name` that exist on the server of `admin`.
std::vector<std::string> keys_of(Connection& admin, const std::string& name) {
    std::vector<std::string> found;
    const Reply keys = admin.call({"KEYS", "redsem:{" + name + "}:*"});
    for (const Reply& key : keys.as_array()) {
        found.push_back(key.as_string());
    }
    return found;
}

} // namespace

TEST_CASE("a script called with names it does not declare refuses before it writes, by FCALL "
          "and by EVAL, and serves the declared names in another order") {
    RedisServer server;
    Connection admin = server.admin();
    admin.call({"FUNCTION", "LOAD", "REPLACE", scripts::k_library.code});
    const Keys keys = Keys::make("redsem", "named");
    const Script& acquire = scripts::k_acquire_script;
    // A call as the server sees it: by FCALL or EVAL, with the keys, then `args`, then the
    // flags (1: sent by EVAL).
    const auto send = [&](bool by_eval, std::vector<std::string> args) {
        std::vector<std::string> command{by_eval ? "EVAL" : "FCALL",
                                         by_eval ? acquire.body : acquire.function,
                                         std::to_string(keys.script_keys().size())};
        for (const std::string& key : keys.script_keys()) {
            command.push_back(key);
        }
        command.insert(command.end(), args.begin(), args.end());
        command.insert(command.end(), {"flags", by_eval ? "1" : "0"});
        return admin.command(command); // (error replies included)
    };
    const std::string token = generate_token();
    const std::vector<std::string> good = acquire_named(keys, token);
    // ARGV[1] and ARGV[2], then the names and values.
    REQUIRE(good.size() == 2 + 2 * acquire.params.size());
    const auto with = [&](auto change) {
        std::vector<std::string> args = good;
        change(args);
        return args;
    };
    const auto at_name = [&](std::vector<std::string>& args, std::string_view name) {
        return std::find(args.begin() + 2, args.end(), name);
    };
    const std::vector<std::pair<std::vector<std::string>, std::string>> wrong = {
        {with([&](auto& args) { *at_name(args, "wants") = "weight"; }),
         "no argument is named 'weight'"},
        {with([&](auto& args) {
             args.insert(args.end(), {"ttl_ms", "1"});
         }),
         "the argument 'ttl_ms' is given twice"},
        {with([&](auto& args) {
             const auto name = at_name(args, "first_answer_ms");
             args.erase(name, name + 2);
         }),
         "the argument 'first_answer_ms' is missing"},
        {with([&](auto& args) { args.emplace_back("token"); }),
         "its arguments are not names and values"},
        // The positional call of an earlier build: the values of its ten arguments (the first
        // ten names now) where names belong.
        {with([&](auto& args) {
             std::vector<std::string> positional(args.begin(), args.begin() + 2);
             for (std::size_t i = 3; positional.size() < 12; i += 2) {
                 positional.push_back(args[i]);
             }
             args = positional;
         }),
         "no argument is named '" + token + "'"},
    };
    for (const bool by_eval : {false, true}) {
        for (const auto& [args, why] : wrong) {
            INFO((by_eval ? "EVAL: " : "FCALL: ") << why);
            const Reply reply = send(by_eval, args);
            REQUIRE(reply.is_error());
            CHECK(reply.text == "ERR redsem script called wrongly: acquire: " + why);
        }
    }
    CHECK(keys_of(admin, "named").empty());
    // The declared names in the reverse order: the general reader serves them as the fast one
    // serves redsem's own calls.
    const auto reversed = [](std::vector<std::string> args) {
        std::vector<std::string> out(args.begin(), args.begin() + 2);
        for (std::size_t i = args.size(); i > 2; i -= 2) {
            out.push_back(args[i - 2]);
            out.push_back(args[i - 1]);
        }
        return out;
    };
    const std::string second = generate_token();
    CHECK(reply_kind(send(false, reversed(good))) == "ok");
    CHECK(reply_kind(send(true, reversed(acquire_named(keys, second)))) == "ok");
    CHECK(zcard(admin, "redsem:{named}:holders") == 2);
    CHECK(admin.call({"ZSCORE", "redsem:{named}:holders", token}).type == Reply::Type::string);
    CHECK(admin.call({"ZSCORE", "redsem:{named}:holders", second}).type == Reply::Type::string);
}

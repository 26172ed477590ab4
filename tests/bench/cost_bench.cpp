// redsem-cost-bench: what each script costs Redis, and whether that grows with the semaphore.
// Prints one JSON object; asserts nothing.
//
//   redsem-cost-bench --url URL [--sizes 10,10000] [--cycles 2000] [--eval]
//
// For each size N, one semaphore (limit N) is filled with N holders and N waiters through the
// real acquire script, then one client runs cycles of: release the oldest holder (its slot
// goes to the head of the queue), acquire with a new token (it queues at the back), renew a
// holder. So the semaphore keeps N holders and N waiters throughout. A last scenario, "free",
// takes and gives back slots of a semaphore nobody waits for (no hand-over, no queue).
//
// Redis's own time per script call (the time the command runs, its inner calls included, not
// its network I/O) and the calls it makes inside Redis are read from INFO commandstats,
// reset before each call. Round trips are timed by the client. "bare" is the floor: a script
// that only returns 1, by EVALSHA and by FCALL. --eval sends redsem's scripts by EVALSHA (as
// REDSEM_FUNCTIONS=0 does), for a comparison with the same build. (SLOWLOG would log each inner
// call too, which slows down the scripts it measures.) Resets the server's statistics: point
// it at a private server.
#include "bench_support.hpp"
#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/wire.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <deque>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

using namespace redsem;
using namespace redsem::bench;

namespace {

struct ScriptStats {
    std::vector<double> redis_us;
    std::vector<double> round_trip_us;
    long long inner_calls = 0;
};

// Calls one script; times its round trip, and reads what it cost Redis.
class Runner {
public:
    Runner(Connection& client, Connection& admin) : m_client(client), m_admin(admin) {}

    Reply call(const ScriptCall& call) {
        m_admin.call({"CONFIG", "RESETSTAT"});
        const auto start = Clock::now();
        Reply reply = m_client.eval(call);
        const auto elapsed = std::chrono::duration<double, std::micro>(Clock::now() - start);
        const CommandStats ran = command_stats(m_admin);
        ScriptStats& stats = m_stats[call.script.name];
        stats.round_trip_us.push_back(elapsed.count());
        stats.redis_us.push_back(ran.script_us);
        stats.inner_calls += ran.commands - ran.scripts; // less the FCALL or EVALSHA itself
        return reply;
    }

    std::map<std::string, ScriptStats>& stats() { return m_stats; }

private:
    Connection& m_client;
    Connection& m_admin;
    std::map<std::string, ScriptStats> m_stats;
};

ScriptCall release_call(const Keys& keys, const std::string& token) {
    return ScriptCall{scripts::k_release_script, keys.script_keys(),
                      keys.script_args(wire::release_args(token, true, std::nullopt, false))};
}

ScriptCall renew_call(const Keys& keys, const std::string& token) {
    return ScriptCall{scripts::k_renew_script, keys.script_keys(),
                      keys.script_args(wire::renew_args(token, std::nullopt, false, false))};
}

nlohmann::json summary(std::map<std::string, ScriptStats>& stats) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [name, script] : stats) {
        out[name] = {
            {"calls", script.round_trip_us.size()},
            {"redis_us_p50", percentile(script.redis_us, 0.5)},
            {"redis_us_mean", mean(script.redis_us)},
            {"round_trip_us_p50", percentile(script.round_trip_us, 0.5)},
            {"redis_calls_per_script", static_cast<double>(script.inner_calls) /
                                           static_cast<double>(script.round_trip_us.size())}};
    }
    return out;
}

// N holders and N waiters; cycles of release (a hand-over), acquire (queued), renew.
nlohmann::json full_semaphore(Connection& client, Connection& admin, long long size, int cycles) {
    const std::string name = fmt::format("cost{}", size);
    const Keys keys = Keys::make("redsem", name);
    std::deque<std::string> holders;
    std::deque<std::string> waiters;
    std::vector<ScriptCall> fill;
    for (long long i = 0; i < size; ++i) {
        holders.push_back(generate_token());
        fill.push_back(acquire_call(name, holders.back(), size, k_long_ms, false));
    }
    for (long long i = 0; i < size; ++i) {
        waiters.push_back(generate_token());
        fill.push_back(acquire_call(name, waiters.back(), size, k_long_ms, true));
    }
    run_batched(admin, fill);

    Runner runner(client, admin);
    for (int i = 0; i < cycles; ++i) {
        if (wire::decode_release(runner.call(release_call(keys, holders.front()))) !=
            ReleaseOutcome::released) {
            throw std::runtime_error("a release found no holder");
        }
        holders.pop_front();
        // Handed over: collect the grant as the waiter's BLPOP would (not measured), or it
        // would be taken back CLAIM_MS later.
        if (client.call({"LPOP", keys.wake_prefix + waiters.front()}).is_nil()) {
            throw std::runtime_error("a release handed the slot to nobody");
        }
        holders.push_back(waiters.front());
        waiters.pop_front();
        waiters.push_back(generate_token());
        const Reply queued = runner.call(acquire_call(name, waiters.back(), size, k_long_ms, true));
        if (wire::Fields(queued, "acquire.lua").kind() != "wait") {
            throw std::runtime_error("an acquire was not queued");
        }
        runner.call(renew_call(keys, holders.front()));
    }
    return {{"holders", size},
            {"waiters", size},
            {"cycles", cycles},
            {"scripts", summary(runner.stats())}};
}

// A semaphore nobody waits for: acquire (granted at once), release (no hand-over).
nlohmann::json free_semaphore(Connection& client, Connection& admin, int cycles) {
    const std::string name = "costfree";
    const Keys keys = Keys::make("redsem", name);
    Runner runner(client, admin);
    for (int i = 0; i < cycles; ++i) {
        const std::string token = generate_token();
        const Reply granted = runner.call(acquire_call(name, token, 1, k_long_ms, true));
        if (wire::Fields(granted, "acquire.lua").kind() != "ok") {
            throw std::runtime_error("a free semaphore was not granted");
        }
        runner.call(release_call(keys, token));
    }
    return {{"cycles", cycles}, {"scripts", summary(runner.stats())}};
}

// Redis's time for a script that does nothing but return 1, called as redsem's scripts are
// (8 keys, 3 arguments): by EVALSHA, and as a function (FCALL). The floor a script call pays.
nlohmann::json bare_calls(Connection& client, Connection& admin, int cycles) {
    const Keys keys = Keys::make("redsem", "costbare");
    std::vector<std::string> argv = keys.script_keys();
    argv.insert(argv.begin(), std::to_string(argv.size()));
    for (const char* arg : {"prefix", "token", "0"}) {
        argv.emplace_back(arg);
    }
    const std::string body = "return 1";
    const std::string sha = client.call({"SCRIPT", "LOAD", body}).as_string();
    client.call({"FUNCTION", "LOAD", "REPLACE",
                 "#!lua name=redsem_bench_bare\n"
                 "redis.register_function('redsem_bench_bare', function() return 1 end)"});
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [label, head] :
         {std::pair{"evalsha", std::vector<std::string>{"EVALSHA", sha}},
          std::pair{"fcall", std::vector<std::string>{"FCALL", "redsem_bench_bare"}}}) {
        std::vector<std::string> command = head;
        command.insert(command.end(), argv.begin(), argv.end());
        std::vector<double> redis_us;
        for (int i = 0; i < cycles; ++i) {
            admin.call({"CONFIG", "RESETSTAT"});
            client.call(command);
            redis_us.push_back(command_stats(admin).script_us);
        }
        out[label] = {{"redis_us_p50", percentile(redis_us, 0.5)},
                      {"redis_us_mean", mean(redis_us)}};
    }
    client.call({"FUNCTION", "DELETE", "redsem_bench_bare"});
    return out;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"What each redsem script costs Redis, at several sizes"};
    std::string url;
    std::vector<long long> sizes{10, 10'000};
    int cycles = 2000;
    app.add_option("--url", url, "Redis URL of a private server")->required();
    app.add_option("--sizes", sizes, "Holders (and as many waiters) per semaphore")->delimiter(',');
    app.add_option("--cycles", cycles, "Cycles per size")->check(CLI::Range(1, 1'000'000));
    bool eval_only = false;
    app.add_flag("--eval", eval_only, "Send the scripts by EVALSHA, not as functions (FCALL)");
    CLI11_PARSE(app, argc, argv);

    const ConnectOptions connect{.url = parse_redis_url(url), .functions = !eval_only};
    Connection admin(connect);
    Connection client(connect);
    nlohmann::json results = nlohmann::json::array();
    for (const long long size : sizes) {
        results.push_back(full_semaphore(client, admin, size, cycles));
    }
    const nlohmann::json free = free_semaphore(client, admin, cycles);
    const nlohmann::json bare = bare_calls(client, admin, cycles);

    // The largest size against the smallest, per script.
    nlohmann::json growth = nlohmann::json::object();
    const auto& small = results.front()["scripts"];
    const auto& large = results.back()["scripts"];
    for (const auto& [script, stats] : small.items()) {
        growth[script] = {{"redis_us_p50", large[script]["redis_us_p50"].get<double>() /
                                               std::max(1.0, stats["redis_us_p50"].get<double>())},
                          {"round_trip_us_p50", large[script]["round_trip_us_p50"].get<double>() /
                                                    stats["round_trip_us_p50"].get<double>()}};
    }
    std::cout << nlohmann::json{{"sent_by", eval_only ? "EVALSHA" : "FCALL"},
                                {"sizes", results},
                                {"free", free},
                                {"bare", bare},
                                {"renew_over_bare_evalsha",
                                 small["renew"]["redis_us_p50"].get<double>() /
                                     bare["evalsha"]["redis_us_p50"].get<double>()},
                                {"largest_over_smallest", growth}}
                     .dump(2)
              << "\n";
    return 0;
}

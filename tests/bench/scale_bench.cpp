// redsem-scale-bench: times `redsem status` and `redsem gc` at scale, and reports the longest
// single Redis call each made (from SLOWLOG). Prints numbers; asserts nothing.
//
//   redsem-scale-bench --url URL --redsem PATH/TO/redsem [--holders 10000] [--semaphores 10000]
//                      [--expired 100000]
//
// Populates through the real acquire script (pipelined): one semaphore with N holders and N
// waiters (waiters get a long liveness so they stay queued while measured), M semaphores with
// one holder each, half of whose leases run out before gc runs, and one semaphore with E
// holders whose leases all run out (gc must clean it without one long call). Uses FLUSHDB:
// point it at a private server.
#include "bench_support.hpp"
#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "semaphore/keys.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::bench;

namespace {

constexpr long long k_logged_from_us = 200;

// Runs redsem with `args`, stdout to /dev/null; returns wall seconds.
double time_redsem(const std::string& redsem, const std::string& url,
                   const std::vector<std::string>& args) {
    const auto start = Clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
        std::vector<std::string> all{redsem, "--url", url};
        all.insert(all.end(), args.begin(), args.end());
        std::vector<char*> argv;
        for (auto& arg : all) {
            argv.push_back(arg.data());
        }
        argv.push_back(nullptr);
        if (freopen("/dev/null", "w", stdout) == nullptr) {
            _exit(1);
        }
        execv(argv[0], argv.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw std::runtime_error("redsem failed");
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// The longest call in SLOWLOG since the last reset: {microseconds, command name}.
std::pair<long long, std::string> longest_call(Connection& admin) {
    const Reply log = admin.call({"SLOWLOG", "GET", "1000000"});
    long long longest = 0;
    std::string name;
    for (const Reply& entry : log.as_array()) {
        const long long micros = entry.at(2).as_integer();
        const std::string command = entry.at(3).at(0).as_string();
        if (command != "SLOWLOG" && micros > longest) {
            longest = micros;
            name = command;
        }
    }
    return {longest, name};
}

nlohmann::json measure(Connection& admin, const std::string& redsem, const std::string& url,
                       const std::vector<std::string>& args) {
    admin.call({"SLOWLOG", "RESET"});
    const double seconds = time_redsem(redsem, url, args);
    const auto [micros, command] = longest_call(admin);
    std::string shown = "redsem";
    for (const auto& arg : args) {
        shown += " " + arg;
    }
    return {{"command", shown},
            {"seconds", seconds},
            {"longest_call_us", micros}, // 0: no call took k_logged_from_us or more
            {"longest_call", command}};
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// `args` run by `redsem` and by `against` in turn, `rounds` times each, against the same data
// (read-only commands): the median of each, and their ratio.
nlohmann::json compare(const std::string& redsem, const std::string& against,
                       const std::string& url, const std::vector<std::string>& args, int rounds) {
    std::vector<double> ours;
    std::vector<double> theirs;
    for (int round = 0; round < rounds; ++round) {
        ours.push_back(time_redsem(redsem, url, args));
        theirs.push_back(time_redsem(against, url, args));
    }
    std::string shown = "redsem";
    for (const auto& arg : args) {
        shown += " " + arg;
    }
    const double a = median(ours);
    const double b = median(theirs);
    return {{"command", shown},
            {"seconds", a},
            {"seconds_min_max",
             {*std::min_element(ours.begin(), ours.end()),
              *std::max_element(ours.begin(), ours.end())}},
            {"against_seconds", b},
            {"against_min_max",
             {*std::min_element(theirs.begin(), theirs.end()),
              *std::max_element(theirs.begin(), theirs.end())}},
            {"ratio", a / b}};
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Time redsem status and gc at scale"};
    std::string url;
    std::string redsem;
    long long holders = 10'000;
    long long semaphores = 10'000;
    app.add_option("--url", url, "Redis URL of a private server (it is flushed)")->required();
    app.add_option("--redsem", redsem, "The redsem binary")->required();
    app.add_option("--holders", holders, "Holders and waiters of the big semaphore");
    app.add_option("--semaphores", semaphores, "Number of small semaphores");
    long long expired = 100'000;
    app.add_option("--expired", expired, "Expired holders of one semaphore, for gc");
    std::string against;
    app.add_option("--against", against,
                   "Another redsem build: the read-only commands run by both in turn, on the "
                   "same data, and their ratio is printed");
    int rounds = 5;
    app.add_option("--rounds", rounds, "Runs of each build per command, with --against")
        ->check(CLI::Range(1, 100));
    CLI11_PARSE(app, argc, argv);

    Connection admin(ConnectOptions{parse_redis_url(url)});
    admin.call({"FLUSHDB"});
    admin.call({"SCRIPT", "LOAD", scripts::k_acquire_script.body});
    // Log only calls of 200us or more: logging every call (scripts' inner calls included)
    // slows Redis down and makes SLOWLOG itself the longest call.
    admin.call({"CONFIG", "SET", "slowlog-log-slower-than", std::to_string(k_logged_from_us)});
    admin.call({"CONFIG", "SET", "slowlog-max-len", "1000000"});

    std::vector<ScriptCall> commands; // filled, then run in batches
    for (long long i = 0; i < holders; ++i) {
        commands.push_back(acquire_call("big", generate_token(), holders, 600'000, false));
    }
    for (long long i = 0; i < holders; ++i) {
        commands.push_back(acquire_call("big", generate_token(), holders, 600'000, true));
    }
    run_batched(admin, commands);
    nlohmann::json results = nlohmann::json::array();
    results.push_back(measure(admin, redsem, url, {"status", "big"}));
    results.push_back(measure(admin, redsem, url, {"status", "big", "--json"}));
    nlohmann::json compared = nlohmann::json::array();
    if (!against.empty()) {
        compared.push_back(compare(redsem, against, url, {"status", "big"}, rounds));
        compared.push_back(compare(redsem, against, url, {"status", "big", "--json"}, rounds));
    }
    admin.call({"DEL", "redsem:{big}:state", "redsem:{big}:holders", "redsem:{big}:info",
                "redsem:{big}:queue", "redsem:{big}:alive", "redsem:{big}:slots"});

    for (long long i = 0; i < semaphores; ++i) {
        const long long ttl = i % 2 == 0 ? 100 : 600'000; // half expire before gc runs
        commands.push_back(acquire_call(fmt::format("s{:05}", i), generate_token(), 1, ttl, false));
    }
    run_batched(admin, commands);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    results.push_back(measure(admin, redsem, url, {"status"}));
    if (!against.empty()) {
        for (const std::vector<std::string>& args :
             {std::vector<std::string>{"status"}, std::vector<std::string>{"status", "--json"},
              std::vector<std::string>{"status", "--format", "prometheus"},
              std::vector<std::string>{"gc", "--dry-run"}}) {
            compared.push_back(compare(redsem, against, url, args, rounds));
        }
    }
    results.push_back(measure(admin, redsem, url, {"gc", "--dry-run"}));
    results.push_back(measure(admin, redsem, url, {"gc"}));

    // One semaphore full of leases that all ran out: gc works through it in bounded calls.
    // (The leases outlast the filling, or later acquires would prune the first ones.)
    constexpr long long k_dead_ttl_ms = 30'000;
    const auto filled_from = Clock::now();
    for (long long i = 0; i < expired; ++i) {
        commands.push_back(acquire_call("dead", generate_token(), 100'000, k_dead_ttl_ms, false));
    }
    run_batched(admin, commands);
    std::this_thread::sleep_until(filled_from + std::chrono::milliseconds(k_dead_ttl_ms + 500));
    results.push_back(measure(admin, redsem, url, {"gc", "dead", "--dry-run"}));
    results.push_back(measure(admin, redsem, url, {"gc", "dead"}));
    admin.call({"CONFIG", "SET", "slowlog-log-slower-than", "10000"});

    std::cout << nlohmann::json{{"holders", holders},       {"waiters", holders},
                                {"semaphores", semaphores}, {"expired_holders", expired},
                                {"results", results},       {"compared", compared}}
                     .dump(2)
              << "\n";
    return 0;
}

// redsem-bench: throughput and hand-off latency of the semaphore protocol, through the same
// core library as the CLI. Prints one JSON object. Not a test: it asserts nothing.
//
//   redsem-bench --url URL [--clients 50] [--limit 5] [--seconds 10] [--name bench]
//                [--history N]
//
// Each client is a thread with its own connection, looping acquire -> release. A hand-off is
// timed from the moment a holder starts its release to the moment the blocked waiter that the
// release handed the slot to returns holding it. The slot number identifies the release: a
// slot is handed over only by the release that freed it.
#include "bench_support.hpp"
#include "process/holder_meta.hpp"
#include "redis/connection.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

using namespace redsem;
using redsem::bench::Clock;
using redsem::bench::percentile;

namespace {

struct Sample {
    std::vector<double> handoff_ms;
    long long cycles = 0;
};

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
        .count();
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"Benchmark redsem's acquire/release cycle and hand-off latency"};
    std::string url = "redis://127.0.0.1:6379";
    int clients = 50;
    long long limit = 5;
    double seconds = 10;
    std::string name = "bench";
    std::optional<long long> history;
    app.add_option("--url", url, "Redis URL")->capture_default_str();
    app.add_option("--clients", clients, "Client threads")->check(CLI::Range(1, 1000));
    app.add_option("--limit", limit, "Semaphore limit")->check(CLI::Range(1, 100000));
    app.add_option("--seconds", seconds, "Run time")->check(CLI::Range(0.1, 3600.0));
    app.add_option("--name", name, "Semaphore name");
    bool eval_only = false;
    app.add_flag("--eval", eval_only, "Send the scripts by EVALSHA, not as functions (FCALL)");
    app.add_option("--history", history,
                   "Events the semaphore's history keeps (0: none; default: "
                   "redsem's default)")
        ->check(CLI::Range(0LL, k_max_history));
    CLI11_PARSE(app, argc, argv);

    ConnectOptions connect{.url = parse_redis_url(url), .functions = !eval_only};
    {
        Connection cleanup(connect);
        Semaphore semaphore(cleanup, k_default_prefix, name);
        for (const auto& key : semaphore.keys().script_keys()) {
            cleanup.call({"DEL", key});
        }
    }

    // Per slot: when its last holder started releasing it.
    std::vector<std::atomic<long long>> release_started(static_cast<std::size_t>(limit));
    std::atomic<bool> stop{false};
    std::atomic<int> errors{0};
    // The observer: how many clients believe they hold a slot at once (never above the limit).
    std::atomic<long long> holding{0};
    std::atomic<long long> most_holding{0};
    std::mutex merge_mutex;
    if (history) {
        // The history's length is the semaphore's setting, stored as an operator would.
        Connection connection(connect);
        Semaphore(connection, k_default_prefix, name).limit(std::nullopt, history);
    }
    Sample total;
    std::vector<std::thread> threads;
    const auto started = Clock::now();
    for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&] {
            Sample mine;
            try {
                Connection connection(connect);
                Semaphore semaphore(connection, k_default_prefix, name);
                AcquireOptions options;
                options.limit = limit;
                options.ttl = std::chrono::seconds(30);
                options.loss_grace = Milliseconds{0}; // a private, brand-new server
                options.meta = holder_meta("redsem-bench", getpid(), "run");
                while (!stop) {
                    const auto lease = semaphore.acquire(options, generate_token());
                    const long long got = now_ns();
                    if (!lease) {
                        continue;
                    }
                    const long long now_holding = ++holding;
                    long long most = most_holding.load();
                    while (now_holding > most &&
                           !most_holding.compare_exchange_weak(most, now_holding)) {
                    }
                    auto& slot_release = release_started[static_cast<std::size_t>(lease->slot)];
                    const long long freed = slot_release.load();
                    if (lease->handed_over && freed != 0) {
                        mine.handoff_ms.push_back(static_cast<double>(got - freed) / 1e6);
                    }
                    slot_release = now_ns();
                    --holding;
                    semaphore.release(lease->token);
                    ++mine.cycles;
                }
            } catch (const std::exception& error) {
                ++errors;
                std::cerr << "redsem-bench: client failed: " << error.what() << "\n";
            }
            std::lock_guard lock(merge_mutex);
            total.cycles += mine.cycles;
            total.handoff_ms.insert(total.handoff_ms.end(), mine.handoff_ms.begin(),
                                    mine.handoff_ms.end());
        });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
    // Waiters blocked in the queue are woken by the holders' last releases.
    for (auto& thread : threads) {
        thread.join();
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - started).count();

    const nlohmann::json out{
        {"clients", clients},
        {"limit", limit},
        {"seconds", elapsed},
        {"cycles", total.cycles},
        {"cycles_per_second", static_cast<double>(total.cycles) / elapsed},
        {"handoffs", total.handoff_ms.size()},
        {"handoff_p50_ms", percentile(total.handoff_ms, 0.50)},
        {"handoff_p99_ms", percentile(total.handoff_ms, 0.99)},
        {"max_concurrent_holders", most_holding.load()},
        {"errors", errors.load()},
        {"history", history ? nlohmann::json(*history) : nlohmann::json("default")},
    };
    std::cout << out.dump(2) << "\n";
    return errors == 0 && most_holding <= limit ? 0 : 1;
}

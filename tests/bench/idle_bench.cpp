// redsem-idle-bench: what idle waiters cost Redis. Prints one JSON object; asserts nothing.
//
//   redsem-idle-bench --url URL --waiters 10000 [--seconds 60] [--baseline-seconds 0]
//                     [--name idle]
//
// One slot of a limit-1 semaphore is held for the whole run; N waiters queue behind it, each a
// thread with its own connection running the library's real acquire (as `redsem acquire`
// does: refreshing its place, blocked on its wake list in between). Once all are queued, and
// have made their first refresh (each newcomer makes it 1.5s after it queued), the server's
// commands (scripts' inner calls included) and CPU time are read over the window from INFO.
// The waiters then leave the queue. With --baseline-seconds, the same is first measured for N
// connections that only connect (what so many clients cost Redis whatever they do: its
// per-client housekeeping). Redis needs --maxclients above N, and this process N file
// descriptors (it raises its own soft limit).
#include "bench_support.hpp"
#include "lua_scripts.hpp"
#include "process/holder_meta.hpp"
#include "semaphore/semaphore.hpp"
#include "util/errors.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <pthread.h>
#include <sstream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::bench;

namespace {

struct Shared {
    ConnectOptions connect;
    std::string name;
    int stop_fd = -1; // readable: every waiter stops waiting
    std::atomic<int> failed{0};
};

void* wait_in_queue(void* arg) {
    auto* shared = static_cast<Shared*>(arg);
    try {
        Connection connection(shared->connect);
        Semaphore semaphore(connection, k_default_prefix, shared->name);
        AcquireOptions options;
        options.limit = 1;
        options.loss_grace = Milliseconds{0}; // a private, brand-new server
        options.interrupt_fd = shared->stop_fd;
        options.meta = holder_meta("redsem-idle-bench", getpid(), "run");
        semaphore.acquire(options, generate_token());
        ++shared->failed; // granted: the held slot was lost
    } catch (const WaitInterrupted&) {
        // the end of the run
    } catch (const std::exception& error) {
        ++shared->failed;
        std::cerr << "redsem-idle-bench: a waiter failed: " << error.what() << "\n";
    }
    return nullptr;
}

// INFO's `field` (a number) from section `section`.
double info_field(Connection& admin, const std::string& section, const std::string& field) {
    std::istringstream lines(admin.call({"INFO", section}).as_string());
    for (std::string line; std::getline(lines, line);) {
        if (line.starts_with(field + ":")) {
            return std::stod(line.substr(field.size() + 1));
        }
    }
    throw std::runtime_error("INFO has no " + field);
}

double server_cpu_seconds(Connection& admin) {
    return info_field(admin, "cpu", "used_cpu_sys") + info_field(admin, "cpu", "used_cpu_user");
}

struct Window {
    double seconds = 0;
    double commands_per_second = 0;
    double cpu_percent = 0;
};

// Redis's commands and CPU time over `seconds` from now (less the observer's INFO calls).
Window measure(Connection& admin, double seconds) {
    const double commands_before = info_field(admin, "stats", "total_commands_processed");
    const double cpu_before = server_cpu_seconds(admin);
    const auto start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double commands_after = info_field(admin, "stats", "total_commands_processed");
    const double cpu_after = server_cpu_seconds(admin);
    Window window;
    window.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    // The observer's INFO calls inside the window: stats once, cpu twice.
    window.commands_per_second = (commands_after - commands_before - 3) / window.seconds;
    window.cpu_percent = (cpu_after - cpu_before) / window.seconds * 100;
    return window;
}

// What N connections that only connected cost Redis over `seconds`.
Window connections_alone(const ConnectOptions& connect, int count, double seconds,
                         Connection& admin) {
    std::vector<std::unique_ptr<Connection>> connections;
    for (int i = 0; i < count; ++i) {
        connections.push_back(std::make_unique<Connection>(connect));
        connections.back()->call({"PING"});
    }
    return measure(admin, seconds);
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"What idle redsem waiters cost Redis"};
    std::string url;
    int waiters = 100;
    double seconds = 60;
    std::string name = "idle";
    double baseline_seconds = 0;
    app.add_option("--url", url, "Redis URL of a private server")->required();
    app.add_option("--waiters", waiters, "Waiting clients (threads)")->check(CLI::Range(1, 20000));
    app.add_option("--seconds", seconds, "Measured window")->check(CLI::Range(1.0, 3600.0));
    app.add_option("--baseline-seconds", baseline_seconds,
                   "First measure as many connections that only connect")
        ->check(CLI::Range(0.0, 3600.0));
    app.add_option("--name", name, "Semaphore name");
    CLI11_PARSE(app, argc, argv);

    rlimit files{};
    getrlimit(RLIMIT_NOFILE, &files);
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);

    Shared shared{.connect = ConnectOptions{parse_redis_url(url)}, .name = name};
    Connection admin(shared.connect);
    const Keys keys = Keys::make(k_default_prefix, name);
    for (const auto& key : keys.script_keys()) {
        admin.call({"DEL", key});
    }
    std::optional<Window> baseline;
    if (baseline_seconds > 0) {
        baseline = connections_alone(shared.connect, waiters, baseline_seconds, admin);
    }
    // The held slot outlasts the run (a lease that ran out would go to the first waiter).
    const auto hold_ms = static_cast<long long>(seconds * 1000) + waiters * 10 + k_long_ms;
    std::vector<ScriptCall> hold{acquire_call(name, generate_token(), 1, hold_ms, false)};
    run_batched(admin, hold);

    int stop[2];
    if (pipe(stop) != 0) {
        throw std::runtime_error("pipe failed");
    }
    shared.stop_fd = stop[0];
    pthread_attr_t small_stack;
    pthread_attr_init(&small_stack);
    pthread_attr_setstacksize(&small_stack, 256 * 1024);
    std::vector<pthread_t> threads(static_cast<std::size_t>(waiters));
    for (auto& thread : threads) {
        if (pthread_create(&thread, &small_stack, wait_in_queue, &shared) != 0) {
            throw std::runtime_error("cannot start a waiter thread");
        }
    }
    const auto queued_by = Clock::now() + std::chrono::seconds(60 + waiters / 100);
    while (admin.call({"ZCARD", keys.queue}).as_integer() < waiters) {
        if (Clock::now() > queued_by || shared.failed > 0) {
            throw std::runtime_error("the waiters did not all queue");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }

    // Every waiter first looks again 1.5s after it queued, wherever it is (lua/acquire.lua): a
    // one-off refresh each, before the steady state this measures.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const Window window = measure(admin, seconds);
    const long long still_queued = admin.call({"ZCARD", keys.queue}).as_integer();

    [[maybe_unused]] const ssize_t written = write(stop[1], "x", 1);
    for (auto& thread : threads) {
        pthread_join(thread, nullptr);
    }
    nlohmann::json out{{"waiters", waiters},
                       {"seconds", window.seconds},
                       {"still_queued", still_queued},
                       {"commands_per_second", window.commands_per_second},
                       {"redis_cpu_percent", window.cpu_percent},
                       {"failed_waiters", shared.failed.load()}};
    if (baseline) {
        out["connections_alone"] = {{"seconds", baseline->seconds},
                                    {"commands_per_second", baseline->commands_per_second},
                                    {"redis_cpu_percent", baseline->cpu_percent}};
    }
    std::cout << out.dump(2) << "\n";
    return shared.failed == 0 && still_queued == waiters ? 0 : 1;
}

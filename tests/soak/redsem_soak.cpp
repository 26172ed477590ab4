// redsem-soak: runs the chaos harness of the tests (tests/support/chaos.hpp) for minutes:
// many concurrent client processes cycling through semaphores of limit 1, 3 and 10 under
// SIGKILLs, SIGSTOPs, CLIENT PAUSE/KILL, Redis restarts with and without persistence, and
// skewed clocks, against a private redis-server. Prints the figures; exits 1 when the
// observer saw any safety violation or a survivor failed, 2 on a usage error.
//
//   redsem-soak --minutes M --clients N [--ttl DUR] [--seed S] [--redsem PATH]
#include "support/chaos.hpp"
#include "util/duration.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

using namespace redsem;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
    CLI::App app{"Soak redsem under chaos and check that no lease is ever stale"};
    double minutes = 2;
    int clients = 64;
    std::string ttl_text = "1s";
    std::uint64_t seed = 0;
    std::string redsem_path;
    int restarts = -1;
    bool no_skew = false;
    app.add_option("--minutes", minutes, "Length of the chaos phase")
        ->check(CLI::Range(0.05, 1440.0));
    app.add_option("--clients", clients, "Client processes at once")->check(CLI::Range(1, 2000));
    app.add_option("--ttl", ttl_text, "Lease of every client")->capture_default_str();
    app.add_option("--seed", seed, "Random seed (default: from the clock)");
    app.add_option("--redsem", redsem_path, "The redsem binary (default: the one built here)");
    app.add_option("--restarts", restarts,
                   "Redis restarts and failbacks, in turn kept, wiped, rolled back, failed back "
                   "(default: one every 2 minutes, >= 4)");
    app.add_flag("--no-skew", no_skew, "No libfaketime");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        return app.exit(error) == 0 ? 0 : 2;
    }
    test::chaos::Config config;
    try {
        config.ttl = parse_duration(ttl_text, "--ttl");
    } catch (const std::exception& error) {
        std::cerr << "redsem-soak: " << error.what() << "\n";
        return 2;
    }
    if (config.ttl < 100ms) {
        std::cerr << "redsem-soak: --ttl must be at least 100ms\n";
        return 2;
    }
    if (seed == 0) {
        seed =
            static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    }
    const auto ttl = config.ttl;
    config.clients = clients;
    config.duration = std::chrono::duration_cast<test::chaos::Milliseconds>(
        std::chrono::duration<double>(minutes * 60));
    config.seed = seed;
    config.redsem = redsem_path;
    config.skew = !no_skew;
    config.loss_grace = 3 * ttl;
    // Short holds for most, so that cycles add up; a few long ones keep heartbeats renewing.
    config.long_hold_share = 0.06;
    config.short_hold_min = 1ms;
    config.short_hold_max = 15ms;
    config.zero_hold_share = 0.6;
    config.long_hold_min = ttl;
    config.long_hold_max = 3 * ttl;
    config.kill_every = 400ms;
    config.waiter_pause_every = 3s;
    config.holder_pause_every = 3s;
    config.supervisor_pause_every = 4s;
    config.pause_min = ttl * 3 / 2;
    config.pause_max = 3 * ttl;
    config.client_pause = ttl * 3 / 2;
    config.client_pause_every = 45s;
    config.client_kill_every = 20s;
    config.restarts = restarts >= 0 ? restarts : std::max(4, static_cast<int>(minutes / 2));
    config.survivor_grace = 180s;
    config.progress_every = 30s;
    std::cout << "redsem-soak: " << minutes << " min, " << clients << " clients at once, ttl "
              << format_duration(ttl) << ", seed " << seed << ", " << config.restarts
              << " restarts\n";
    std::cout.flush();
    test::chaos::Result result;
    try {
        result = test::chaos::run(config);
    } catch (const std::exception& error) {
        std::cerr << "redsem-soak: cannot run: " << error.what() << "\n";
        return 2;
    }
    const double per_minute =
        result.seconds > 0 ? result.cycles_completed * 60.0 / result.seconds : 0.0;
    std::cout << "redsem-soak: " << result.cycles_completed << " cycles in "
              << static_cast<long long>(result.seconds)
              << " s = " << static_cast<long long>(per_minute) << " cycles/min ("
              << (result.seconds > 0 ? result.cycles_completed / result.seconds : 0.0)
              << "/s) with " << clients << " processes at once; SIGKILLs " << result.sigkills
              << ", SIGSTOPs "
              << result.pauses_waiter + result.pauses_holder + result.pauses_supervisor
              << ", restarts "
              << result.restarts_kept + result.restarts_wiped + result.restarts_rolled_back
              << " and failbacks " << result.failbacks << ", violations "
              << result.overlap_violations + result.slot_violations + result.fence_violations +
                     result.malformed_lines
              << ", failed survivors " << result.survivors_failed + result.survivors_hung << "\n";
    const bool ok = result.safe() && result.live();
    std::cout << "redsem-soak: " << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
}

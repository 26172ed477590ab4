// redsem-soak: runs the chaos harness of the tests (tests/support/chaos.hpp) for minutes:
// many concurrent client processes cycling through semaphores of limit 1, 3, 5 and 10, a share
// of them running the previous release, under every fault of k_faults (SIGKILLs, SIGSTOPs,
// CLIENT PAUSE/KILL, evictions and eviction flips, pauses, grants of several slots, the
// previous release's gc and limit, Redis restarts with and without persistence) and skewed
// clocks, against a private redis-server. Prints the figures; exits 1 when the observer saw
// any safety violation or a survivor failed, 2 on a usage error or when it cannot run.
//
//   redsem-soak --minutes M --clients N [--ttl DUR] [--seed S] [--redsem PATH]
//               [--older PATH] [--older-share F]
#include "support/build_paths.hpp"
#include "support/chaos.hpp"
#include "support/prerequisites.hpp"
#include "util/duration.hpp"

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iostream>

using namespace redsem;
using namespace std::chrono_literals;
using test::chaos::Fault;

int main(int argc, char** argv) {
    CLI::App app{"Soak redsem under chaos and check that no lease is ever stale"};
    double minutes = 2;
    int clients = 64;
    std::string ttl_text = "1s";
    std::uint64_t seed = 0;
    std::string redsem_path;
    int restarts = -1;
    bool no_skew = false;
    std::string older_path;
    double older_share = 1.0 / 6;
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
    app.add_option("--older", older_path,
                   "The previous release's redsem (default: the one built from the history)");
    app.add_option("--older-share", older_share,
                   "Share of the clients (of semaphores with INFO) that run the previous "
                   "release (0: none)")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
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
    config.older_share = older_share;
    config.older_redsem = older_path;
    const std::string older = older_path.empty() ? test::redsem_previous_binary() : older_path;
    if (older_share > 0 && !std::filesystem::exists(older)) {
        // CI has the history, so the release before this one must be in the fleet there.
        std::cerr << "redsem-soak: the previous release is not built (" << older
                  << ": target redsem-0.1.0)" << (test::in_ci() ? "" : "; running without it")
                  << "\n";
        if (test::in_ci()) {
            return 2;
        }
    }
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
    // Each flip (as each eviction) closes admission for the loss grace.
    config.eviction_flip_every = 20s;
    config.pause_every = 15s;
    config.semaphore_pause = 2 * ttl;
    config.weighted_every = 5s;
    config.older_gc_every = 5s;
    config.older_limit_every = 8s;
    config.restarts = restarts >= 0 ? restarts : std::max(4, static_cast<int>(minutes / 2));
    config.survivor_grace = 180s;
    config.progress_every = 30s;
    std::cout << "redsem-soak: " << minutes << " min, " << clients << " clients at once, ttl "
              << format_duration(ttl) << ", seed " << seed << ", " << config.restarts
              << " restarts, previous release for " << older_share << " of the clients\n";
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
              << "/s) with " << clients << " processes at once (" << result.cycles_older
              << " cycles of the previous release, " << result.cycles_weighted
              << " of several slots); SIGKILLs " << result.rounds_of(Fault::sigkill)
              << ", SIGSTOPs "
              << result.rounds_of(Fault::stop_waiter) + result.rounds_of(Fault::stop_holder) +
                     result.rounds_of(Fault::stop_supervisor)
              << ", restarts "
              << result.rounds_of(Fault::restart_kept) + result.rounds_of(Fault::restart_wiped) +
                     result.rounds_of(Fault::restart_rolled_back)
              << " and failbacks " << result.rounds_of(Fault::failback) << ", eviction flips "
              << result.rounds_of(Fault::eviction_flip) << " (" << result.flip_evicted_keys
              << " keys), pauses " << result.rounds_of(Fault::pause) << ", older gc/limit "
              << result.rounds_of(Fault::older_gc) << "/" << result.rounds_of(Fault::older_limit)
              << " (" << result.older_commands_failed << " failed), older clients refused "
              << result.older_refused_paused << " paused, " << result.older_refused_weighted
              << " weighted; violations "
              << result.overlap_violations + result.slot_violations + result.fence_violations +
                     result.malformed_lines
              << ", failed survivors " << result.survivors_failed + result.survivors_hung << "\n";
    const bool ok = result.safe() && result.live();
    std::cout << "redsem-soak: " << (ok ? "PASS" : "FAIL") << "\n";
    return ok ? 0 : 1;
}

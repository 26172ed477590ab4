// The invariant under load, crashes, stopped processes, Redis restarts and skewed clocks,
// checked by an observer that does not trust redsem (tests/support/chaos.hpp): every client's
// command logs its entry (with slot and fence) and exit times from the machine's real clock;
// the harness knows when it killed or stopped whom. Bounded in time and count, loopback only.
#include <catch2/catch.hpp>

#include "support/chaos.hpp"
#include "support/skip.hpp"

#include <iostream>

using namespace redsem::test;
using namespace std::chrono_literals;

TEST_CASE("chaos: 64+ clients, SIGKILLs and skewed clocks, SIGSTOPs, CLIENT PAUSE/KILL and "
          "Redis restarts: never more than the limit inside, fences in order",
          "[chaos]") {
    chaos::Config config;
#ifdef REDSEM_SANITIZED
    // Sanitized binaries are many times slower: fewer clients and longer leases, so that CPU
    // starvation does not dominate (a starved client is, correctly, fenced). Safety is checked
    // the same way.
    config.clients = 24;
    config.duration = 40s;
    config.ttl = 4s;
    config.loss_grace = 10s;
    config.long_hold_min = 4s;
    config.long_hold_max = 10s;
    config.pause_min = 6s;
    config.pause_max = 10s;
    config.client_pause = 6s;
    config.client_pause_every = 15s;
    config.kill_every = 600ms;
    config.waiter_pause_every = 3s;
    config.holder_pause_every = 3s;
    config.supervisor_pause_every = 4s;
    config.restarts = 2; // kept, wiped
    config.survivor_grace = 150s;
    const int min_cycles = 20;
    const int min_skewed = 5;
    const int min_kills = 10;
    const int min_pauses = 1;
#else
    config.clients = 66;
    config.duration = 27s;
    config.ttl = 1s;
    config.loss_grace = 3s;
    config.restarts = 4; // kept, wiped, rolled back, failed back
    config.survivor_grace = 120s;
    const int min_cycles = 150;
    const int min_skewed = 30;
    const int min_kills = 20;
    const int min_pauses = 3;
#endif
    config.seed = 20261122;
    config.progress_every = 5s;
    // Without libfaketime the chaos runs with the real clock only and the test reports itself
    // skipped (if nothing failed): the skewed clocks it is about went untested.
    const bool have_faketime = find_libfaketime().has_value();
    if (!have_faketime) {
        skip_part("libfaketime (Debian package faketime), so no clock was skewed,");
    }

    const chaos::Result result = chaos::run(config);
    INFO(result.summary());

    // Safety: what the observer saw.
    CHECK(result.overlap_violations == 0);
    CHECK(result.slot_violations == 0);
    CHECK(result.fence_violations == 0);
    CHECK(result.malformed_lines == 0);
    for (const auto& spec : config.semaphores) {
        CHECK(result.max_inside.count(spec.name) == 1);
    }
    // Liveness: every client the harness did not SIGKILL finished, with a documented outcome.
    CHECK(result.survivors_failed == 0);
    CHECK(result.survivors_hung == 0);
    // Nothing of redsem's is left once the leases ran out and gc ran.
    CHECK(result.gc_ok);
    CHECK(result.keys_left == 0);
    CHECK(result.harness_errors == 0);

    // The chaos really happened, and the load really moved (floors a loaded 2-core machine
    // meets).
    CHECK(result.cycles_completed >= min_cycles);
    CHECK(result.cycles_skewed >= (have_faketime ? min_skewed : 0));
    CHECK(result.long_holds_completed >= 3);
    CHECK(result.sigkills >= min_kills);
    CHECK(result.pauses_waiter >= min_pauses);
    CHECK(result.pauses_holder >= min_pauses);
    CHECK(result.pauses_supervisor >= min_pauses);
    CHECK(result.client_pauses >= 1);
    CHECK(result.client_kill_rounds >= 1);
    CHECK(result.evicted_keys >= 1);
    CHECK(result.restarts_kept >= 1);
    CHECK(result.restarts_wiped + result.restarts_rolled_back >= 1);
#ifndef REDSEM_SANITIZED
    CHECK(result.failbacks == 1);
#endif
    CHECK(result.max_inside.at("c10") >= 2);
}

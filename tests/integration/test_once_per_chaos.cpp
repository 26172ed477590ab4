// Cron on three hosts through the faults of issue 51, round after round: each round is one
// occurrence (a semaphore of its own, a window of an hour), its hosts start together, and one
// fault strikes: an eviction of the idle claim under cache traffic, an outage of Redis across
// the end of the run, a SIGKILL of the running redsem (as `pkill -9 redsem` does: its guard
// lives on), a SIGKILL of its guard, a window shorter than the job (with a limit of 2, the
// other hosts waiting), or a restart that loses the claim. The observer trusts only the kernel
// and the jobs' own file: each job holds an flock(1) on the round's lock file while it runs (a
// job that finds it taken writes OVERLAP) and writes "end" when it completes.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/occurrence.hpp"

#include <csignal>
#include <cstdlib>
#include <memory>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

enum class Fault { none, eviction, outage, killed, guard_killed, short_window, restart };

const char* fault_name(Fault fault) {
    switch (fault) {
    case Fault::none:
        return "none";
    case Fault::eviction:
        return "eviction of the idle claim";
    case Fault::outage:
        return "outage across the end of the run";
    case Fault::killed:
        return "SIGKILL of the running redsem";
    case Fault::guard_killed:
        return "SIGKILL of the running command's guard";
    case Fault::short_window:
        return "a window shorter than the job";
    case Fault::restart:
        return "restart that loses the claim";
    }
    return "?";
}

// What a round's jobs wrote: how many completed, and how many found another one running.
struct Outcome {
    int completed = 0;
    int overlaps = 0;
};

Outcome outcome_of(const std::string& log) {
    Outcome outcome;
    for (const std::string& line : lines_of(read_file(log))) {
        outcome.completed += line == "end" ? 1 : 0;
        outcome.overlaps += line == "OVERLAP" ? 1 : 0;
    }
    return outcome;
}

// `run --once-per WINDOW NAME` of a job that holds `lock` while it runs: it writes "start",
// runs `body` (no single quotes in it), and writes "end"; or "OVERLAP" when another job holds
// the lock.
std::vector<std::string> locked_job(const std::vector<std::string>& options,
                                    const std::string& name, const std::string& lock,
                                    const std::string& log, const std::string& body,
                                    const std::string& window) {
    std::vector<std::string> args{"run", "--once-per", window, "-q", "--ttl", "2s"};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c",
                             "flock -n " + lock + " sh -c 'echo start >> " + log + "; " + body +
                                 "; echo end >> " + log + "' || echo OVERLAP >> " + log});
    return args;
}

} // namespace

TEST_CASE("cron on three hosts through evictions, outages, kills of redsem and of its guard, "
          "windows shorter than the job and restarts: one completed "
          "run per occurrence (a second only where a restart lost the claim, and not with "
          "--at-most-once), never two at a time") {
    RedisServer::Options options;
    options.extra_args = {"--maxmemory", "4mb", "--maxmemory-policy", "volatile-lru"};
    RedisServer server(options);
    const Scratch scratch;
    EnvChanges env = env_for(server);
    env["REDSEM_LOSS_GRACE"] = "0"; // after a restart, admit at once (nothing else holds)
    const std::string cache_value(20 * 1024, 'x');
    int round = 0;
    // At most once first: the restart of its last round makes every later at-most-once caller
    // skip for a window (a claim may have been lost), which the at-least-once rounds ignore.
    for (const bool at_most_once : {true, false}) {
        for (const Fault fault : {Fault::none, Fault::eviction, Fault::outage, Fault::killed,
                                  Fault::guard_killed, Fault::short_window, Fault::restart}) {
            ++round;
            const std::string name = "cron" + std::to_string(round);
            const std::string lock = scratch.path(name + ".lock");
            const std::string log = scratch.path(name + ".log");
            const std::string up = scratch.path(name + ".up");
            const std::string go = scratch.path(name + ".go");
            INFO("round " << round << ": " << fault_name(fault)
                          << (at_most_once ? ", --at-most-once" : ""));
            const std::string group = scratch.path(name + ".group");
            std::vector<std::string> strict;
            if (at_most_once) {
                strict.push_back("--at-most-once");
            }
            // A window that ends while the job runs, with room for a second run beside it.
            const bool short_window = fault == Fault::short_window;
            const std::string window = short_window ? "2s" : "1h";
            if (short_window) {
                strict.insert(strict.end(), {"-n", "2"});
            }
            // The first host's job writes its process group (the guard's pid) and runs until
            // the test lets it end.
            Child first(
                locked_job(strict, name, lock, log,
                           "cut -d\" \" -f5 /proc/$$/stat > " + group + "; " + until_go(up, go),
                           window),
                env);
            REQUIRE(wait_for_file(up, 20s));
            // The other two hosts: after the fault, or for a short window at once, waiting.
            std::vector<std::unique_ptr<Child>> others;
            const auto start_others = [&] {
                for (int host = 0; host < 2; ++host) {
                    others.push_back(std::make_unique<Child>(
                        locked_job(strict, name, lock, log, "sleep 0.2", window), env));
                }
            };
            switch (fault) {
            case Fault::none:
            case Fault::restart:
                touch(go);
                CHECK(first.wait(30s).exit_code == 0);
                break;
            case Fault::short_window: {
                start_others();
                Connection admin = server.admin();
                REQUIRE(wait_until([&] { return zcard(admin, semaphore_key(name, "queue")) == 2; },
                                   30s));
                // The window ends under the waiters; they belong to its occurrence all the same.
                const long long ends_ms = claim_ends_ms(admin, name);
                REQUIRE(ends_ms > 0);
                REQUIRE(wait_until([&] { return server_time_ms(admin) > ends_ms + 500; }, 30s));
                touch(go);
                CHECK(first.wait(30s).exit_code == 0);
                break;
            }
            case Fault::guard_killed: {
                const long long guard = std::atoll(read_file(group).c_str());
                REQUIRE(guard > 1);
                REQUIRE(kill(static_cast<pid_t>(guard), SIGKILL) == 0);
                // It takes the command's group with it; run reports it as a failure.
                CHECK(first.wait(30s).exit_code == 137);
                break;
            }
            case Fault::eviction: {
                touch(go);
                CHECK(first.wait(30s).exit_code == 0);
                Connection admin = server.admin(); // (a new one: Redis may have restarted)
                const long long before = evicted_keys(admin);
                for (int i = 0; i < 600; ++i) {
                    (void)admin.command(std::vector<std::string>{
                        "SET", "cache:" + std::to_string(i), cache_value, "EX", "600"});
                }
                CHECK(evicted_keys(admin) > before);
                break;
            }
            case Fault::outage: {
                server.signal(SIGSTOP);
                const auto stopped_at = std::chrono::steady_clock::now();
                touch(go);
                // Past a whole ttl after the last renewal that could have landed.
                std::this_thread::sleep_until(stopped_at + 3s);
                server.signal(SIGCONT);
                CHECK(first.wait(60s).exit_code == 0);
                break;
            }
            case Fault::killed:
                first.signal(SIGKILL); // the guard kills the job's group and gives the slot back
                first.wait(30s);
                break;
            }
            if (fault == Fault::restart) {
                server.restart();
            }
            if (!short_window) {
                start_others();
            }
            for (auto& other : others) {
                const auto result = other->wait(60s);
                INFO(result.err);
                CHECK(result.exit_code == 0);
            }
            const Outcome outcome = outcome_of(log);
            CHECK(outcome.overlaps == 0);
            if (fault == Fault::killed) {
                // The killed run never completed, and its guard, which cannot see the command's
                // status, left its outcome unknown: one of the others runs the job, or at most
                // once none does.
                CHECK(outcome.completed == (at_most_once ? 0 : 1));
            } else if (fault == Fault::guard_killed) {
                // A known failure (137): the next host runs the job, as its second attempt.
                CHECK(outcome.completed == 1);
                CHECK(events_of(server, name, "acquired").back()["attempt"] == 2);
            } else if (fault == Fault::restart) {
                // The claim is gone with the data: at least once runs the job again.
                CHECK(outcome.completed == (at_most_once ? 1 : 2));
            } else {
                CHECK(outcome.completed == 1);
            }
        }
    }
}

#include "cli/command_args.hpp"
#include "cli/slot_request.hpp"
#include "process/child.hpp"
#include "process/environment.hpp"
#include "process/heartbeat.hpp"
#include "process/holder_meta.hpp"
#include "process/inherited_secret.hpp"
#include "process/supervise.hpp"
#include "semaphore/held_slot.hpp"
#include "util/boot_clock.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <memory>
#include <sstream>
#include <unistd.h>

namespace redsem::cli {

namespace {

std::vector<std::string> command_line(const RunArgs& args) {
    if (args.shell_command && !args.command.empty()) {
        throw UsageError("give the command either with -c or after NAME, not both");
    }
    if (args.shell_command) {
        return {"/bin/sh", "-c", *args.shell_command};
    }
    if (args.command.empty()) {
        throw UsageError("no command given: redsem run [OPTIONS] NAME COMMAND [ARGS...]");
    }
    return args.command;
}

// The last part of path `word` ("deploy.sh" for "/srv/ci/bin/deploy.sh").
std::string base_name(const std::string& word) {
    const std::size_t slash = word.find_last_of('/');
    return slash == std::string::npos || slash + 1 == word.size() ? word : word.substr(slash + 1);
}

// The label a holder gets without --label: the command's name without its directory (the
// lines that name holders stay short), never its arguments, which may hold secrets
// (`--api-key=...`) and would be kept in the history. For -c, the first word of CMDLINE that
// is not a variable assignment (`TOKEN=... deploy` gives "deploy").
std::string label_for(const RunArgs& args, const std::vector<std::string>& argv) {
    if (!args.shell_command) {
        return base_name(argv.front());
    }
    std::istringstream words(*args.shell_command);
    for (std::string word; words >> word;) {
        if (word.find('=') == std::string::npos) {
            return base_name(word);
        }
    }
    return "sh -c";
}

// check_runnable(), with a hint when the mistake is likely the command line's shape: a
// command line given as one word (`redsem run job 'echo hi'`), or no NAME at all
// (`redsem run echo hi` takes echo for NAME).
void check_command(const std::string& command, const RunArgs& args) {
    try {
        check_runnable(command);
    } catch (const CommandError& error) {
        if (error.exit_code() != static_cast<int>(ExitCode::not_found) || args.shell_command) {
            throw;
        }
        if (command.find_first_of(" \t") != std::string::npos) {
            throw CommandError(error.exit_code(),
                               fmt::format("{}; to run a shell command line, use -c '{}'",
                                           error.what(), printable(command, 200)));
        }
        const std::string& name = args.request.name;
        if (name.find('/') == std::string::npos) {
            try {
                check_runnable(name);
            } catch (const CommandError&) {
                throw error;
            }
            throw CommandError(error.exit_code(),
                               fmt::format("{} ('{}' was taken as the semaphore's NAME: redsem "
                                           "run NAME [--] COMMAND [ARGS...])",
                                           error.what(), printable(name, 100)));
        }
        throw;
    }
}

// Should redsem die while the command runs (a CI runner's SIGKILL), its guard kills the
// command's group and then starts this: `redsem release` of the slot, with the command's
// environment (its connection and inherited password), once nothing of the group runs, with
// the status of a command killed by SIGKILL. So the next holder need not wait for the lease.
Successor release_after_death(const std::string& prefix, const std::string& name,
                              const Lease& lease, const std::vector<std::string>& environment) {
    return Successor{.args = {"release", "--after-group=", "--exit-status",
                              std::to_string(128 + SIGKILL), "--prefix", prefix, "--", name,
                              lease.token},
                     .group_arg = 1,
                     .env = environment,
                     .keep = inherited_secret_fds(environment)};
}

// The release of a --once-per run whose command ended as `end` says: a success is recorded
// with the occurrence's claim, also after the lease ran out, trying to reach Redis for one more
// ttl past the lease (a restart or failover that long is ridden out). Returns the exit status:
// its status, or `lost_exit` when a success could not be recorded (said on stderr, also under
// -q: the next caller may run the occurrence again).
int release_once_per(HeldSlot& slot, const std::string& name, const CommandEnd& end,
                     int lost_exit) {
    const std::string shown = printable(name);
    const int status = end.status;
    ReleaseOutcome outcome = ReleaseOutcome::not_found;
    try {
        outcome = slot.release_once(end, slot.lease().ttl);
    } catch (const Error& error) {
        if (status != 0) {
            std::fprintf(stderr,
                         "redsem: warning: could not release the slot of '%s' (%s); it frees "
                         "itself when its lease runs out\n",
                         shown.c_str(), error.what());
            return status;
        }
        std::fprintf(stderr,
                     "redsem: the command succeeded, but its success could not be recorded with "
                     "the occurrence of '%s' (%s): another caller may run this occurrence "
                     "again\n",
                     shown.c_str(), error.what());
        return lost_exit;
    }
    switch (outcome) {
    case ReleaseOutcome::late_taken:
        std::fprintf(stderr,
                     "redsem: the command succeeded after its slot of '%s' was gone (Redis out "
                     "of reach, or redsem stopped?), and another run has claimed this occurrence "
                     "since: the job may have run twice\n",
                     shown.c_str());
        return lost_exit;
    case ReleaseOutcome::late_gone:
        std::fprintf(stderr,
                     "redsem: the command succeeded after its slot of '%s' was gone (Redis out "
                     "of reach, or redsem stopped?), and the occurrence's claim is gone (Redis "
                     "lost it, or it was cleared): another caller may run this occurrence "
                     "again\n",
                     shown.c_str());
        return lost_exit;
    case ReleaseOutcome::released:
    case ReleaseOutcome::left_queue:
    case ReleaseOutcome::not_found:
    case ReleaseOutcome::late_done: // on record; nothing is lost
        break;
    }
    return status;
}

// run_run() with what `pinger` needs to know (none: no --ping): the grant, and in `outcome`
// what became of the run, for people.
int run_supervised(const RunArgs& args, const GlobalOptions& global, Pinger* pinger,
                   std::string& outcome) {
    const std::vector<std::string> argv = command_line(args);
    ParsedRequest parsed =
        parse_slot_request(args.request, label_for(args, argv), holder_meta("", getpid(), "run"));
    if (args.at_most_once && !args.once_per) {
        throw UsageError("--at-most-once needs --once-per WINDOW: it says what a lost claim of "
                         "an occurrence means");
    }
    if (args.attempts && !args.once_per) {
        throw UsageError("--attempts needs --once-per WINDOW: it bounds the runs of one "
                         "occurrence");
    }
    if (args.once_per) {
        parsed.options.once_per = OncePer{.window_ms = args.once_per->count(),
                                          .at_most_once = args.at_most_once,
                                          .attempts = args.attempts.value_or(k_default_attempts)};
    }
    SuperviseOptions supervise_options;
    supervise_options.stop_on_lost = args.stop_on_lost;
    supervise_options.kill_after = args.kill_after;
    const int lost_exit = args.lost_exit_code.value_or(static_cast<int>(ExitCode::lost));
    const std::string prefix = resolve_prefix(global);
    const ConnectOptions connect = resolve_connection(global);
    const std::string& name = args.request.name;
    check_command(argv.front(), args); // 127 or 126 now, not after waiting for a slot

    Connection connection(connect);
    Semaphore semaphore(connection, prefix, name);
    SignalWatch signals{k_forwarded_signals};
    std::optional<Lease> lease;
    try {
        lease = wait_for_slot(connection, prefix, semaphore, args.request, parsed.options, signals);
    } catch (const Skipped& skipped) {
        outcome = skip_message(name, skipped.skip());
        return static_cast<int>(ExitCode::ok); // another run has this occurrence: as good as done
    }
    if (!lease) {
        outcome = fmt::format("no slot of '{}' was free in time; the command did not run",
                              printable(name));
        return parsed.busy_exit;
    }
    if (pinger != nullptr) {
        pinger->start();
    }
    HeldSlot slot(semaphore, *lease); // released on every way out of this function
    // Only now: a child redsem inherited (exec'd from a shell that had one) must not end the
    // wait above.
    signals.add(SIGCHLD);

    const std::vector<std::string> environment =
        child_environment(name, *lease, connection_for_child(global, connect));
    const auto started = BootClock::now();
    ChildProcess child(argv, environment, release_after_death(prefix, name, *lease, environment));
    if (args.max_run) {
        supervise_options.run_until = started + *args.max_run;
    }
    supervise_options.on_timeout = [&] {
        std::fprintf(stderr,
                     "redsem: the command of '%s' ran for %s (--max-run): stopping its process "
                     "group (SIGTERM, SIGKILL %s later) and giving the slot back\n",
                     printable(name).c_str(), format_duration(*args.max_run).c_str(),
                     format_duration(supervise_options.kill_after).c_str());
    };
    // The heartbeat renews on the connection the slot was acquired on; `slot` uses it again
    // once the heartbeat has stopped (heartbeat.stop() below, or its destructor first).
    Heartbeat heartbeat(connection, prefix, name, *lease, Heartbeat::Start::when_due,
                        parsed.options.replicas);
    supervise_options.on_lost = [&](const std::string& reason) {
        if (supervise_options.stop_on_lost) {
            std::fprintf(stderr, "redsem: lost the slot of '%s': %s; stopping the command\n",
                         printable(name).c_str(), reason.c_str());
        } else {
            std::fprintf(stderr,
                         "redsem: warning: lost the slot of '%s': %s; the command keeps running "
                         "(--on-lost ignore)\n",
                         printable(name).c_str(), reason.c_str());
        }
    };
    const SupervisedExit result = supervise(child, heartbeat, signals, supervise_options);
    if (result.lost_after_end) {
        std::fprintf(stderr,
                     "redsem: %slost the slot of '%s' before the command ended (was redsem "
                     "stopped?); it may have run beside the next holder\n",
                     supervise_options.stop_on_lost ? "" : "warning: ", printable(name).c_str());
    }
    if ((result.lease_lost && supervise_options.stop_on_lost) || result.timed_out) {
        // What the command left running in its group holds no slot either.
        child.kill_group();
    }
    // A command stopped at --max-run failed, as timeout(1) reports it, whatever it exited with.
    const CommandEnd end{.status = result.timed_out ? static_cast<int>(ExitCode::timed_out)
                                                    : result.child.code,
                         .signal = result.child.signal,
                         .timed_out_after = result.timed_out ? args.max_run : std::nullopt};
    heartbeat.stop();
    const auto ran_for = BootClock::now() - started;
    const bool stopped_by_loss = result.lease_lost && supervise_options.stop_on_lost;
    outcome =
        fmt::format("the command of '{}' on {} {} after {}", printable(name),
                    printable(parsed.options.meta.host),
                    result.timed_out  ? "was stopped at --max-run"
                    : stopped_by_loss ? "was stopped because its slot was lost"
                    : result.child.signal != 0
                        ? fmt::format("was killed by SIG{}", sigabbrev_np(result.child.signal))
                        : fmt::format("exited {}", result.child.code),
                    format_duration(std::chrono::floor<Milliseconds>(ran_for)));
    if (args.once_per && ran_for > *args.once_per) {
        std::fprintf(stderr,
                     "redsem: warning: the command of '%s' ran for %s, longer than its --once-per "
                     "window of %s: callers that start after the window ends run the job again "
                     "(with a limit above 1, beside a run still running)\n",
                     printable(name).c_str(),
                     format_duration(std::chrono::floor<std::chrono::seconds>(ran_for)).c_str(),
                     format_duration(*args.once_per).c_str());
    }
    if (args.once_per && !(stopped_by_loss && !result.lost_after_end)) {
        // The command ended by itself: its status is the occurrence's outcome.
        const int status = release_once_per(slot, name, end, lost_exit);
        return stopped_by_loss ? lost_exit : status;
    }
    try {
        slot.release(end);
    } catch (const Error& error) {
        std::fprintf(stderr,
                     "redsem: warning: could not release the slot of '%s' (%s); it frees "
                     "itself when its lease runs out\n",
                     printable(name).c_str(), error.what());
    }
    if (result.lease_lost && supervise_options.stop_on_lost) {
        return lost_exit;
    }
    return end.status;
}

} // namespace

int run_run(const RunArgs& args, const GlobalOptions& global) {
    std::string outcome;
    if (!args.ping) {
        if (args.ping_timeout) {
            throw UsageError("--ping-timeout goes with --ping URL");
        }
        return run_supervised(args, global, nullptr, outcome);
    }
    Pinger pinger(*args.ping, args.ping_timeout.value_or(k_default_ping_timeout));
    try {
        const int status = run_supervised(args, global, &pinger, outcome);
        pinger.finish(status, outcome);
        return status;
    } catch (const UsageError&) {
        throw; // nothing ran: a mistake to fix, not a run to report
    } catch (const Interrupted& interrupted) {
        pinger.finish(interrupted.exit_code(),
                      fmt::format("interrupted by SIG{} while waiting for a slot of '{}'",
                                  sigabbrev_np(interrupted.signal()),
                                  printable(args.request.name)));
        throw;
    } catch (const Error& error) {
        pinger.finish(error.exit_code(),
                      *error.what() != '\0' ? "redsem: " + std::string(error.what()) : outcome);
        throw;
    }
}

} // namespace redsem::cli

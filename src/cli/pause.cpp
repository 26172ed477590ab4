#include "cli/admission.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/typed_option.hpp"
#include "process/ci_job.hpp"
#include "process/holder_meta.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace redsem::cli {

namespace {

using Clock = std::chrono::steady_clock;

// How long `drain` waits on the holders' departures before it looks again anyway (a holder
// that dies without a release leaves when its lease runs out, which nobody pushes).
constexpr Milliseconds k_drain_look_every{10'000};

struct PauseArgs {
    std::string name;
    std::optional<std::string> reason;
    std::optional<Milliseconds> duration; // --for
    std::optional<Milliseconds> wait;     // drain's -w
    bool quiet = false;
    bool json = false;
};

// Who pauses or resumes: this user and host, the caller's pid (the script that ran redsem),
// the reason, and the CI job it runs in.
HolderMeta pauser(const PauseArgs& args) {
    HolderMeta by = holder_meta(args.reason.value_or(""), getppid(), "caller");
    by.ci = current_ci_job();
    return by;
}

nlohmann::json info_json(const std::string& name, const PauseInfo& info) {
    return {{"name", name},
            {"paused", pause_json(info.pause, info.server_now_ms)},
            {"limit", info.limit},
            {"held", info.held},
            {"queued", info.queued}};
}

// --for's value.
Milliseconds parse_pause_duration(const std::string& text, const char* option) {
    const Milliseconds duration = parse_duration(text, option);
    if (duration.count() == 0) {
        throw UsageError(fmt::format("{} must be longer than 0 (leave it out to pause until "
                                     "'redsem resume')",
                                     option));
    }
    return duration;
}

int run_pause(const PauseArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    Connection connection(resolve_connection(global));
    Semaphore semaphore(connection, resolve_prefix(global), args.name);
    const PauseInfo info = semaphore.pause(pauser(args), args.duration);
    if (args.json) {
        print_json(info_json(args.name, info));
    }
    return 0;
}

int run_resume(const PauseArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    Connection connection(resolve_connection(global));
    Semaphore semaphore(connection, resolve_prefix(global), args.name);
    const PauseInfo info = semaphore.resume(pauser(args));
    if (args.json) {
        print_json(info_json(args.name, info));
    } else if (!info.pause && !args.quiet) {
        std::fprintf(stderr, "redsem: '%s' was not paused\n", printable(args.name).c_str());
    }
    return 0;
}

// Pauses, then waits until no holder is left: 0, or 75 when -w passes first (still paused).
int run_drain(const PauseArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    const auto give_up_at = args.wait ? Clock::now() + *args.wait : Clock::time_point::max();
    Connection connection(resolve_connection(global));
    Semaphore semaphore(connection, resolve_prefix(global), args.name);
    const SignalWatch signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    PauseInfo info = semaphore.pause(pauser(args), args.duration);
    bool told = false;
    for (;;) {
        if (!info.pause) {
            // Somebody resumed it (or its --for ran out): whatever runs next would not run
            // alone.
            throw Error(ExitCode::timeout,
                        fmt::format("the pause of '{}' ended while draining (resumed, or its "
                                    "--for ran out), with {} holding",
                                    printable(args.name), info.held));
        }
        if (info.held == 0) {
            break;
        }
        const auto now = Clock::now();
        if (now >= give_up_at) {
            throw Error(ExitCode::timeout,
                        fmt::format("'{}' still has {} holding after {}; it stays paused "
                                    "('redsem resume {}' opens it)",
                                    printable(args.name), info.held, format_duration(*args.wait),
                                    printable(args.name)));
        }
        if (!told && !args.quiet) {
            told = true;
            std::fprintf(stderr, "redsem: draining '%s': paused, waiting for %lld holding\n",
                         printable(args.name).c_str(), info.held);
        }
        Milliseconds timeout = k_drain_look_every;
        if (info.due_in_ms >= 0) {
            timeout = std::min(timeout, Milliseconds{info.due_in_ms + 1});
        }
        if (info.pause->until_ms > 0) { // its end is the end of this drain
            timeout = std::min(timeout, Milliseconds{std::max(0LL, info.pause->until_ms -
                                                                       info.server_now_ms + 1)});
        }
        if (give_up_at != Clock::time_point::max()) {
            timeout = std::min(timeout, std::chrono::ceil<Milliseconds>(give_up_at - now));
        }
        try {
            semaphore.wait_for_departure(timeout, signals.fd());
        } catch (const WaitInterrupted&) {
            std::fprintf(stderr, "redsem: '%s' stays paused ('redsem resume %s' opens it)\n",
                         printable(args.name).c_str(), printable(args.name).c_str());
            throw Interrupted(signals.received());
        }
        info = semaphore.look_at_pause();
    }
    if (args.json) {
        print_json(info_json(args.name, info));
    }
    return 0;
}

void add_name(CLI::App& command, PauseArgs& args) {
    command.add_option("NAME", args.name, "Semaphore name")->required();
}

void add_pause_options(CLI::App& command, PauseArgs& args) {
    add_name(command, args);
    command.add_option("--reason", args.reason, "Why, shown to those kept out and in status")
        ->type_name("TEXT");
    add_typed_option(command, "--for", args.duration, parse_pause_duration,
                     "End the pause by itself after DUR (default: until 'redsem resume')")
        ->type_name("DUR");
}

} // namespace

Runner setup_pause(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<PauseArgs>();
    command.description(
        "Pause admission to semaphore NAME (a deploy freeze): nobody new gets a slot; holders "
        "keep theirs and renew, waiters keep their places. 'acquire -w 0' and 'run -w 0' exit "
        "73 meanwhile, naming who paused and why. The pause stays until 'redsem resume' or "
        "--for; gc and key expiry keep it.");
    add_pause_options(command, *args);
    command.add_flag("--json", args->json,
                     "Print name, paused (who, reason, since, until), limit, held and queued as "
                     "JSON");
    return [args, &global] { return run_pause(*args, global); };
}

Runner setup_resume(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<PauseArgs>();
    command.description("End the pause of semaphore NAME: the slots freed meanwhile go to the "
                        "waiters at once, in FIFO order. A NAME that is not paused is left as "
                        "it is (exit 0, with a notice).");
    add_name(command, *args);
    command.add_flag("-q,--quiet", args->quiet, "No notice when NAME was not paused");
    command.add_flag("--json", args->json,
                     "Print name, paused (the pause that ended, or null), limit, held and "
                     "queued as JSON");
    return [args, &global] { return run_resume(*args, global); };
}

Runner setup_drain(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<PauseArgs>();
    command.description(
        "Pause semaphore NAME (as 'redsem pause'), then wait until nobody holds it: exit 0 "
        "then, or 75 when --wait passes first (NAME stays paused). For a maintenance window: "
        "redsem drain deploy --reason 'db migration' -w 30m && ./migrate; redsem resume "
        "deploy");
    add_pause_options(command, *args);
    add_typed_option(command, "-w,--wait", args->wait, parse_duration,
                     "Give up after DUR with holders left (exit 75; default: wait for ever)")
        ->type_name("DUR");
    command.add_flag("-q,--quiet", args->quiet, "No line on stderr while waiting");
    command.add_flag("--json", args->json,
                     "Print name, paused, limit, held and queued as JSON once drained");
    return [args, &global] { return run_drain(*args, global); };
}

} // namespace redsem::cli

#include "cli/admission.hpp"
#include "cli/command_args.hpp"
#include "cli/output.hpp"
#include "process/ci_job.hpp"
#include "process/holder_meta.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

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

} // namespace

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

} // namespace redsem::cli

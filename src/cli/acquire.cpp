#include "cli/command_args.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/slot_request.hpp"
#include "process/holder_meta.hpp"
#include "process/keeper.hpp"
#include "process/signal_watch.hpp"
#include "process/supervise.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/number.hpp"
#include "util/time_format.hpp"

#include <cctype>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace redsem::cli {

namespace {

// Whether `signal` asks a process to end (then SIGKILL follows it by default): the others
// (USR1, ...) may only tell it that the slot is gone.
bool asks_to_end(int signal) {
    return signal == SIGTERM || signal == SIGINT || signal == SIGHUP || signal == SIGQUIT;
}

void print_lease(const std::string& name, const Lease& lease, bool json,
                 std::optional<pid_t> keeper) {
    if (!json) {
        std::cout << lease.token << "\n";
        return;
    }
    const nlohmann::json out{
        {"name", name},
        {"token", lease.token},
        {"fence", lease.fence},
        {"slot", lease.slot},
        {"slots", lease.slots.empty() ? std::vector{lease.slot} : lease.slots},
        {"limit", lease.limit},
        {"ttl_ms", lease.ttl.count()},
        {"deadline_ms", lease.deadline_ms},
        {"deadline", iso8601_utc(lease.deadline_ms)},
        {"keeper_pid", keeper ? nlohmann::json(*keeper) : nlohmann::json(nullptr)},
    };
    print_json(out);
}

// Gives back a slot whose token could not be printed; says what became of it.
std::string give_back_unprinted(Semaphore& semaphore, const Lease& lease,
                                std::optional<pid_t> keeper) {
    try {
        if (semaphore.release(lease.token) == ReleaseOutcome::released) {
            return "the slot was given back";
        }
        return "the slot was lost already: nothing is held";
    } catch (const Error& error) {
        if (keeper) {
            // It gives the slot back as it stops, or its lease runs out.
            kill(*keeper, SIGTERM);
            return fmt::format("giving the slot back failed ({}); its keeper (pid {}) was told "
                               "to stop and give it back, else it is held until its lease runs "
                               "out (within {})",
                               error.what(), *keeper, format_duration(lease.ttl));
        }
        return fmt::format("giving the slot back failed too ({}): it is held until its lease "
                           "runs out (within {})",
                           error.what(), format_duration(lease.ttl));
    }
}

} // namespace

int run_acquire(const AcquireArgs& args, const GlobalOptions& global) {
    // The slot belongs to the process named by --while-pid, else to the caller (the script
    // that ran redsem), never to this short-lived process.
    std::optional<WatchedProcess> watched;
    HolderMeta owner = holder_meta("", getppid(), "caller");
    if (args.while_pid) {
        const int lost_signal = args.on_lost.value_or(SIGTERM);
        std::optional<Milliseconds> kill_after = args.kill_after;
        if (kill_after && (lost_signal == 0 || lost_signal == SIGKILL)) {
            throw UsageError("--kill-after needs an --on-lost signal other than KILL or none");
        }
        if (!kill_after && asks_to_end(lost_signal)) {
            kill_after = k_default_kill_after;
        }
        const long long pid = *args.while_pid;
        watched.emplace(static_cast<pid_t>(pid), lost_signal, "--while-pid", kill_after);
        owner = holder_meta("", pid, "while-pid");
    } else if (args.on_lost || args.kill_after) {
        throw UsageError(
            fmt::format("{} needs --while-pid", args.on_lost ? "--on-lost" : "--kill-after"));
    }
    ParsedRequest parsed = parse_slot_request(args.request, "", std::move(owner));
    parsed.options.keeper = watched.has_value();
    if (args.max_hold) {
        parsed.options.max_hold = args.max_hold;
        parsed.options.ttl = std::min(parsed.options.ttl, *args.max_hold);
    }
    const std::string prefix = resolve_prefix(global);
    const ConnectOptions connect = resolve_connection(global);
    Connection connection(connect);
    Semaphore semaphore(connection, prefix, args.request.name);
    std::optional<Lease> lease;
    {
        const SignalWatch signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
        lease = wait_for_slot(connection, prefix, semaphore, args.request, parsed.options, signals,
                              watched ? &*watched : nullptr);
    }
    if (!lease) {
        return parsed.busy_exit;
    }
    std::optional<pid_t> keeper;
    if (watched) {
        try {
            keeper = start_keeper(*watched, KeptSlot{connect, prefix, args.request.name, *lease,
                                                     parsed.options.replicas});
        } catch (const Error&) {
            semaphore.release_quietly(lease->token);
            throw;
        }
    }
    print_lease(args.request.name, *lease, args.json, keeper);
    if (const int error = flush_stdout(); error != 0) {
        // Nobody has the token: a slot held until its lease runs out (or for as long as the
        // keeper's process lives) would block everybody. (The release stops the keeper.)
        throw Error(ExitCode::output,
                    fmt::format("cannot write the token to standard output ({}); {}",
                                std::strerror(error),
                                give_back_unprinted(semaphore, *lease, keeper)));
    }
    return 0;
}

} // namespace redsem::cli

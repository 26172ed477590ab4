#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/slot_request.hpp"
#include "cli/typed_option.hpp"
#include "process/holder_meta.hpp"
#include "process/keeper.hpp"
#include "process/signal_watch.hpp"
#include "process/supervise.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/number.hpp"
#include "util/time_format.hpp"

#include <CLI/CLI.hpp>
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

struct AcquireArgs {
    SlotRequest request;
    bool json = false;
    std::optional<long long> while_pid;
    std::optional<int> on_lost; // a signal, 0 for none
    std::optional<Milliseconds> kill_after;
};

// Whether `signal` asks a process to end (then SIGKILL follows it by default): the others
// (USR1, ...) may only tell it that the slot is gone.
bool asks_to_end(int signal) {
    return signal == SIGTERM || signal == SIGINT || signal == SIGHUP || signal == SIGQUIT;
}

// The signal --on-lost names: TERM, SIGTERM, term or 15; 0 for "none".
int parse_signal(const std::string& text, const char* option) {
    static constexpr std::pair<std::string_view, int> k_names[] = {
        {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}};
    std::string name;
    for (const char c : text) {
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    if (name == "NONE") {
        return 0;
    }
    if (name.starts_with("SIG")) {
        name.erase(0, 3);
    }
    for (const auto& [known, number] : k_names) {
        if (name == known) {
            return number;
        }
    }
    if (const auto number = parse_integer(text, 1, NSIG - 1)) {
        return static_cast<int>(*number);
    }
    throw UsageError(fmt::format("{}: '{}' is not a signal (TERM, INT, HUP, KILL, USR1, USR2, "
                                 "QUIT, ALRM, a number) or 'none'",
                                 option, printable(text)));
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
        owner.keeper = true;
    } else if (args.on_lost || args.kill_after) {
        throw UsageError(
            fmt::format("{} needs --while-pid", args.on_lost ? "--on-lost" : "--kill-after"));
    }
    const ParsedRequest parsed = parse_slot_request(args.request, "", std::move(owner));
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

} // namespace

Runner setup_acquire(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<AcquireArgs>();
    command.description("Take a slot of semaphore NAME and print its token on stdout. Waits "
                        "for ever unless --wait says otherwise. The slot is held until "
                        "'redsem release', or until its lease (--ttl) runs out without 'redsem "
                        "renew'; with --while-pid, for as long as process PID lives.");
    add_slot_options(command, args->request);
    command.add_flag("--json", args->json,
                     "Print name, token, fence, slot, slots, limit, ttl_ms, deadline_ms, "
                     "deadline and keeper_pid as JSON (see redsem(1))");
    add_typed_option(command, "--while-pid", args->while_pid, parse_pid,
                     "Hold the slot for the life of process PID (e.g. $$): a detached keeper "
                     "process renews the lease while PID lives and releases the slot when it "
                     "exits")
        ->type_name("PID");
    add_typed_option(command, "--on-lost", args->on_lost, parse_signal,
                     "With --while-pid: the signal the keeper sends PID and its descendants if "
                     "the lease is lost (default TERM; 'none' only logs to syslog)")
        ->type_name("SIGNAL");
    add_typed_option(command, "--kill-after", args->kill_after, parse_duration,
                     fmt::format("With --while-pid: SIGKILL what is left of PID and its "
                                 "descendants this long after the --on-lost signal (default {} "
                                 "for TERM, INT, HUP and QUIT; other signals: never)",
                                 format_duration(k_default_kill_after)))
        ->type_name("DUR");
    return [args, &global] { return run_acquire(*args, global); };
}

} // namespace redsem::cli

// Every subcommand's options, declared on CLI11: their names, help, and the converter that
// turns each one's text into its typed value as it is parsed (typed_option.hpp), and the
// Runner each subcommand returns. The only subcommand file that includes CLI11: the commands'
// own files get their arguments typed (command_args.hpp).
#include "cli/command_args.hpp"
#include "cli/commands.hpp"
#include "cli/help_format.hpp"
#include "cli/typed_option.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <csignal>
#include <fmt/format.h>
#include <memory>
#include <string_view>
#include <utility>

namespace redsem::cli {

namespace {

// Whether `text` is `word` (lower case) in any case.
bool equal_ignoring_case(std::string_view text, std::string_view word) {
    return std::equal(text.begin(), text.end(), word.begin(), word.end(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
    });
}

// -n's value; the message says what flock's -n would be here.
long long parse_limit_or_hint(const std::string& text, const char* option) {
    if (const auto limit = parse_integer(text, k_min_limit, k_max_limit)) {
        return *limit;
    }
    const bool numeric = parse_integer(text).has_value();
    throw UsageError(fmt::format("{}: '{}' is not a whole number from {} to {}{}", option,
                                 printable(text, 100), k_min_limit, k_max_limit,
                                 numeric ? ""
                                         : ": -n is the limit here; to give up at once when busy "
                                           "(flock's -n), use -w 0"));
}

// flock(1)'s lock modes (-x/-e exclusive, -s shared), hidden: each is refused while parsing
// with what redsem has instead, not as an unknown option (which named the next word, '--').
void refuse_flock_modes(CLI::App& command) {
    struct Mode {
        const char* name;
        const char* message;
    };
    static constexpr Mode k_modes[] = {
        {"-x", "-x is flock's exclusive lock; here the limit belongs to the semaphore (-n N; "
               "a new one has 1: exclusive already). To take every slot, use --exclusive"},
        {"-e", "-e is flock's exclusive lock; here the limit belongs to the semaphore (-n N; "
               "a new one has 1: exclusive already). To take every slot, use --exclusive"},
        {"-s", "-s is flock's shared lock; here the limit belongs to the semaphore: -n N lets "
               "N hold it at once (--exclusive takes every slot)"},
        {"--shared", "--shared is flock's shared lock; here the limit belongs to the semaphore: "
                     "-n N lets N hold it at once (--exclusive takes every slot)"},
    };
    for (const Mode& mode : k_modes) {
        command
            .add_flag_callback(
                mode.name, [message = mode.message] { throw UsageError(message); }, "")
            ->group("");
    }
}

// Declares NAME, -n, --slots, --exclusive, --ttl, -w, -E, --label, --loss-grace,
// --through-loss, --supersede, --max-waiting, --replicas and -q of acquire and run.
void add_slot_options(CLI::App& command, SlotRequest& request) {
    refuse_flock_modes(command);
    command.add_option("NAME", request.name, "Semaphore name")->required();
    // Converted while parsing, before NAME and COMMAND are counted: flock's -n is "do not
    // wait", and `redsem run -n nightly ./backup.sh` must say so, not "no command given".
    add_typed_option(command, "-n,--limit", request.limit, parse_limit_or_hint,
                     "How many may hold NAME at once (1-100000; default: the limit NAME has, 1 "
                     "for a new semaphore). A busy semaphore refuses another: see 'redsem limit'")
        ->type_name("N");
    CLI::Option* slots =
        add_typed_option(command, "--slots", request.slots, parse_limit,
                         "Take K of the limit's slots in one grant (default 1): a heavy job "
                         "counts for K. FIFO holds: nobody behind it goes first")
            ->type_name("K");
    command
        .add_flag("--exclusive", request.exclusive,
                  "Take every slot of the limit (a job that must run alone)")
        ->excludes(slots);
    add_typed_option(command, "--ttl", request.ttl, parse_ttl,
                     "Lease length; renew before it runs out")
        ->type_name("DUR")
        ->default_str(format_duration(k_default_ttl));
    add_typed_option(command, "-w,--wait", request.wait, parse_duration,
                     "Give up after DUR without a slot (0: try once; default: wait for ever)")
        ->type_name("DUR");
    add_typed_option(
        command, "-E,--conflict-exit-code", request.conflict_exit_code, parse_exit_code,
        fmt::format("Exit status when no slot was had in time (default {}; a "
                    "closed admission after lost data exits {} all the same)",
                    static_cast<int>(ExitCode::timeout), static_cast<int>(ExitCode::closed)))
        ->type_name("CODE");
    command
        .add_option("--label", request.label,
                    "Text shown beside this holder in status (then no CI job is recorded)")
        ->type_name("TEXT");
    add_typed_option(command, "--loss-grace", request.loss_grace, parse_loss_grace,
                     fmt::format("Wait DUR after Redis may have lost data (restart, fail-over) "
                                 "before taking a slot, for this call only (0 to {}; default: "
                                 "{}, as every client)",
                                 format_duration(k_default_loss_grace),
                                 format_duration(k_default_loss_grace)))
        ->type_name("DUR");
    command.add_flag("--through-loss", request.through_loss,
                     "With -w 0: while admission is closed after a possible loss of data, wait "
                     "for it to open (at most the loss grace), then try once (cron)");
    command.add_flag("--supersede", request.supersede,
                     fmt::format("Newest wins: take the place in the queue of the waiter that "
                                 "gave --supersede before, which exits {} (others keep theirs)",
                                 static_cast<int>(ExitCode::superseded)));
    add_typed_option(command, "--max-waiting", request.max_waiting, parse_max_waiting,
                     fmt::format("Refuse at once (exit {}) when N already wait; with "
                                 "--supersede, the one it supersedes makes room",
                                 static_cast<int>(ExitCode::queue_full)))
        ->type_name("N");
    add_typed_option(command, "--replicas", request.replicas, parse_replicas, k_replicas_help)
        ->type_name("N");
    command.add_flag("-q,--quiet", request.quiet,
                     "Show no queue position while waiting, and no notice when no slot was free "
                     "or a run was skipped (a closed admission is still told)");
}

// Declares the NAME and TOKEN arguments of release and renew.
void add_name_and_token(CLI::App& command, std::string& name, std::string& token) {
    command.add_option("NAME", name, "Semaphore name")->required();
    command
        .add_option(
            "TOKEN", token,
            "Token printed by 'redsem acquire', or a unique start of it as 'redsem status' shows")
        ->required();
}

// The signals acquire's --on-lost names (also as SIGTERM, term or 15), and "none".
constexpr std::pair<std::string_view, int> k_signals[] = {
    {"TERM", SIGTERM}, {"INT", SIGINT},   {"HUP", SIGHUP},   {"KILL", SIGKILL},
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"QUIT", SIGQUIT}, {"ALRM", SIGALRM}};
constexpr std::string_view k_no_signal = "none";

// run's --on-lost: the first stops COMMAND, the second lets it run on.
constexpr std::string_view k_lost_actions[] = {"term", "ignore"};

// status --format.
constexpr std::string_view k_status_formats[] = {"table", "json", "prometheus"};

// The signal --on-lost names: TERM, SIGTERM, term or 15; 0 for "none".
int parse_signal(const std::string& text, const char* option) {
    std::string name;
    for (const char c : text) {
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    if (equal_ignoring_case(text, k_no_signal)) {
        return 0;
    }
    if (name.starts_with("SIG")) {
        name.erase(0, 3);
    }
    for (const auto& [known, number] : k_signals) {
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

// --max-run DUR: above 0 (a command stopped as it starts is no use), up to a year.
Milliseconds parse_max_run(const std::string& text, const char* option) {
    constexpr Milliseconds k_longest{366LL * 24 * 3600 * 1000};
    const Milliseconds limit = parse_duration(text, option);
    if (limit <= Milliseconds{0} || limit > k_longest) {
        throw UsageError(
            fmt::format("{}: '{}' is not from 1ms to 366d", option, printable(text, 100)));
    }
    return limit;
}

// --attempts N: up to this many.
constexpr long long k_max_attempts = 1'000;

long long parse_attempts(const std::string& text, const char* option) {
    const std::optional<long long> attempts = parse_integer(text, 1, k_max_attempts);
    if (!attempts) {
        throw UsageError(fmt::format("{}: '{}' is not a whole number from 1 to {}", option,
                                     printable(text, 100), k_max_attempts));
    }
    return *attempts;
}

// --once-per WINDOW: at least a second (the claim is kept to the millisecond, by the server's
// clock) and at most a year, with its unit: a bare number, which other durations take as
// seconds, is more likely meant as hours here (`--once-per 20` for a nightly job).
Milliseconds parse_once_per(const std::string& text, const char* option) {
    constexpr Milliseconds k_longest{366LL * 24 * 3600 * 1000};
    if (!text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) {
            return std::isdigit(c) != 0 || c == '.';
        })) {
        throw UsageError(fmt::format("{}: '{}' has no unit; give the window with one, as in "
                                     "20h, 30m or 90s (units: ms, s, m, h, d)",
                                     option, printable(text, 100)));
    }
    const Milliseconds window = parse_duration(text, option);
    if (window < Milliseconds{1000} || window > k_longest) {
        throw UsageError(
            fmt::format("{}: '{}' is not from 1s to 366d", option, printable(text, 100)));
    }
    return window;
}

// --on-lost ACTION, in any case: whether a lost slot stops the command ('term') or lets it
// run on ('ignore').
bool parse_lost_action(const std::string& text, const char* option) {
    const auto [term, ignore] = k_lost_actions;
    if (equal_ignoring_case(text, term) || equal_ignoring_case(text, ignore)) {
        return equal_ignoring_case(text, term);
    }
    throw UsageError(
        fmt::format("{}: '{}' is not '{}' or '{}'", option, printable(text, 100), term, ignore));
}

// --format FORMAT, as written.
std::string parse_status_format(const std::string& text, const char* option) {
    if (std::find(std::begin(k_status_formats), std::end(k_status_formats), text) ==
        std::end(k_status_formats)) {
        throw UsageError(fmt::format("{}: '{}' is not {}, {} or {}", option, printable(text),
                                     k_status_formats[0], k_status_formats[1],
                                     k_status_formats[2]));
    }
    return text;
}

// --overdue DUR: above 0.
Milliseconds parse_overdue(const std::string& text, const char* option) {
    const Milliseconds within = parse_duration(text, option);
    if (within.count() <= 0) {
        throw UsageError(
            fmt::format("{}: '{}' must be longer than 0", option, printable(text, 100)));
    }
    return within;
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

// NAME of pause, resume and drain; and what pause and drain share.
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

Runner setup_acquire(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<AcquireArgs>();
    command.description("Take a slot of semaphore NAME and print its token on stdout. Waits "
                        "for ever unless --wait says otherwise. The slot is held until "
                        "'redsem release', or until its lease (--ttl) runs out without 'redsem "
                        "renew'; with --while-pid, for as long as process PID lives.");
    add_slot_options(command, args->request);
    command.add_flag("--json", args->json,
                     "Print the result as JSON: name, token, fence, slot, slots, limit, ttl_ms, "
                     "deadline_ms, deadline and keeper_pid (see redsem(1))");
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
    add_typed_option(command, "--max-hold", args->max_hold, parse_ttl,
                     "Hold the slot for at most DUR from its grant: the lease cannot be renewed "
                     "past it (also by a --while-pid keeper), and --ttl is at most DUR")
        ->type_name("DUR");
    return [args, &global] { return run_acquire(*args, global); };
}

Runner setup_release(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<ReleaseArgs>();
    command.description("Give back the slot of semaphore NAME held by TOKEN. Exits 1 when "
                        "TOKEN holds nothing.");
    add_name_and_token(command, args->name, args->token);
    command.add_option("--after-group", args->after_group)->group(""); // (see ReleaseArgs)
    command.add_option("--exit-status", args->exit_status)->group("");
    return [args, &global] { return run_release(*args, global); };
}

Runner setup_renew(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<RenewArgs>();
    command.description(
        "Extend the lease of the slot of NAME held by TOKEN to now + --ttl, by "
        "the Redis server's clock (default: by its own ttl again); never shortens it (release "
        "it to end it early). Exits 1 when the slot was lost, or when TOKEN is still waiting "
        "for one.");
    add_name_and_token(command, args->name, args->token);
    add_typed_option(command, "--ttl", args->ttl, parse_ttl,
                     "New lease length from now; a later deadline the lease has stays (default: "
                     "the ttl the lease was taken with)")
        ->type_name("DUR");
    add_typed_option(command, "--replicas", args->replicas, parse_replicas, k_replicas_help)
        ->type_name("N");
    return [args, &global] { return run_renew(*args, global); };
}

Runner setup_run(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<RunArgs>();
    command.description(
        "Run COMMAND while holding a slot of semaphore NAME: wait for the slot, keep its lease "
        "alive while COMMAND runs, stop COMMAND if the slot is lost, and release it however "
        "COMMAND ends. Exits with COMMAND's status. redsem's options come before COMMAND: the "
        "first word after NAME that is not one of them starts COMMAND, and every word from "
        "there on is COMMAND's (use -- before a COMMAND that starts with '-').");
    command.formatter(
        std::make_shared<HelpFormatter>("Usage: redsem run [OPTIONS] NAME [--] COMMAND [ARGS...]\n"
                                        "       redsem run [OPTIONS] NAME -c CMDLINE"));
    add_slot_options(command, args->request);
    add_typed_option(command, "--on-lost", args->stop_on_lost, parse_lost_action,
                     "When the slot is lost: 'term' stops COMMAND, 'ignore' lets it run on")
        ->type_name("ACTION")
        ->default_str("term");
    add_typed_option(command, "--kill-after", args->kill_after, parse_duration,
                     "After a lost slot, SIGKILL COMMAND this long after SIGTERM, but no "
                     "later than half-way through the lease's safety margin")
        ->type_name("DUR")
        ->default_str(format_duration(k_default_kill_after));
    add_typed_option(command, "--lost-exit-code", args->lost_exit_code, parse_exit_code,
                     fmt::format("Exit status after the slot was lost and COMMAND stopped, or with "
                                 "--once-per a success that could not be recorded (default {})",
                                 static_cast<int>(ExitCode::lost)))
        ->type_name("CODE");
    add_typed_option(command, "--once-per", args->once_per, parse_once_per,
                     "Run COMMAND once per WINDOW across all callers that say so (cron on many "
                     "hosts): while a run that started less than WINDOW ago succeeded or still "
                     "runs, skip (exit 0). A run that fails or loses its slot lets the next one "
                     "run, up to --attempts. WINDOW needs its unit (20h, 30m)")
        ->type_name("WINDOW");
    add_typed_option(command, "--max-run", args->max_run, parse_max_run,
                     "Stop COMMAND after it ran this long: SIGTERM to its process group, "
                     "SIGKILL after --kill-after, the slot given back, exit 124 (as timeout(1))")
        ->type_name("DUR");
    add_typed_option(command, "--ping", args->ping, parse_ping_url,
                     "Report to a monitor (healthchecks.io, Cronitor): POST URL/start when the "
                     "slot is granted, URL on exit 0 (a skip too), else URL/STATUS")
        ->type_name("HTTP_URL");
    add_typed_option(command, "--ping-timeout", args->ping_timeout, parse_ping_timeout,
                     "How long one ping may take; a ping that fails is a warning, never the "
                     "exit status")
        ->type_name("DUR")
        ->default_str(format_duration(k_default_ping_timeout));
    add_typed_option(command, "--attempts", args->attempts, parse_attempts,
                     fmt::format("With --once-per: after N runs of an occurrence failed or left "
                                 "without finishing, skip it (exit 0) until its window ends "
                                 "(default {})",
                                 k_default_attempts))
        ->type_name("N");
    command.add_flag("--at-most-once", args->at_most_once,
                     "With --once-per: also skip an occurrence whose run's outcome is unknown "
                     "(that run left without finishing, or Redis may have lost data since the "
                     "window could have begun), saying so even with -q. Without it a lost claim "
                     "runs COMMAND again: at least once");
    command
        .add_option("-c,--command", args->shell_command,
                    "Run this shell command line with /bin/sh -c instead of COMMAND")
        ->type_name("CMDLINE");
    command.add_option("COMMAND", args->command, "The command and its arguments")
        ->type_name("COMMAND [ARGS...]");
    return [args, &global] { return run_run(*args, global); };
}

Runner setup_status(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<StatusArgs>();
    command.description("Show who holds and who waits for each NAME; without NAME, list every "
                        "semaphore under the prefix. Changes nothing.");
    command.add_option("NAME", args->names, "Semaphore names (default: all)");
    command.add_flag("--json", args->json, "Print JSON (schema in redsem(1)); as --format json");
    add_typed_option(command, "--format", args->format, parse_status_format,
                     "Output format: table (default), json, or prometheus (metrics in the "
                     "Prometheus text format, for node_exporter's textfile collector)")
        ->type_name("FORMAT");
    command.add_flag("--watch", args->watch,
                     "On a terminal, redraw the table as it changes (at each event, or every "
                     "second), with lease countdowns, until q or Ctrl-C");
    command.add_flag("--names", args->names_only,
                     "Print only the names of all semaphores, one per line (for completion)");
    add_typed_option(command, "--overdue", args->overdue, parse_overdue,
                     "Check each NAME instead of showing it: exit 1, with a line saying why, when "
                     "it has had no successful run within DUR (a cron job's monitor)")
        ->type_name("DUR");
    return [args, &global] { return run_status(*args, global); };
}

Runner setup_gc(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<GcArgs>();
    command.description("Remove expired holders and dead waiters from each NAME (default: every "
                        "semaphore under the prefix), and delete semaphores left empty. Never "
                        "touches a live holder.");
    command.add_option("NAME", args->names, "Semaphore names (default: all)");
    command.add_flag("--dry-run", args->dry_run, "Show what would be removed; change nothing");
    command.add_flag("--json", args->json, "Print JSON (schema in redsem(1))");
    return [args, &global] { return run_gc(*args, global); };
}

Runner setup_limit(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<LimitArgs>();
    command.description(
        "Print the limit of semaphore NAME (1 for a new one), or set it to N at once, while in "
        "use: a higher limit hands the new slots to waiters in FIFO order; after a lower one, "
        "holders keep their slots and nobody new gets one until fewer than N hold. What is set "
        "here stays, also while nobody uses NAME (gc and key expiry keep it), until --unset.");
    command.add_option("NAME", args->name, "Semaphore name")->required();
    CLI::Option* limit =
        add_typed_option(command, "N", args->limit, parse_limit, "The new limit (1-100000)");
    CLI::Option* history =
        add_typed_option(command, "--history", args->history, parse_history,
                         "Keep N entries in NAME's history from now on (0-10000000; 0: none; "
                         "default 10000)")
            ->type_name("N");
    command
        .add_flag("--unset", args->unset,
                  "Give up the limit and history length set here: in use, the limit stays as "
                  "the callers'; idle, NAME is deleted and the next acquire's -n applies")
        ->excludes(limit)
        ->excludes(history);
    command.add_flag("--json", args->json,
                     "Print the result as JSON: name, limit, stored (false: a new semaphore), "
                     "held, queued, history and admission (closed after a possible loss of "
                     "data?)");
    return [args, &global] { return run_limit(*args, global); };
}

Runner setup_pause(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<PauseArgs>();
    command.description(
        "Pause admission to semaphore NAME (a deploy freeze): nobody new gets a slot; holders "
        "keep theirs and renew, waiters keep their places. 'acquire -w 0' and 'run -w 0' exit "
        "73 meanwhile, naming who paused and why. The pause stays until 'redsem resume' or "
        "--for; gc and key expiry keep it.");
    add_pause_options(command, *args);
    command.add_flag("--json", args->json,
                     "Print the result as JSON: name, paused (who, reason, since, until), limit, "
                     "held and queued");
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
                     "Print the result as JSON: name, paused (the pause that ended, or null), "
                     "limit, held and queued");
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
                     "Print the result as JSON once drained: name, paused, limit, held and "
                     "queued");
    return [args, &global] { return run_drain(*args, global); };
}

Runner setup_lost(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<LostArgs>();
    command.description(
        "Declare that Redis may have lost data redsem cannot see (a replica promoted by hand, a "
        "backup restored, the server's clock stepped): nobody new is admitted for the loss "
        "grace, as after a restart, so that holders whose leases were lost stop first. Holders "
        "keep renewing; status and 'acquire -w 0' show the closure (cause 'declared'). Applies "
        "to every semaphore under the prefix (on a Redis Cluster: every one that exists).");
    command.add_flag("-q,--quiet", args->quiet, "No notice on stderr");
    command.add_flag("--json", args->json,
                     "Print the result as JSON: prefix, lost_at, opens_at (the default grace) "
                     "and, on a Redis Cluster, the semaphores");
    return [args, &global] { return run_lost(*args, global); };
}

Runner setup_log(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<LogArgs>();
    command.description(
        "Show the history of each NAME (without NAME: of every semaphore, merged by time): who "
        "acquired, queued, released, lost or left, when, and for how long. Changes nothing.");
    command.add_option("NAME", args->names, "Semaphore names (default: all)");
    command
        .add_option("--since", args->since,
                    "Only events from WHEN on: a duration back from now (24h, 30m) or a time "
                    "('2026-11-23 03:12', 2026-11-23T03:12:00Z, @SECONDS)")
        ->type_name("WHEN");
    command.add_option("--until", args->until, "Only events up to WHEN (as for --since)")
        ->type_name("WHEN");
    command.add_flag("--json", args->json, "Print one JSON object per event, one per line");
    command.add_flag("-f,--follow", args->follow,
                     "After the history, print new events as they happen, until interrupted");
    return [args, &global] { return run_log(*args, global); };
}

Runner setup_doctor(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<DoctorArgs>();
    command.description(
        "Check whether the Redis the options point at is safe for redsem: reachable, version, "
        "mode, TLS, the ACL user and its permissions, eviction, persistence, replication, the "
        "clocks, and redsem's own keys. One line per finding: ok, warn or unsafe, and the fix. "
        "Changes nothing. Exit 0: all ok; 1: warnings; 78: something is unsafe; 69: Redis "
        "unreachable; 77: login refused.");
    command.add_flag("--json", args->json, "Print JSON (schema in redsem(1))");
    return [args, &global] { return run_doctor(*args, global); };
}

std::vector<std::string> value_choices(std::string_view type) {
    std::vector<std::string> choices;
    if (type == "SIGNAL") {
        for (const auto& [name, number] : k_signals) {
            choices.emplace_back(name);
        }
        choices.emplace_back(k_no_signal);
    } else if (type == "ACTION") {
        choices.assign(std::begin(k_lost_actions), std::end(k_lost_actions));
    } else if (type == "FORMAT") {
        choices.assign(std::begin(k_status_formats), std::end(k_status_formats));
    } else if (type == "URL") {
        // What parse_url reads, as the start of a URL (redis+unix:// is unix:// again).
        choices = {"redis://", "rediss://", "redis-sentinel://", "rediss-sentinel://", "unix://"};
    }
    return choices;
}

void add_global_options(CLI::App& app, GlobalOptions& options) {
    app.add_option("-u,--url", options.url,
                   fmt::format("Redis URL: redis://[[user]:password@]host[:port][/db], "
                               "rediss://... for TLS, redis://host1:port1,host2:port2,... for "
                               "the nodes of one Redis Cluster, unix:///path.sock[?db=N], or "
                               "redis-sentinel://[[user]:password@]host[:port][,host[:port]...]"
                               "[/db]#MASTER (rediss-sentinel:// for TLS) (default: "
                               "$REDSEM_URL, $REDIS_URL, {})",
                               k_default_redis_url))
        ->type_name("URL");
    app.add_option("--prefix", options.prefix,
                   fmt::format("Prefix of redsem's Redis keys (default: $REDSEM_PREFIX or {})",
                               k_default_prefix))
        ->type_name("PREFIX");
    add_typed_option(app, "--connect-timeout", options.connect_timeout, parse_connect_timeout,
                     fmt::format("How long to wait for Redis to accept the connection and answer "
                                 "(default: $REDSEM_CONNECT_TIMEOUT or {})",
                                 format_duration(k_default_connect_timeout)))
        ->type_name("DUR");
    struct ConnectionOption {
        const char* name;
        std::optional<std::string> GlobalOptions::*value;
        const char* type;
        const char* help;
    };
    static constexpr ConnectionOption k_connection_options[] = {
        {"--password-file", &GlobalOptions::password_file, "FILE",
         "Read the Redis password from the first line of FILE (default: $REDSEM_PASSWORD, "
         "$REDSEM_PASSWORD_FILE, $REDISCLI_AUTH)"},
        {"--sentinel-password-file", &GlobalOptions::sentinel_password_file, "FILE",
         "redis-sentinel://: read the sentinels' password from the first line of FILE "
         "(default: $REDSEM_SENTINEL_PASSWORD, $REDSEM_SENTINEL_PASSWORD_FILE)"},
        {"--cacert", &GlobalOptions::cacert, "FILE",
         "rediss://: trust the CA certificates in FILE instead of the system's (default: "
         "$REDSEM_CACERT)"},
        {"--cacertdir", &GlobalOptions::cacertdir, "DIR",
         "rediss://: trust the CA certificates in DIR, hashed as by c_rehash (default: "
         "$REDSEM_CACERTDIR)"},
        {"--cert", &GlobalOptions::cert, "FILE",
         "rediss://: client certificate for mutual TLS, with --key (default: $REDSEM_CERT)"},
        {"--key", &GlobalOptions::key, "FILE",
         "rediss://: private key of --cert (default: $REDSEM_KEY)"},
        {"--sni", &GlobalOptions::sni, "NAME",
         "rediss://: the server name to ask for and to verify in its certificate (default: "
         "$REDSEM_SNI, else the URL's host)"},
    };
    for (const ConnectionOption& option : k_connection_options) {
        app.add_option(option.name, options.*option.value, option.help)->type_name(option.type);
    }
    app.add_flag("--insecure", options.insecure,
                 "rediss://: do not verify the server's certificate (warns each time; "
                 "default: $REDSEM_INSECURE)");
}

} // namespace redsem::cli

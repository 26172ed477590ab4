#include "cli/admission.hpp"
#include "cli/command_args.hpp"
#include "cli/output.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/history.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/protocol.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/table.hpp"
#include "util/time_format.hpp"
#include "util/token.hpp"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <set>

namespace redsem::cli {

namespace {

using nlohmann::json;

// How long one XREAD of --follow blocks; without NAME, how often a SCAN looks for semaphores
// whose history began since (they join with all their events, later by up to this).
constexpr Milliseconds k_follow_block{10'000};
// How often --follow looks for Redis again while it is away (as status --watch redraws).
constexpr Milliseconds k_follow_retry{1000};
constexpr Milliseconds k_rescan_every{2'000};
// The highest sequence number of a stream entry ID ("MS-SEQ").
constexpr std::uint64_t k_last_sequence = std::numeric_limits<std::uint64_t>::max();

// --since and --until: a duration back from the server's now, or a point in time.
long long resolve_when(const std::string& text, const char* option, long long now_ms) {
    if (const auto point = parse_time_point(text)) {
        return std::max(0LL, *point); // (1970-01-01 east of Greenwich: before the epoch)
    }
    if (text == "now") {
        return now_ms;
    }
    const bool looks_like_date = text.size() >= 5 && text[4] == '-';
    if (looks_like_date || text.starts_with('@')) {
        throw UsageError(fmt::format("{}: '{}' is not a time (now, YYYY-MM-DD, 'YYYY-MM-DD "
                                     "HH:MM[:SS[.mmm]]' with a space or T, an optional Z or "
                                     "+HH:MM, or @SECONDS)",
                                     option, printable(text)));
    }
    try {
        return std::max(0LL, now_ms - parse_duration(text, option).count());
    } catch (const UsageError&) {
        if (!text.empty() && text.front() >= '0' && text.front() <= '9') {
            throw; // a duration, as its own error says what is wrong with it (too long, say)
        }
        throw UsageError(
            fmt::format("{}: '{}' is neither a duration back from now (24h, 30m) nor a "
                        "time (now, YYYY-MM-DD, 'YYYY-MM-DD HH:MM[:SS[.mmm]]' with a "
                        "space or T, an optional Z or +HH:MM, or @SECONDS)",
                        option, printable(text)));
    }
}

// Refuses --since or --until WHEN that cannot be read, before anything connects, and a bare
// number followed by a word of time ("--since 1 week"): the shell made the word a NAME.
void check_when(const std::optional<std::string>& when, const char* option,
                const std::vector<std::string>& names) {
    if (!when) {
        return;
    }
    resolve_when(*when, option, 0);
    static const std::set<std::string> k_time_words{
        "ms",    "sec", "secs", "second", "seconds", "min",   "mins",   "minute", "minutes", "hour",
        "hours", "day", "days", "week",   "weeks",   "month", "months", "year",   "years",   "ago"};
    const bool bare = when->find_first_not_of("0123456789.") == std::string::npos;
    for (const std::string& name : names) {
        std::string lower = name;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        if (bare && k_time_words.contains(lower)) {
            throw UsageError(fmt::format("{} {} {}: a duration is one word with its unit, as "
                                         "in 7d, 12h or 30m (units: ms, s, m, h, d)",
                                         option, *when, printable(name)));
        }
    }
}

// Whether an event's duration is a wait (else a hold): a grant's, a waiter's that left or was
// dropped, and a waiter's that gc removed (no slot).
bool is_wait(const Event& event) {
    return event.kind == "acquired" || event.kind == "left" || event.kind == "dropped" ||
           (event.kind == "gc" && !event.slot);
}

// "HOST (pid PID)" of whoever a skip found in its way.
std::string skipped_for_text(const SkippedFor& whom) {
    return fmt::format("{} (pid {})", terminal_safe(whom.meta.host, 64), whom.meta.pid);
}

// "busy: held by web-1 (pid 812), web-2 (pid 77)", "ran on web-1 (pid 812) at 01:14:31,
// window until 21:14:31", "running on web-1 (pid 812) since 01:14:31", "admission closed:
// Redis restarted or another server took over", "paused", "superseded by a newer waiter
// (--supersede) on web-2 (pid 77)", "the queue was full (--max-waiting)": whom or what a skip
// found.
std::string skip_detail(const Event& event) {
    // The time of day, and the date too when it is not the event's.
    const std::string day = local_time(event.time_ms).substr(0, 10);
    const auto clock = [&day](long long ms) {
        const std::string text = local_time(ms);
        return text.starts_with(day) ? text.substr(11, 8) : text.substr(0, 19);
    };
    if (event.skipped == "busy") {
        std::vector<std::string> named;
        for (const SkippedFor& whom : event.skipped_for) {
            named.push_back(skipped_for_text(whom));
        }
        return named.empty() ? std::string("busy")
                             : fmt::format("busy: held by {}", fmt::join(named, ", "));
    }
    if (event.skipped == "closed") {
        return event.cause.empty()
                   ? std::string("admission closed")
                   : fmt::format("admission closed: {}", loss_cause_text(event.cause));
    }
    if (event.skipped == "lost") {
        // --at-most-once: the occurrence's claim may have gone with the data.
        return fmt::format("Redis may have lost data{}{} (--at-most-once)",
                           event.lost_at_ms ? " at " + clock(*event.lost_at_ms) : "",
                           event.cause.empty() ? ""
                                               : ": " + std::string(loss_cause_text(event.cause)));
    }
    if (event.skipped == "full") {
        return "the queue was full (--max-waiting)";
    }
    if (event.skipped_for.empty()) {
        return event.skipped;
    }
    const SkippedFor& claim = event.skipped_for.front();
    if (event.skipped == k_superseded_why) {
        const std::string& label = claim.meta.label;
        return fmt::format("superseded by a newer waiter (--supersede) on {}{}",
                           skipped_for_text(claim),
                           label.empty() ? "" : ", '" + terminal_safe(label, 80) + "'");
    }
    if (event.skipped == "attempts") {
        const HolderMeta& last = claim.meta;
        return fmt::format("tried {} time{} (--attempts); the last run, on {} at {}, {}",
                           last.attempt, last.attempt == 1 ? "" : "s", skipped_for_text(claim),
                           clock(claim.since_ms),
                           last.exit_status ? fmt::format("failed (exit {})", *last.exit_status)
                                            : std::string("left without finishing"));
    }
    if (event.skipped == "lapsed") {
        return fmt::format("the run on {} at {} left without finishing (--at-most-once)",
                           skipped_for_text(claim), clock(claim.since_ms));
    }
    if (event.skipped == "ran") {
        return fmt::format("ran on {} at {}{}", skipped_for_text(claim), clock(claim.since_ms),
                           claim.until_ms ? ", window until " + clock(*claim.until_ms) : "");
    }
    return fmt::format("running on {} since {}", skipped_for_text(claim), clock(claim.since_ms));
}

// "waited 2m13s", "held 40m", "limit 2 -> 3", "Redis restarted or failed over; nobody
// admitted until 03:15:42.120": what an event adds to its kind.
std::string detail(const Event& event) {
    if (event.kind == "closed" && event.raw.empty()) {
        return fmt::format("{}; nobody admitted until {}", loss_cause_text(event.cause),
                           local_time(*event.opens_at_ms));
    }
    if (event.raw.empty() && event.kind == "paused") {
        return event.until_ms ? "nobody admitted until " + local_time(*event.until_ms)
                              : std::string("nobody admitted until resumed");
    }
    if (event.raw.empty() && event.kind == "resumed") {
        return fmt::format("{} after {}", event.meta ? "resumed" : "pause ran out (--for)",
                           format_duration(Milliseconds{*event.duration_ms}));
    }
    if (!event.raw.empty() || (event.kind != "limit" && event.token.empty())) {
        return event.raw;
    }
    if (event.kind == "limit") {
        return fmt::format("limit {} -> {}",
                           event.limit_from ? std::to_string(*event.limit_from) : "-",
                           *event.limit_to);
    }
    if (event.kind == "skipped") {
        return skip_detail(event);
    }
    std::string text;
    if (event.duration_ms) {
        text = fmt::format("{} {}", is_wait(event) ? "waited" : "held",
                           format_duration(Milliseconds{*event.duration_ms}));
    }
    if (event.exit_status && event.timed_out_ms) {
        text += fmt::format("{}command timed out after {} (--max-run, exit {})",
                            text.empty() ? "" : ", ",
                            format_duration(Milliseconds{*event.timed_out_ms}), *event.exit_status);
    } else if (event.exit_status) {
        // As run reports it: 128+N for a command killed by signal N. An event that does not
        // say which (a run --once-per's, an earlier build's) is taken for a signal.
        const long long status = *event.exit_status;
        const long long number = event.signal.value_or(status > 128 ? status - 128 : 0);
        const char* signal =
            number > 0 && number < NSIG ? sigabbrev_np(static_cast<int>(number)) : nullptr;
        text += fmt::format("{}command {}", text.empty() ? "" : ", ",
                            signal != nullptr ? fmt::format("killed by SIG{} ({})", signal, status)
                                              : fmt::format("exited {}", status));
    }
    if (!event.late.empty()) {
        // A run --once-per whose release came after its lease ran out (see ReleaseOutcome).
        text += event.late == "done"    ? ", after its slot was gone: the occurrence is done"
                : event.late == "taken" ? ", after its slot was gone: another run had the "
                                          "occurrence (it may have run twice)"
                : event.late == "gone"  ? ", after its slot was gone: its claim was gone (the "
                                          "occurrence may run again)"
                                        : ", after its slot was gone: " + event.late;
    }
    if (event.kind == "acquired" && event.meta && event.meta->attempt > 1) {
        // run --once-per, after a run of the occurrence that failed or left without finishing.
        text += fmt::format(
            ", attempt {} of the occurrence{}", event.meta->attempt,
            event.meta->after.empty() ? "" : " (after " + short_token(event.meta->after) + ")");
    }
    return text;
}

json optional_json(const std::optional<long long>& value) {
    return value ? json(*value) : json(nullptr);
}

json event_json(const Event& event) {
    json out{{"name", event.name},
             {"id", event.id},
             {"time_ms", event.time_ms},
             {"time", iso8601_utc(event.time_ms)},
             {"event", event.kind}};
    if (event.kind == "limit" && event.raw.empty()) {
        out["from"] = optional_json(event.limit_from);
        out["to"] = optional_json(event.limit_to);
        return out;
    }
    if (event.kind == "closed" && event.raw.empty()) {
        out["cause"] = event.cause;
        out["lost_at_ms"] = *event.lost_at_ms;
        out["opens_at_ms"] = *event.opens_at_ms;
        out["opens_at"] = iso8601_utc(*event.opens_at_ms);
        return out;
    }
    const auto& meta = event.meta;
    const auto who = [&out, &meta] {
        out["host"] = meta ? json(meta->host) : json(nullptr);
        out["pid"] = meta ? json(meta->pid) : json(nullptr);
        out["user"] = meta ? json(meta->user) : json(nullptr);
        out["ci"] = meta ? ci_json(meta->ci) : json(nullptr);
    };
    if (event.kind == "paused" && event.raw.empty()) {
        who();
        out["reason"] = meta ? json(meta->label) : json(nullptr);
        out["until_ms"] = optional_json(event.until_ms);
        out["until"] = event.until_ms ? json(iso8601_utc(*event.until_ms)) : json(nullptr);
        return out;
    }
    if (event.kind == "resumed" && event.raw.empty()) {
        who(); // null when the pause ran out by itself
        out["paused_ms"] = *event.duration_ms;
        out["ran_out"] = !meta.has_value();
        return out;
    }
    if (!event.raw.empty() || event.token.empty()) {
        out["raw"] = event.raw;
        return out;
    }
    out["token"] = event.token;
    out["slot"] = optional_json(event.slot);
    out["slots"] = event.slots.empty() ? json(nullptr) : json(event.slots);
    out["fence"] = optional_json(event.fence);
    out["duration_ms"] = optional_json(event.duration_ms);
    if (event.duration_ms) {
        out[is_wait(event) ? "waited_ms" : "held_ms"] = *event.duration_ms;
    }
    if (event.kind == "acquired" && meta && meta->attempt > 1) {
        out["attempt"] = meta->attempt; // run --once-per (see detail())
        out["after"] = meta->after;
    }
    if (event.kind == "released") {
        out["exit_status"] = optional_json(event.exit_status);
        out["signal"] = optional_json(event.signal);
        out["timed_out_ms"] = optional_json(event.timed_out_ms);
        out["late"] = event.late.empty() ? json(nullptr) : json(event.late);
    }
    if (event.kind == "skipped") {
        out["skipped"] = event.skipped;
        json by = json::array();
        for (const SkippedFor& whom : event.skipped_for) {
            by.push_back({{"token", whom.token},
                          {"since_ms", whom.since_ms},
                          {"until_ms", optional_json(whom.until_ms)},
                          {"host", whom.meta.host},
                          {"pid", whom.meta.pid},
                          {"user", whom.meta.user},
                          {"label", whom.meta.label},
                          {"attempt", whom.meta.attempt},
                          {"exit_status", optional_json(whom.meta.exit_status)}});
        }
        out["by"] = std::move(by);
        if (event.skipped == "closed") {
            out["cause"] = event.cause;
        }
        if (event.skipped == "lost") {
            out["cause"] = event.cause;
            out["lost_at_ms"] = optional_json(event.lost_at_ms);
        }
    }
    out["host"] = meta ? json(meta->host) : json(nullptr);
    out["pid"] = meta ? json(meta->pid) : json(nullptr);
    out["pid_of"] = meta && !meta->pid_of.empty() ? json(meta->pid_of) : json(nullptr);
    out["user"] = meta ? json(meta->user) : json(nullptr);
    out["label"] = meta ? json(meta->label) : json(nullptr);
    out["ci"] = meta ? ci_json(meta->ci) : json(nullptr);
    return out;
}

std::vector<std::string> event_row(const Event& event, bool with_name) {
    const auto& meta = event.meta;
    std::vector<std::string> row{local_time(event.time_ms)};
    if (with_name) {
        row.push_back(event.name);
    }
    const auto number = [](const std::optional<long long>& value) {
        return value ? std::to_string(*value) : std::string("-");
    };
    const std::string slot = event.slots.size() > 1 ? fmt::format("{}", fmt::join(event.slots, ","))
                                                    : number(event.slot);
    row.insert(row.end(), {event.kind, slot, number(event.fence),
                           event.token.empty() ? "-" : short_token(event.token),
                           meta ? meta->host : "-", meta ? std::to_string(meta->pid) : "-",
                           meta ? meta->user : "-", detail(event), meta ? label_cell(*meta) : ""});
    return row;
}

std::vector<std::string> header(bool with_name) {
    std::vector<std::string> row{"TIME (" + local_zone() + ")"};
    if (with_name) {
        row.push_back("NAME");
    }
    row.insert(row.end(),
               {"EVENT", "SLOT", "FENCE", "TOKEN", "HOST", "PID", "USER", "DETAIL", "LABEL"});
    return row;
}

// Prints events as JSON lines, or as a table (the header only before the first batch).
class Printer {
public:
    Printer(bool as_json, bool with_name) : m_json(as_json), m_with_name(with_name) {}

    // Returns false once stdout cannot be written: a pipe whose reader left (SIGPIPE is
    // ignored), a full disk (main() reports that one).
    bool print(const std::vector<Event>& events) {
        if (events.empty()) {
            return true;
        }
        if (m_json) {
            for (const Event& event : events) {
                print_json(event_json(event));
            }
            return flush_stdout() == 0;
        }
        std::vector<std::vector<std::string>> rows;
        if (!m_header_printed) {
            rows.push_back(header(m_with_name));
            m_header_printed = true;
        }
        for (const Event& event : events) {
            rows.push_back(event_row(event, m_with_name));
        }
        // Followed events come in batches: each cell is at least as wide as its column was
        // before, so that the columns go on lining up with the header.
        m_widths.resize(rows.front().size());
        for (auto& row : rows) {
            for (std::size_t i = 0; i + 1 < row.size(); ++i) {
                const std::size_t width = display_width(terminal_safe(row[i]));
                if (width < m_widths[i]) {
                    row[i].append(m_widths[i] - width, ' ');
                }
                m_widths[i] = std::max(m_widths[i], width);
            }
        }
        std::cout << render_table(std::move(rows));
        return flush_stdout() == 0;
    }

private:
    bool m_json;
    bool m_with_name;
    bool m_header_printed = false;
    std::vector<std::size_t> m_widths; // of the columns printed so far
};

// `names` without repeats, in their first order.
std::vector<std::string> unique(const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (const auto& name : names) {
        if (std::find(out.begin(), out.end(), name) == out.end()) {
            out.push_back(name);
        }
    }
    return out;
}

// One round of --follow: new semaphores joined (without NAME), then one XREAD, its events
// printed. False when nobody reads the output any more, or on a signal while no semaphore has a
// history yet.
bool follow_round(Connection& connection, const std::string& prefix, bool all,
                  std::vector<std::string>& names, std::vector<std::string>& last_ids,
                  const std::set<std::string>& unreadable, Printer& printer, int interrupt_fd) {
    if (all) {
        // New semaphores join at each round.
        for (const auto& name : scan_names(connection, prefix, "log")) {
            if (std::find(names.begin(), names.end(), name) == names.end() &&
                !unreadable.contains(name)) {
                names.push_back(name);
                last_ids.emplace_back("0-0");
            }
        }
        if (names.empty()) {
            pollfd signal_fd{interrupt_fd, POLLIN, 0};
            return poll(&signal_fd, 1, static_cast<int>(k_rescan_every.count())) <= 0;
        }
    }
    // false: nobody reads any more (`redsem log -f | head`)
    return printer.print(follow_history(connection, prefix, names, last_ids,
                                        all ? k_rescan_every : k_follow_block, interrupt_fd));
}

} // namespace

int run_log(const LogArgs& args, const GlobalOptions& global) {
    for (const auto& name : args.names) {
        check_name(name);
    }
    if (args.follow && args.until) {
        throw UsageError("--follow and --until exclude each other");
    }
    check_when(args.since, "--since", args.names);
    check_when(args.until, "--until", args.names);
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    std::vector<std::string> names = unique(args.names);
    if (args.follow && names.size() != 1) {
        // Said before anything is printed: XREAD would refuse histories on several slots.
        bool cluster = false;
        connection.for_each_primary([&](const Endpoint* node) { cluster = cluster || node; });
        if (cluster) {
            throw UsageError("on a Redis Cluster, --follow takes one NAME (the histories are on "
                             "different hash slots); without --follow, log reads them all");
        }
    }
    if (names.empty()) {
        names = scan_names(connection, prefix, "log");
    }
    const std::string clock_key = args.names.size() == 1 ? Keys::make(prefix, names[0]).log : "";
    const long long now_ms = server_time_ms(connection, clock_key);
    const long long from_ms = args.since ? resolve_when(*args.since, "--since", now_ms) : 0;
    const long long to_ms = args.until ? resolve_when(*args.until, "--until", now_ms) : (1LL << 53);
    if (to_ms < from_ms) {
        throw UsageError("--until is before --since");
    }
    std::vector<Event> events;
    // Each history is read up to the same ID, so that --follow goes on from there exactly.
    std::vector<std::string> last_ids;
    std::vector<std::string> readable;
    std::set<std::string> unreadable;
    for (const auto& name : names) {
        std::vector<Event> own;
        try {
            own = read_history(connection, prefix, name, from_ms, to_ms);
        } catch (const Error& error) {
            // A key of another type in a history's place (WRONGTYPE): without NAME, say so
            // and show the others (a NAME given is the error).
            if (!args.names.empty() || error.exit_code() != static_cast<int>(ExitCode::conflict)) {
                throw;
            }
            unreadable.insert(name);
            std::cerr << fmt::format("redsem: warning: the history of '{}' cannot be read: {}\n",
                                     terminal_safe(name), error.what());
            continue;
        }
        readable.push_back(name);
        // With nothing read, every entry from --since on that comes later is new.
        last_ids.push_back(!own.empty()  ? own.back().id
                           : from_ms > 0 ? fmt::format("{}-{}", from_ms - 1, k_last_sequence)
                                         : std::string("0-0"));
        events.insert(events.end(), std::make_move_iterator(own.begin()),
                      std::make_move_iterator(own.end()));
    }
    names = std::move(readable);
    sort_by_time(events);
    Printer printer(args.json, args.names.size() != 1);
    if (!args.follow) {
        if (events.empty() && !args.json) {
            std::cerr << (names.empty() ? fmt::format("redsem: no semaphore under prefix '{}' has "
                                                      "a history\n",
                                                      terminal_safe(prefix))
                                        : std::string("redsem: no events\n"));
        }
        printer.print(events);
        return 0;
    }
    if (!printer.print(events)) {
        return 0;
    }
    // Interrupted (Ctrl-C, SIGTERM): stop following and exit 0, as tail -f's users expect
    // nothing of its status; SIGPIPE (a closed pipe) ends the process quietly.
    SignalWatch signals({SIGINT, SIGTERM, SIGHUP});
    const bool all = args.names.empty();
    // Redis away (a restart, a failover): told once, then looked for again every
    // k_follow_retry, as status --watch does; following resumes after the last event printed.
    bool away = false;
    for (;;) {
        try {
            if (!follow_round(connection, prefix, all, names, last_ids, unreadable, printer,
                              signals.fd())) {
                return 0;
            }
        } catch (const WaitInterrupted&) {
            return 0;
        } catch (const Error& error) {
            const bool unreachable = error.exit_code() == static_cast<int>(ExitCode::unavailable) &&
                                     error.transience() != Transience::permanent;
            if (!unreachable) {
                throw;
            }
            if (!away) {
                std::cerr << fmt::format("redsem: warning: {}; trying again every {}\n",
                                         error.what(), format_duration(k_follow_retry));
                away = true;
            }
            pollfd signal_fd{signals.fd(), POLLIN, 0};
            if (poll(&signal_fd, 1, static_cast<int>(k_follow_retry.count())) > 0) {
                return 0;
            }
            continue;
        }
        if (away) {
            std::cerr << "redsem: Redis answers again; following on from the last event shown\n";
            away = false;
        }
    }
}

} // namespace redsem::cli

#include "cli/admission.hpp"
#include "cli/command_args.hpp"
#include "cli/full_screen.hpp"
#include "cli/output.hpp"
#include "process/any_readable.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/history.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/wait_estimate.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/prometheus.hpp"
#include "util/table.hpp"
#include "util/time_format.hpp"
#include "util/token.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <initializer_list>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sstream>
#include <string_view>
#include <sys/ioctl.h>
#include <unistd.h>

namespace redsem::cli {

namespace {

using nlohmann::json;

// The terminal's width when stdout is one (long labels are then cut to fit), else 0.
std::size_t terminal_width() {
    winsize size{};
    if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) {
        return size.ws_col;
    }
    return 0;
}

std::string ago(long long ms) {
    return format_duration(Milliseconds{ms}) + " ago";
}

json time_fields(const char* name, long long epoch_ms) {
    return {{std::string(name) + "_ms", epoch_ms}, {name, iso8601_utc(epoch_ms)}};
}

json meta_json(const std::optional<Record>& record) {
    if (!record) {
        return {{"host", nullptr},  {"pid", nullptr},  {"pid_of", nullptr}, {"user", nullptr},
                {"label", nullptr}, {"keeper", false}, {"ci", nullptr}};
    }
    return {{"host", record->meta.host},
            {"pid", record->meta.pid},
            {"pid_of", record->meta.pid_of.empty() ? json(nullptr) : json(record->meta.pid_of)},
            {"user", record->meta.user},
            {"label", record->meta.label},
            {"keeper", record->meta.keeper},
            {"ci", ci_json(record->meta.ci)}};
}

// The PID column: the pid, and what it is when not a `redsem run` ("caller": the script that
// ran redsem acquire; "while-pid": the process a keeper holds the slot for).
std::string pid_cell(const std::optional<Record>& record) {
    if (!record) {
        return "?";
    }
    const std::string& of = record->meta.pid_of;
    return std::to_string(record->meta.pid) + (of.empty() || of == "run" ? "" : " (" + of + ")");
}

// The SLOT column: "3", or "0,3,4" for a holder of several.
std::string slot_cell(const std::vector<long long>& slots) {
    return fmt::format("{}", fmt::join(slots, ","));
}

json holder_json(const HolderView& holder, long long now) {
    json out = meta_json(holder.record);
    out["token"] = holder.token;
    out["slot"] = holder.record ? json(holder.record->slot) : json(nullptr);
    out["slots"] = holder.record ? json(holder.record->slots) : json(nullptr);
    out["fence"] = holder.record ? json(holder.record->fence) : json(nullptr);
    out["ttl_ms"] = holder.record ? json(holder.record->ttl_ms) : json(nullptr);
    if (holder.record) {
        out.update(time_fields("acquired", holder.record->since_ms));
        out.update(time_fields("renewed", holder.deadline_ms - holder.record->ttl_ms));
        out["held_for_ms"] = now - holder.record->since_ms;
    }
    out.update(time_fields("deadline", holder.deadline_ms));
    out["expires_in_ms"] = holder.deadline_ms - now;
    out["expired"] = holder.expired;
    return out;
}

json waiter_json(const SemaphoreView& view, const WaiterView& waiter) {
    const long long now = view.server_now_ms;
    json out = meta_json(waiter.record);
    out["token"] = waiter.token;
    out["position"] = waiter.position;
    // When it may get its slots, from now (null: no estimate; see "wait_estimate").
    const auto estimate =
        view.holds ? estimate_wait(view, *view.holds, waiter.position) : std::nullopt;
    out["estimate_ms"] = estimate ? json(estimate->count()) : json(nullptr);
    // How many slots it asks for ("all": --exclusive).
    out["wants"] = !waiter.record              ? json(nullptr)
                   : waiter.record->wants == 0 ? json("all")
                                               : json(waiter.record->wants);
    out["stale"] = waiter.stale;
    if (waiter.record) {
        out.update(time_fields("since", waiter.record->since_ms));
        out["waited_ms"] = now - waiter.record->since_ms;
        out["ttl_ms"] = waiter.record->ttl_ms;
    }
    return out;
}

// A run as the history tells it (a release by `run`): {"time_ms", "time", "host", "pid",
// "user", "label", "exit_status", "signal" (0: it exited), "held_ms", "timed_out_ms"}, or null.
json run_json(const std::optional<Event>& run) {
    if (!run) {
        return nullptr;
    }
    json out = time_fields("time", run->time_ms);
    out["host"] = run->meta ? json(run->meta->host) : json(nullptr);
    out["pid"] = run->meta ? json(run->meta->pid) : json(nullptr);
    out["user"] = run->meta ? json(run->meta->user) : json(nullptr);
    out["label"] = run->meta ? json(run->meta->label) : json(nullptr);
    out["exit_status"] = *run->exit_status;
    out["signal"] = run->signal ? json(*run->signal) : json(nullptr);
    out["held_ms"] = run->duration_ms ? json(*run->duration_ms) : json(nullptr);
    out["timed_out_ms"] = run->timed_out_ms ? json(*run->timed_out_ms) : json(nullptr);
    return out;
}

// "3m ago on web-2 ('backup')": when a run ended, and who ran it.
std::string run_when(const Event& run, long long now) {
    std::string text = ago(std::max(0LL, now - run.time_ms));
    if (run.meta) {
        text += " on " + terminal_safe(run.meta->host, 64);
        if (!run.meta->label.empty()) {
            text += " ('" + terminal_safe(run.meta->label, 40) + "')";
        }
    }
    return text;
}

// "last run: 3m ago on web-2 ('backup'), exit 0 after 2m10s", and when it failed, the last
// success; "" when the history has no run.
std::string runs_line(const std::optional<RunHistory>& runs, long long now) {
    if (!runs || !runs->last) {
        return "";
    }
    const Event& last = *runs->last;
    std::string ended = fmt::format("exit {}", *last.exit_status);
    if (last.timed_out_ms) {
        ended = "stopped at --max-run (" + ended + ")";
    } else if (last.signal && *last.signal > 0) {
        ended = fmt::format("ended by signal {}", *last.signal);
    }
    std::string line = "last run: " + run_when(last, now) + ", " + ended;
    if (last.duration_ms) {
        line += " after " + format_duration(Milliseconds{*last.duration_ms});
    }
    if (*last.exit_status != 0) {
        line += runs->last_success ? "; last success: " + run_when(*runs->last_success, now)
                                   : "; no success in the history";
    }
    return line;
}

// The runs of `view`'s semaphore from its history, into view.runs (throws as read_runs()).
void read_runs_into(Connection& connection, const std::string& prefix, SemaphoreView& view) {
    view.runs = read_runs(connection, prefix, view.name);
}

// The occurrence's claim (run --once-per) as JSON: {"token", "stage", "attempt", "since_ms",
// "since", "until_ms", "until", "ends_in_ms", "host", "pid", "user", "label", and for a run
// that failed "exit_status"}; null when none is in force.
json claim_json(const std::optional<Claim>& claim, long long now) {
    if (!claim) {
        return nullptr;
    }
    json out{{"token", claim->token},
             {"stage", claim->stage},
             {"ends_in_ms", claim->until_ms - now},
             {"host", claim->by.host},
             {"pid", claim->by.pid},
             {"user", claim->by.user},
             {"label", claim->by.label},
             {"attempt", claim->attempt}};
    if (claim->by.exit_status) {
        out["exit_status"] = *claim->by.exit_status;
    }
    out.update(time_fields("since", claim->since_ms));
    out.update(time_fields("until", claim->until_ms));
    return out;
}

// One line for the claim of an occurrence in force ("occurrence: ran on web-1 (pid 812) at
// 2026-12-01 03:15:02 and succeeded; callers with --once-per skip until 2026-12-01 23:15:02");
// "" when there is none.
std::string claim_line(const std::optional<Claim>& claim) {
    if (!claim) {
        return "";
    }
    const std::string who = fmt::format(
        "{} (pid {}{})", terminal_safe(claim->by.host, 64), claim->by.pid,
        claim->by.label.empty() ? "" : ", '" + terminal_safe(claim->by.label, 80) + "'");
    const auto when = [](long long ms) { return local_time(ms).substr(0, 19); };
    if (claim->stage == "done") {
        return fmt::format("occurrence: ran on {} at {} and succeeded; callers with --once-per "
                           "skip until {}",
                           who, when(claim->since_ms), when(claim->until_ms));
    }
    const std::string attempt =
        claim->attempt > 1 ? fmt::format(" (attempt {})", claim->attempt) : std::string();
    if (claim->stage == "run") {
        return fmt::format("occurrence: running on {} since {}{}; its window ends at {}", who,
                           when(claim->since_ms), attempt, when(claim->until_ms));
    }
    if (claim->stage == "failed") {
        return fmt::format("occurrence: the run on {} at {}{} failed{}; the next caller with "
                           "--once-per runs it, unless its --attempts are used up (then it "
                           "skips until {})",
                           who, when(claim->since_ms), attempt,
                           claim->by.exit_status ? fmt::format(" (exit {})", *claim->by.exit_status)
                                                 : std::string(),
                           when(claim->until_ms));
    }
    return fmt::format("occurrence: the run on {} at {}{} left without finishing (its lease ran "
                       "out, or its slot was released for it); the next caller with --once-per "
                       "runs it, unless its --attempts are used up (with --at-most-once: skips "
                       "until {})",
                       who, when(claim->since_ms), attempt, when(claim->until_ms));
}

// "2/3 held (1 expired), 4 waiting (1 stale)": dead entries never count as held or waiting.
std::string headline(long long held, long long expired, std::optional<long long> limit,
                     long long waiting, long long stale) {
    std::string text = fmt::format("{}/{} held", held, limit ? std::to_string(*limit) : "?");
    if (expired > 0) {
        text += fmt::format(" ({} expired)", expired);
    }
    text += fmt::format(", {} waiting", waiting);
    if (stale > 0) {
        text += fmt::format(" ({} stale)", stale);
    }
    return text;
}

json view_json(const SemaphoreView& view) {
    json holders = json::array();
    for (const auto& holder : view.holders) {
        holders.push_back(holder_json(holder, view.server_now_ms));
    }
    json waiters = json::array();
    for (const auto& waiter : view.waiters) {
        waiters.push_back(waiter_json(view, waiter));
    }
    json out{{"name", view.name},
             {"limit", view.limit ? json(*view.limit) : json(nullptr)},
             {"held", view.held},
             {"expired_holders", view.expired},
             {"waiting", view.waiting},
             {"stale_waiters", view.stale},
             {"holders", holders},
             {"waiters", waiters},
             {"admission", admission_json(view.admission)},
             {"paused", pause_json(view.pause, view.server_now_ms)},
             {"occurrence", claim_json(view.claim, view.server_now_ms)}};
    out["last_run"] = run_json(view.runs ? view.runs->last : std::nullopt);
    out["last_success"] = run_json(view.runs ? view.runs->last_success : std::nullopt);
    // What the waiters' estimates are drawn from: null while nobody waits.
    out["wait_estimate"] =
        !view.holds ? json(nullptr)
                    : json{{"holds", view.holds->holds},
                           {"median_hold_ms", view.holds->median ? json(view.holds->median->count())
                                                                 : json(nullptr)}};
    out.update(time_fields("server_time", view.server_now_ms));
    return out;
}

// One line for a paused semaphore ("'deploy' is paused (by alice on build-7, pid 4242, 5m
// ago): db migration; until 'redsem resume deploy'"); "" when it is not.
std::string pause_line(const std::string& name, const std::optional<Pause>& pause, long long now) {
    if (!pause) {
        return "";
    }
    // (pause_text() makes each part printable.)
    return pause_text(name, pause->by, Milliseconds{std::max(0LL, now - pause->since_ms)},
                      pause->until_ms > 0 ? std::optional(Milliseconds{pause->until_ms - now})
                                          : std::nullopt);
}

// render_table(), but on a terminal narrower than the table the columns named `spare` go
// first, in that order (what --json also shows), before the last column (LABEL) is cut.
std::string render_narrow(std::vector<std::vector<std::string>> rows, std::size_t width,
                          std::initializer_list<std::string_view> spare) {
    // Every line, not the header's alone: a long LABEL widens the rows below it.
    const auto fits = [&] {
        if (width == 0) {
            return true;
        }
        const std::string table = render_table(rows, 0, rows[0].size() - 1);
        for (std::size_t at = 0; at < table.size();) {
            const std::size_t end = table.find('\n', at);
            if (display_width(table.substr(at, end - at)) > width) {
                return false;
            }
            at = end == std::string::npos ? table.size() : end + 1;
        }
        return true;
    };
    for (const std::string_view column : spare) {
        if (fits()) {
            break;
        }
        const auto at = std::find(rows[0].begin(), rows[0].end(), column);
        if (at == rows[0].end()) {
            continue;
        }
        const auto index = at - rows[0].begin();
        for (auto& row : rows) {
            row.erase(row.begin() + index);
        }
    }
    return render_table(rows, width, rows[0].size() - 1);
}

// What a waiter asks for: "1", a count (--slots K), or "all" (--exclusive).
std::string wants_cell(const std::optional<Record>& record) {
    if (!record) {
        return "?";
    }
    return record->wants == 0 ? "all" : std::to_string(record->wants);
}

void print_view(std::ostream& out, const SemaphoreView& view, std::size_t width) {
    const long long now = view.server_now_ms;
    std::string closed = admission_line(view.admission);
    if (const std::string paused = pause_line(view.name, view.pause, now); !paused.empty()) {
        closed = closed.empty() ? paused : paused + "\n" + closed;
    }
    if (const std::string claimed = claim_line(view.claim); !claimed.empty()) {
        closed = closed.empty() ? claimed : closed + "\n" + claimed;
    }
    if (const std::string ran = runs_line(view.runs, now); !ran.empty()) {
        closed = closed.empty() ? ran : closed + "\n" + ran;
    }
    if (view.holders.empty() && view.waiters.empty()) {
        // A stored limit is shown: an idle semaphore keeps one an operator set.
        out << terminal_safe(view.name) << ": no holders and no waiters"
            << (view.limit ? fmt::format(" (limit {})", *view.limit) : "") << "\n";
        if (!closed.empty()) {
            out << closed << "\n";
        }
        return;
    }
    out << fmt::format("{}: {}\n", terminal_safe(view.name),
                       headline(view.held, view.expired, view.limit, view.waiting, view.stale));
    if (!closed.empty()) {
        out << closed << "\n";
    }
    if (!view.holders.empty()) {
        std::vector<std::vector<std::string>> rows{{"SLOT", "TOKEN", "HOST", "PID", "USER", "HELD",
                                                    "RENEWED", "EXPIRES", "FENCE", "LABEL"}};
        for (const auto& holder : view.holders) {
            const auto& r = holder.record;
            const long long left = holder.deadline_ms - now;
            rows.push_back(
                {r ? slot_cell(r->slots) : "?", short_token(holder.token), r ? r->meta.host : "?",
                 pid_cell(r), r ? r->meta.user : "?",
                 r ? format_duration(Milliseconds{now - r->since_ms}) : "?",
                 r ? ago(now - (holder.deadline_ms - r->ttl_ms)) : "?",
                 left > 0 ? "in " + format_duration(Milliseconds{left}) : "expired " + ago(-left),
                 r ? std::to_string(r->fence) : "?", r ? label_cell(r->meta) : "?"});
        }
        out << render_narrow(rows, width, {"FENCE", "RENEWED"});
    }
    if (!view.waiters.empty()) {
        // With an estimate, each waiter's (EXPECTED); else a line saying why there is none.
        const bool estimated =
            view.holds && view.holds->median && !(view.pause && view.pause->until_ms == 0);
        if (view.holds && !estimated) {
            out << "wait: " << estimate_text(*view.holds, std::nullopt) << "\n";
        } else if (estimated) {
            out << fmt::format("wait: estimated from the median hold, {} over the last {}\n",
                               format_duration(*view.holds->median), view.holds->holds);
        }
        std::vector<std::vector<std::string>> rows{
            {"QUEUED", "TOKEN", "HOST", "PID", "USER", "WAITING", "WANTS", "LABEL"}};
        if (estimated) {
            rows[0].insert(rows[0].begin() + 6, "EXPECTED");
        }
        for (const auto& waiter : view.waiters) {
            const auto& r = waiter.record;
            std::string waited = r ? format_duration(Milliseconds{now - r->since_ms}) : "?";
            if (waiter.stale) {
                waited += " (stale)";
            }
            rows.push_back({std::to_string(waiter.position), short_token(waiter.token),
                            r ? r->meta.host : "?", pid_cell(r), r ? r->meta.user : "?", waited,
                            wants_cell(r), r ? label_cell(r->meta) : "?"});
            if (estimated) {
                const auto wait = estimate_wait(view, *view.holds, waiter.position);
                rows.back().insert(rows.back().begin() + 6, wait ? "in " + rounded(*wait) : "?");
            }
        }
        out << render_table(rows, width, rows[0].size() - 1);
    }
}

void print_summaries(std::ostream& out, const std::vector<SemaphoreSummary>& summaries,
                     const std::string& prefix, std::size_t width) {
    if (summaries.empty()) {
        out << "no semaphores under prefix '" << terminal_safe(prefix) << "'\n";
        return;
    }
    std::vector<std::vector<std::string>> rows{
        {"NAME", "HELD", "EXPIRED", "WAITING", "STALE", "OLDEST", "HOLDER", "LABEL"}};
    for (const auto& summary : summaries) {
        const auto& oldest = summary.oldest;
        rows.push_back(
            {summary.name,
             fmt::format("{}/{}", summary.held,
                         summary.limit ? std::to_string(*summary.limit) : "?"),
             std::to_string(summary.expired), std::to_string(summary.waiting),
             std::to_string(summary.stale),
             oldest ? format_duration(Milliseconds{summary.server_now_ms - oldest->since_ms}) : "-",
             oldest ? fmt::format("{}:{}", oldest->meta.host, oldest->meta.pid) : "-",
             oldest ? label_cell(oldest->meta) : ""});
    }
    out << render_table(rows, width, rows[0].size() - 1);
    // Admission is closed for every semaphore of a server at once (on a Redis Cluster, of a
    // node): each distinct line once.
    std::vector<std::string> closed;
    for (const auto& summary : summaries) {
        const std::string line = admission_line(summary.admission);
        if (!line.empty() && std::find(closed.begin(), closed.end(), line) == closed.end()) {
            closed.push_back(line);
        }
    }
    for (const auto& line : closed) {
        out << line << "\n";
    }
    for (const auto& summary : summaries) {
        if (const std::string line = pause_line(summary.name, summary.pause, summary.server_now_ms);
            !line.empty()) {
            out << line << "\n";
        }
    }
}

// `summaries` without the semaphores that cannot be read (a key of another type at one of
// their names), each told in one line to `warnings`.
std::vector<SemaphoreSummary> readable_only(std::vector<SemaphoreSummary> summaries,
                                            std::ostream& warnings) {
    std::erase_if(summaries, [&](const SemaphoreSummary& summary) {
        if (summary.unreadable.empty()) {
            return false;
        }
        warnings << fmt::format("redsem: warning: semaphore '{}' is left out: {}\n",
                                terminal_safe(summary.name), summary.unreadable);
        return true;
    });
    return summaries;
}

int show_all(Connection& connection, const std::string& prefix, bool as_json) {
    // A cluster primary that is down leaves out its semaphores, with a warning and exit 69 (so
    // that a script notices): the rest is still listed.
    std::vector<UnlistedNode> unlisted;
    const auto summaries = readable_only(
        list_semaphores(connection, prefix, AdmissionRead::proven, &unlisted), std::cerr);
    const int status = unlisted.empty() ? 0 : static_cast<int>(ExitCode::unavailable);
    if (as_json) {
        json out = json::array();
        for (const auto& summary : summaries) {
            json oldest = nullptr;
            if (summary.oldest) {
                oldest = meta_json(summary.oldest);
                oldest.update(time_fields("acquired", summary.oldest->since_ms));
                oldest["held_for_ms"] = summary.server_now_ms - summary.oldest->since_ms;
            }
            out.push_back({{"name", summary.name},
                           {"limit", summary.limit ? json(*summary.limit) : json(nullptr)},
                           {"held", summary.held},
                           {"expired_holders", summary.expired},
                           {"waiting", summary.waiting},
                           {"stale_waiters", summary.stale},
                           {"oldest_holder", oldest},
                           {"admission", admission_json(summary.admission)},
                           {"paused", pause_json(summary.pause, summary.server_now_ms)},
                           {"occurrence", claim_json(summary.claim, summary.server_now_ms)}});
        }
        print_json(out);
        warn_unlisted(unlisted);
        return status;
    }
    if (summaries.empty()) {
        // A notice, not a result: stdout stays empty (as for log and gc).
        std::cerr << "redsem: no semaphores under prefix '" << terminal_safe(prefix) << "'\n";
    } else {
        print_summaries(std::cout, summaries, prefix, terminal_width());
    }
    warn_unlisted(unlisted);
    return status;
}

// How often --watch redraws (lease countdowns) when no event comes first.
constexpr Milliseconds k_watch_redraw{1000};

void print_views(std::ostream& out, const std::vector<SemaphoreView>& views, std::size_t width) {
    for (std::size_t i = 0; i < views.size(); ++i) {
        if (i > 0) {
            out << "\n";
        }
        print_view(out, views[i], width);
    }
}

// The runs of each of `summaries` whose history is on (read_runs()), in their order; a
// summary without a history gets none, and so does one whose history key is of another type
// (a scrape of the others goes on; `status NAME` and `log` name it).
std::vector<RunHistory> runs_of(Connection& connection, const std::string& prefix,
                                const std::vector<SemaphoreSummary>& summaries) {
    std::vector<RunHistory> runs(summaries.size());
    for (std::size_t i = 0; i < summaries.size(); ++i) {
        try {
            if (summaries[i].counters) {
                runs[i] = read_runs(connection, prefix, summaries[i].name);
            }
        } catch (const ConflictError&) {
        }
    }
    return runs;
}

// The last-run families of --format prometheus: a sample for each semaphore whose history
// knows such a run (none for one that has none, so that an alert on the age of a success
// also needs `absent()` or `status --overdue` for a job that never succeeded).
void print_run_families(PrometheusWriter& out, const std::vector<SemaphoreSummary>& summaries,
                        const std::vector<RunHistory>& runs, const std::string& prefix) {
    using Labels = PrometheusWriter::Labels;
    const auto seconds = [](long long ms) { return static_cast<double>(ms) / 1000.0; };
    const auto each = [&](auto sample) {
        for (std::size_t i = 0; i < summaries.size(); ++i) {
            sample(Labels{{"prefix", prefix}, {"name", summaries[i].name}}, runs[i]);
        }
    };
    out.family("redsem_last_run_timestamp_seconds", "gauge",
               "When the last run (redsem run) ended, as a Unix time by the server's clock.");
    each([&](const Labels& labels, const RunHistory& run) {
        if (run.last) {
            out.sample(labels, seconds(run.last->time_ms));
        }
    });
    out.family("redsem_last_exit_status", "gauge",
               "The exit status of the last run's command (128+N: killed by signal N).");
    each([&](const Labels& labels, const RunHistory& run) {
        if (run.last) {
            out.sample(labels, *run.last->exit_status);
        }
    });
    out.family("redsem_last_run_duration_seconds", "gauge", "How long the last run held its slot.");
    each([&](const Labels& labels, const RunHistory& run) {
        if (run.last && run.last->duration_ms) {
            out.sample(labels, seconds(*run.last->duration_ms));
        }
    });
    out.family("redsem_last_success_timestamp_seconds", "gauge",
               "When the last run whose command exited 0 ended, as a Unix time by the server's "
               "clock.");
    each([&](const Labels& labels, const RunHistory& run) {
        if (run.last_success) {
            out.sample(labels, seconds(run.last_success->time_ms));
        }
    });
}

// --format prometheus: one family per metric, a sample per semaphore (see redsem(1)); `runs`
// holds each one's runs (runs_of()).
void print_prometheus(const std::vector<SemaphoreSummary>& summaries,
                      const std::vector<RunHistory>& runs, const std::string& prefix) {
    PrometheusWriter out;
    using Labels = PrometheusWriter::Labels;
    const auto labels = [&prefix](const SemaphoreSummary& summary) {
        return Labels{{"prefix", prefix}, {"name", summary.name}};
    };
    const auto seconds_since = [](const SemaphoreSummary& summary, std::optional<long long> since) {
        return since ? static_cast<double>(summary.server_now_ms - *since) / 1000.0 : 0.0;
    };
    out.family("redsem_limit", "gauge", "How many may hold the semaphore at once.");
    for (const auto& summary : summaries) {
        if (summary.limit) {
            out.sample(labels(summary), *summary.limit);
        }
    }
    const std::pair<const char*, std::pair<const char*, long long SemaphoreSummary::*>> counts[] = {
        {"redsem_holders", {"Holders whose lease is live.", &SemaphoreSummary::holders}},
        {"redsem_held_slots",
         {"Slots of holders whose lease is live (one of --slots K counts K).",
          &SemaphoreSummary::held}},
        {"redsem_expired_holders",
         {"Holders whose lease ran out (or hand-over lapsed), not removed yet.",
          &SemaphoreSummary::expired}},
        {"redsem_waiters",
         {"Waiters in the queue that keep their place.", &SemaphoreSummary::waiting}},
        {"redsem_stale_waiters",
         {"Waiters that stopped refreshing their place, not removed yet.",
          &SemaphoreSummary::stale}},
    };
    for (const auto& [name, what] : counts) {
        out.family(name, "gauge", what.first);
        for (const auto& summary : summaries) {
            out.sample(labels(summary), summary.*what.second);
        }
    }
    out.family("redsem_admission_closed_seconds", "gauge",
               "How long nobody new is admitted for, after a possible loss of data (0: open).");
    for (const auto& summary : summaries) {
        const AdmissionState& admission = summary.admission;
        if (admission.known) {
            out.sample(labels(summary),
                       admission.closed()
                           ? static_cast<double>(admission.opens_at_ms - admission.server_now_ms) /
                                 1000.0
                           : 0.0);
        }
    }
    out.family("redsem_paused", "gauge",
               "1 while nobody new is admitted because of 'redsem pause' or 'drain', else 0.");
    for (const auto& summary : summaries) {
        out.sample(labels(summary), summary.pause ? 1LL : 0LL);
    }
    out.family("redsem_paused_seconds", "gauge",
               "How long the semaphore has been paused (0: it is not).");
    for (const auto& summary : summaries) {
        out.sample(labels(summary),
                   seconds_since(summary, summary.pause ? std::optional(summary.pause->since_ms)
                                                        : std::nullopt));
    }
    out.family("redsem_occurrence_done", "gauge",
               "1 while the occurrence's run (run --once-per) has succeeded and its window lasts: "
               "callers skip; else 0.");
    for (const auto& summary : summaries) {
        out.sample(labels(summary), summary.claim && summary.claim->stage == "done" ? 1LL : 0LL);
    }
    out.family("redsem_occurrence_until_timestamp_seconds", "gauge",
               "When the window of the occurrence's claim (run --once-per) ends, as a Unix time "
               "by the server's clock (0: no claim in force).");
    for (const auto& summary : summaries) {
        out.sample(labels(summary),
                   summary.claim ? static_cast<double>(summary.claim->until_ms) / 1000.0 : 0.0);
    }
    out.family("redsem_oldest_wait_seconds", "gauge",
               "How long the waiter at the head of the queue has waited (0: nobody waits).");
    for (const auto& summary : summaries) {
        out.sample(labels(summary), seconds_since(summary, summary.oldest_wait_since_ms));
    }
    out.family("redsem_oldest_hold_seconds", "gauge",
               "How long the longest live holder has held its slot (0: nobody holds one).");
    for (const auto& summary : summaries) {
        out.sample(labels(summary),
                   seconds_since(summary, summary.oldest ? std::optional(summary.oldest->since_ms)
                                                         : std::nullopt));
    }
    const std::pair<const char*, std::pair<const char*, long long HistoryCounters::*>> totals[] = {
        {"redsem_acquired_total",
         {"Slots granted, directly or by hand-over (while history is on).",
          &HistoryCounters::acquired}},
        {"redsem_expired_total",
         {"Leases that ran out, and hand-overs nobody collected (while history is on).",
          &HistoryCounters::expired}},
        {"redsem_lost_total",
         {"Renewals that found their lease gone (while history is on).", &HistoryCounters::lost}},
    };
    for (const auto& [name, what] : totals) {
        out.family(name, "counter", what.first);
        for (const auto& summary : summaries) {
            if (summary.counters) {
                out.sample(labels(summary), (*summary.counters).*what.second);
            }
        }
    }
    print_run_families(out, summaries, runs, prefix);
    std::cout << out.text();
}

// One screen of --watch.
std::string watch_frame(Connection& connection, const std::string& prefix,
                        const std::vector<std::string>& names, std::size_t width) {
    std::ostringstream out;
    std::vector<SemaphoreView> views;
    std::vector<SemaphoreSummary> summaries;
    std::string unreadable_lines;
    long long now = 0;
    if (names.empty()) {
        std::ostringstream left_out;
        summaries = readable_only(list_semaphores(connection, prefix), left_out);
        unreadable_lines = left_out.str();
        now = summaries.empty() ? server_time_ms(connection, "") : summaries.front().server_now_ms;
    } else {
        for (const auto& name : names) {
            views.push_back(inspect(connection, prefix, name));
            read_holds(connection, prefix, views.back());
            read_runs_into(connection, prefix, views.back());
        }
        now = views.front().server_now_ms;
    }
    out << fmt::format("redsem status: {}  (server time; q quits)\n\n", local_time(now));
    out << unreadable_lines;
    if (names.empty()) {
        print_summaries(out, summaries, prefix, width);
    } else {
        print_views(out, views, width);
    }
    return out.str();
}

// --watch: redraws at each event of the names' histories (or every k_watch_redraw), until q,
// Ctrl-C or a signal to stop.
int watch(Connection& connection, const std::string& prefix,
          const std::vector<std::string>& names) {
    SignalWatch signals({SIGINT, SIGTERM, SIGHUP, SIGWINCH, SIGTSTP});
    FullScreen screen;
    AnyReadable woken({STDIN_FILENO, signals.fd()});
    std::vector<std::string> last_ids(names.size(), "$");
    bool follow = !names.empty();
    for (;;) {
        for (const int signal : signals.take_pending()) {
            if (signal == SIGTSTP) {
                screen.suspend();
            } else if (signal != SIGWINCH) {
                return 0;
            }
        }
        for (char key = screen.read_key(); key != 0; key = screen.read_key()) {
            if (key == 'q' || key == 'Q') {
                return 0;
            }
        }
        std::string frame;
        try {
            // Where the histories stand before reading the tables: an event while they are
            // read or drawn wakes the wait below at once.
            if (follow) {
                last_ids = last_entry_ids(connection, prefix, names);
            }
            frame =
                watch_frame(connection, prefix, names, static_cast<std::size_t>(screen.columns()));
        } catch (const UsageError&) {
            throw;
        } catch (const Error& error) {
            // Redis went away, or failed over: say so on the screen, and look again.
            frame = fmt::format("redsem: error: {}\n\nretrying every {}; q quits", error.what(),
                                format_duration(k_watch_redraw));
        }
        screen.draw(frame);
        try {
            if (follow) {
                follow_history(connection, prefix, names, last_ids, k_watch_redraw, woken.fd());
                continue;
            }
        } catch (const WaitInterrupted&) {
            continue;
        } catch (const UsageError&) {
            follow = false; // several names on a Redis Cluster: redraw on the clock alone
        } catch (const Error&) {
            // Shown at the next redraw.
        }
        pollfd wait{woken.fd(), POLLIN, 0};
        poll(&wait, 1, static_cast<int>(k_watch_redraw.count()));
    }
}

// --overdue: a line on stdout for each of `names` without a successful run within `within`
// by the server's clock ("nightly-backup: last success 26h ago on web-2"); exit 1 when there
// is one, 0 when there is none. A history that cannot be read is an error, as in `log`.
int check_overdue(Connection& connection, const std::string& prefix,
                  const std::vector<std::string>& names, Milliseconds within) {
    int status = 0;
    for (const std::string& name : names) {
        const long long now = server_time_ms(connection, Keys::make(prefix, name).log);
        const RunHistory runs = read_runs(connection, prefix, name);
        const auto& success = runs.last_success;
        if (success && now - success->time_ms <= within.count()) {
            continue;
        }
        status = static_cast<int>(ExitCode::not_held);
        std::cout << terminal_safe(name) << ": "
                  << (success ? "last success " + run_when(*success, now)
                              : std::string("no successful run in its history"))
                  << (runs.last && *runs.last->exit_status != 0 // after the last success
                          ? fmt::format("; the last run, {}, exited {}", run_when(*runs.last, now),
                                        *runs.last->exit_status)
                          : std::string())
                  << "\n";
    }
    return status;
}

} // namespace

int run_status(const StatusArgs& given, const GlobalOptions& global) {
    for (const auto& name : given.names) {
        check_name(name);
    }
    StatusArgs args = given;
    args.names.clear(); // a name given twice is shown once (and so is one series of metrics)
    for (const auto& name : given.names) {
        if (std::find(args.names.begin(), args.names.end(), name) == args.names.end()) {
            args.names.push_back(name);
        }
    }
    const std::string format = args.format.value_or(args.json ? "json" : "table");
    if (args.json && format != "json") {
        throw UsageError("--json and --format " + format + " exclude each other");
    }
    if (args.watch && format != "table") {
        throw UsageError("--watch shows a table; it takes no --json or --format");
    }
    if (args.names_only && (!args.names.empty() || format != "table" || args.watch)) {
        throw UsageError("--names takes no NAME, --json, --format or --watch");
    }
    if (args.overdue &&
        (args.names.empty() || args.json || args.format || args.watch || args.names_only)) {
        throw UsageError("--overdue checks the NAMEs given (at least one), and takes no --json, "
                         "--format, --watch or --names");
    }
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    if (args.watch) {
        return watch(connection, prefix, args.names);
    }
    if (args.overdue) {
        return check_overdue(connection, prefix, args.names, *args.overdue);
    }
    // A cluster primary that is down leaves out its semaphores: the rest is listed, with a
    // warning, and the exit status says so.
    std::vector<UnlistedNode> unlisted;
    const int listed = static_cast<int>(ExitCode::unavailable);
    if (args.names_only) {
        for (const auto& name : scan_names(connection, prefix, "state", &unlisted)) {
            std::cout << terminal_safe(name) << "\n";
        }
        warn_unlisted(unlisted);
        return unlisted.empty() ? 0 : listed;
    }
    if (format == "prometheus") {
        std::vector<SemaphoreSummary> summaries;
        int status = 0;
        if (args.names.empty()) {
            summaries = readable_only(
                list_semaphores(connection, prefix, AdmissionRead::proven, &unlisted), std::cerr);
            status = unlisted.empty() ? 0 : listed;
        } else {
            // Named, one that cannot be read is an error (65), as in the tables.
            for (const auto& name : args.names) {
                summaries.push_back(summarize(connection, prefix, name));
            }
            std::vector<std::string> unreadable;
            std::erase_if(summaries, [&](const SemaphoreSummary& summary) {
                if (summary.unreadable.empty()) {
                    return false;
                }
                unreadable.push_back(fmt::format("semaphore '{}' cannot be read: {}",
                                                 terminal_safe(summary.name), summary.unreadable));
                return true;
            });
            print_prometheus(summaries, runs_of(connection, prefix, summaries), prefix);
            for (const std::string& message : unreadable) {
                std::cerr << "redsem: error: " << message << "\n";
            }
            return unreadable.empty() ? 0 : static_cast<int>(ExitCode::conflict);
        }
        print_prometheus(summaries, runs_of(connection, prefix, summaries), prefix);
        warn_unlisted(unlisted);
        return status;
    }
    if (args.names.empty()) {
        return show_all(connection, prefix, format == "json");
    }
    // A semaphore that cannot be read (a foreign key in its place) is named on stderr after the
    // others are shown, and sets the exit status.
    std::vector<SemaphoreView> views;
    std::vector<std::string> unreadable;
    for (const auto& name : args.names) {
        try {
            views.push_back(inspect(connection, prefix, name));
            read_holds(connection, prefix, views.back());
            read_runs_into(connection, prefix, views.back());
        } catch (const ConflictError& error) {
            unreadable.emplace_back(error.what());
        }
    }
    if (format == "json" && !views.empty()) {
        json out = json::array();
        for (const auto& view : views) {
            out.push_back(view_json(view));
        }
        const json& shown = args.names.size() == 1 ? out[0] : out;
        print_json(shown);
    } else if (format != "json") {
        print_views(std::cout, views, terminal_width());
    }
    for (const std::string& message : unreadable) {
        std::cerr << "redsem: error: " << message << "\n";
    }
    return unreadable.empty() ? 0 : static_cast<int>(ExitCode::conflict);
}

} // namespace redsem::cli

#include "cli/slot_request.hpp"

#include "cli/admission.hpp"

#include "process/any_readable.hpp"
#include "process/ci_job.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/protocol.hpp"
#include "semaphore/wait_estimate.hpp"

#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/number.hpp"
#include "util/table.hpp"
#include "util/time_format.hpp"
#include "util/token.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <iostream>
#include <poll.h>
#include <sys/ioctl.h>
#include <system_error>
#include <unistd.h>

namespace redsem::cli {

namespace {

using Clock = std::chrono::steady_clock;

// A time to wait, in whole seconds rounded up ("1m" for 59.99 s, as for 60 s).
std::string seconds_up(Milliseconds duration) {
    return format_duration(Milliseconds{(duration.count() + 999) / 1000 * 1000});
}

// How long ago something happened, in whole seconds rounded down ("less than 1s").
std::string seconds_ago(Milliseconds duration) {
    return duration.count() < 1000 ? "less than 1s"
                                   : format_duration(Milliseconds{duration.count() / 1000 * 1000});
}

// "; held by HOST (pid PID, 'LABEL', for DUR), ..." for the live holders in `view` other than
// `token` (at most three named), or "" when there are none.
std::string holders_text(const SemaphoreView& view, const std::string& token) {
    constexpr std::size_t k_named = 3;
    std::vector<std::string> named;
    std::size_t live = 0;
    for (const HolderView& holder : view.holders) {
        if (holder.expired || !holder.record || holder.token == token) {
            continue;
        }
        if (++live > k_named) {
            continue;
        }
        const HolderMeta& meta = holder.record->meta;
        const Milliseconds held{std::max(0LL, view.server_now_ms - holder.record->since_ms)};
        named.push_back(
            fmt::format("{} (pid {}{}, for {})", terminal_safe(meta.host, 64), meta.pid,
                        meta.label.empty() ? "" : ", '" + terminal_safe(meta.label, 40) + "'",
                        seconds_ago(held)));
    }
    if (named.empty()) {
        return "";
    }
    std::string text = "; held by " + fmt::format("{}", fmt::join(named, ", "));
    if (live > k_named) {
        text += fmt::format(" and {} more", live - k_named);
    }
    return text;
}

// A waiter's place, numbered as `status` numbers the queue (1 is next), the slots held, and
// how long it may still wait (estimate_text(), "" when unknown).
struct WaitPlace {
    long long number = 0;
    long long queued = 0;
    long long held = 0;
    long long limit = 0;
    std::string estimate{};
};

std::string place_text(const WaitPlace& place) {
    return fmt::format("number {} of {} in the queue, {}/{} held{}{}", place.number, place.queued,
                       place.held, place.limit, place.estimate.empty() ? "" : ", ", place.estimate);
}

// The semaphore's last holds, for the estimate of a wait: read again at most every
// k_holds_fresh, since a waiting line is told far more often than a hold ends.
class RecentHolds {
public:
    // The holds, read into `view` (fresh, or as last read).
    void read_into(Connection& connection, const std::string& prefix, SemaphoreView& view) {
        if (!m_read || Clock::now() - m_read_at >= k_holds_fresh) {
            try {
                read_holds(connection, prefix, view);
            } catch (const std::exception&) {
                view.holds.reset(); // said beside a wait, the estimate must never end it
            }
            m_stats = view.holds;
            m_read = true;
            m_read_at = Clock::now();
        }
        view.holds = m_stats;
    }

private:
    static constexpr std::chrono::seconds k_holds_fresh{10};

    std::optional<HoldStats> m_stats;
    bool m_read = false;
    Clock::time_point m_read_at{};
};

// The live holders of `name` as holders_text() names them, or "" when they cannot be read:
// said beside a wait, it must never end it.
std::string holders_of(Connection& connection, const std::string& prefix, const std::string& name) {
    try {
        return holders_text(inspect(connection, prefix, name), "");
    } catch (const std::exception&) {
        return "";
    }
}

// A waiter's wait as one read of the semaphore's view shows it, so that its place and the
// holders named agree: `holders` as holders_text() says them.
struct WaitScene {
    bool waiting = false; // the token still waits (else it was granted meanwhile, or left)
    WaitPlace place{};
    std::string holders{};
    std::optional<Milliseconds> about{}; // the estimate of the wait, when there is one
};

// The scene of waiter `token` of `name`; nullopt when the view cannot be read.
std::optional<WaitScene> read_wait_scene(Connection& connection, const std::string& prefix,
                                         const std::string& name, const std::string& token,
                                         RecentHolds& holds) {
    try {
        SemaphoreView view = inspect(connection, prefix, name);
        holds.read_into(connection, prefix, view);
        WaitScene scene;
        for (const WaiterView& waiter : view.waiters) {
            if (waiter.token == token) {
                scene.waiting = true;
                scene.place = {waiter.position, view.waiting, view.held, view.limit.value_or(0)};
                if (view.holds) {
                    scene.about = estimate_wait(view, *view.holds, waiter.position);
                    scene.place.estimate = estimate_text(*view.holds, scene.about);
                }
            }
        }
        scene.holders = holders_text(view, token);
        return scene;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// A waiter's wait from one read of the view (`scene`, nullopt when it could not be read: then
// the place the acquire's reply gave, without holders); nullopt when it no longer waits.
std::optional<WaitScene> wait_scene(const std::optional<WaitScene>& scene,
                                    const QueuePosition& position) {
    if (!scene) {
        return WaitScene{
            true, {position.ahead + 1, position.queued, position.held, position.limit}, ""};
    }
    if (!scene->waiting) {
        return std::nullopt;
    }
    return scene;
}

// The line a waiter is told of its wait (see wait_scene()).
std::optional<std::string> wait_text(const std::optional<WaitScene>& scene,
                                     const QueuePosition& position) {
    const auto shown = wait_scene(scene, position);
    if (!shown) {
        return std::nullopt;
    }
    return place_text(shown->place) + shown->holders;
}

// The terminal line of a wait (`scene` as wait_scene() gives it) in at most `width` columns:
// the whole sentence when it fits; else, so that the place, the count and the first holder
// stay in sight, a short one without the name the caller gave ("redsem: waiting: 3 of 5
// queued, about 6m, 2/2 held by HOST (pid PID, for DUR), ..."), cut at its end.
std::string wait_line(const std::string& name, const WaitScene& scene, std::size_t width) {
    std::string line = fmt::format("redsem: waiting for '{}': {}{}", printable(name),
                                   place_text(scene.place), scene.holders);
    if (display_width(line) <= width) {
        return line;
    }
    constexpr std::string_view k_held_by = "; held by ";
    const std::string holders =
        scene.holders.starts_with(k_held_by) ? scene.holders.substr(k_held_by.size()) : "";
    line = fmt::format("redsem: waiting: {} of {} queued{}, {}/{} held{}{}", scene.place.number,
                       scene.place.queued, scene.about ? ", " + about(*scene.about) : "",
                       scene.place.held, scene.place.limit, holders.empty() ? "" : " by ", holders);
    return cut_to_width(line, width);
}

// One status line on a terminal, rewritten in place while waiting, cut to the terminal's width.
class WaitFeedback {
public:
    using Scene = std::function<std::optional<WaitScene>()>;

    WaitFeedback(std::string name, bool enabled, Scene scene)
        : m_name(std::move(name)), m_enabled(enabled && isatty(STDERR_FILENO) != 0),
          m_scene(std::move(scene)), m_started(Clock::now()) {}
    ~WaitFeedback() { clear(); }
    WaitFeedback(const WaitFeedback&) = delete;
    WaitFeedback& operator=(const WaitFeedback&) = delete;

    // Shown at all (stderr is a terminal, and not --quiet).
    bool enabled() const noexcept { return m_enabled; }

    void update(const QueuePosition& position) {
        if (!m_enabled || Clock::now() - m_started < std::chrono::seconds(1)) {
            return;
        }
        const auto scene = wait_scene(m_scene(), position);
        if (!scene) {
            return;
        }
        // Three columns to spare: the terminal echoes Ctrl-C as "^C" after the line, and an
        // echo that wrapped to the next row would leave this one behind when it is cleared.
        winsize size{};
        const std::size_t width = ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 3
                                      ? size.ws_col - std::size_t{3}
                                      : std::string::npos;
        const std::string line = wait_line(m_name, *scene, width);
        std::fprintf(stderr, "\r%s\033[K", line.c_str());
        std::fflush(stderr);
        m_shown = true;
    }

    // Erases the status line, so that a message can be printed.
    void clear() {
        if (m_shown) {
            std::fputs("\r\033[K", stderr);
            m_shown = false;
        }
    }

private:
    std::string m_name;
    bool m_enabled;
    Scene m_scene;
    bool m_shown = false;
    Clock::time_point m_started;
};

// Off a terminal (a CI log, cron's mail), waiting is told in whole lines: one when queued,
// naming the holders; one now and then while the wait goes on (after 1m, 2m, 4m, 8m, then
// every 10m), naming them again; the holders again when giving up (see wait_for_slot()).
class WaitLog {
public:
    WaitLog(std::string name, bool enabled, WaitFeedback::Scene scene)
        : m_name(std::move(name)), m_enabled(enabled), m_scene(std::move(scene)),
          m_started(Clock::now()) {}

    void update(const QueuePosition& position) {
        if (!m_enabled) {
            return;
        }
        if (!m_told) {
            m_told = true;
            if (const auto text = wait_text(m_scene(), position)) {
                std::fprintf(stderr, "redsem: waiting for '%s': %s\n", printable(m_name).c_str(),
                             text->c_str());
            }
            return;
        }
        const auto waited =
            std::chrono::duration_cast<std::chrono::minutes>(Clock::now() - m_started);
        if (waited < m_due) {
            return;
        }
        m_due = std::min(m_due * 2, m_due + k_longest_interval);
        if (const auto text = wait_text(m_scene(), position)) {
            std::fprintf(stderr, "redsem: still waiting for '%s' after %s: %s\n",
                         printable(m_name).c_str(), format_duration(waited).c_str(), text->c_str());
        }
    }

private:
    static constexpr std::chrono::minutes k_longest_interval{10};

    std::string m_name;
    bool m_enabled;
    WaitFeedback::Scene m_scene;
    Clock::time_point m_started;
    std::chrono::minutes m_due{1}; // the next line, counted from m_started
    bool m_told = false;
};

// What a waiter with --supersede is told when a newer one, `by`, took its place.
std::string superseded_message(const std::string& name, const HolderMeta& by) {
    const std::string job = by.ci && !by.ci->url.empty() ? "job " + terminal_safe(by.ci->url, 200)
                                                         : std::string("a newer waiter");
    return fmt::format("superseded in the queue of '{}' by {} on {} (pid {}{}{}) (--supersede); "
                       "nothing is held",
                       printable(name), job, terminal_safe(by.host, 64), by.pid,
                       by.user.empty() ? "" : ", user " + terminal_safe(by.user, 64),
                       by.label.empty() ? "" : ", '" + terminal_safe(by.label, 80) + "'");
}

// A waiter stopped by `signal` (a CI job cancelled) says so in one line, unless -q.
void say_left(const SlotRequest& request, int signal) {
    if (!request.quiet) {
        std::fprintf(stderr,
                     "redsem: SIG%s: stopped waiting for '%s' and left its queue; "
                     "nothing is held\n",
                     sigabbrev_np(signal), printable(request.name).c_str());
    }
}

// How often -w 0 --through-loss waits for a closed admission to open before it gives up (73): each
// time, another loss of data came meanwhile. And how long after the time the server named it tries.
constexpr int k_reopen_rounds = 3;
constexpr Milliseconds k_reopen_margin{50};

// Waits `duration`; throws WaitInterrupted when `fd` becomes readable first (a signal, or the
// --while-pid process exited).
void wait_readable(int fd, Milliseconds duration) {
    pollfd ready{fd, POLLIN, 0};
    const auto until = std::chrono::steady_clock::now() + duration;
    for (auto left = duration; left.count() > 0;
         left = std::chrono::ceil<Milliseconds>(until - std::chrono::steady_clock::now())) {
        const int result = poll(&ready, 1, static_cast<int>(left.count()));
        if (result > 0) {
            throw WaitInterrupted();
        }
        if (result < 0 && errno != EINTR) {
            throw std::system_error(errno, std::generic_category(), "poll");
        }
    }
}

// What a caller refused by a closed admission is told: what redsem knows of the loss, for how
// long nobody is admitted (or this caller, with a --loss-grace of its own), and the way out.
std::string closed_message(const std::string& name, const AdmissionClosed& closed, bool own_grace) {
    if (closed.pause) {
        return pause_text(name, closed.pause->by, closed.pause->age, closed.pause->ends_in) +
               "; nobody new is admitted meanwhile";
    }
    const std::string opens_in = seconds_up(closed.opens_in);
    const std::string who =
        own_grace ? fmt::format("this caller's --loss-grace keeps it out for {} more", opens_in)
                  : fmt::format("nobody is admitted for {} more", opens_in);
    if (closed.cause == "start") {
        return fmt::format(
            "Redis has no record of redsem and started {} ago (INFO server: uptime_in_seconds): "
            "if it restarted without its data, it forgot who held '{}'; {}. Only on a Redis "
            "that holds no leases (a new or throwaway one) may REDSEM_LOSS_GRACE=0 admit this "
            "caller at once: on one in use it lets it in beside a holder Redis forgot (see Lost "
            "data in redsem(1))",
            seconds_ago(closed.lost_ago), printable(name), who);
    }
    if (closed.cause == "unproven") {
        return fmt::format(
            "this Redis process could not show that it has seen redsem's records of '{}' before "
            "(noticed {} ago: it is new, restarted, another server took over, or its scripts "
            "were flushed; INFO, which would tell, is denied to this user or renamed): it may "
            "have forgotten who held it; {}. Only on a Redis that holds no leases (a new or "
            "throwaway one) may REDSEM_LOSS_GRACE=0 admit this caller at once: on one in use it "
            "lets it in beside a holder Redis forgot (see Lost data in redsem(1))",
            printable(name), seconds_ago(closed.lost_ago), who);
    }
    if (closed.cause == "evicted") {
        return fmt::format(
            "Redis may have evicted the keys of '{}' (noticed {} ago: a maxmemory-policy that "
            "evicts any key was in force, or keys were evicted after the settings changed); {}, "
            "until holders whose leases went with them have stopped. Set maxmemory-policy to "
            "noeviction or volatile-lru (see Eviction in redsem(1))",
            printable(name), seconds_ago(closed.lost_ago), who);
    }
    if (closed.cause == "declared") {
        return fmt::format("an operator declared {} ago that Redis may have lost data ('redsem "
                           "lost'); {}, until holders whose leases were lost have stopped",
                           seconds_ago(closed.lost_ago), who);
    }
    return fmt::format("Redis may have lost leases of '{}' (noticed {} ago: it restarted, or "
                       "another server took over); {}, until their holders have stopped "
                       "(see Lost data in redsem(1))",
                       printable(name), seconds_ago(closed.lost_ago), who);
}

} // namespace

// What a caller of `run --once-per` that skipped is told: who claims the occurrence, since
// when, and when the window ends.
std::string skip_message(const std::string& name, const Skip& skip) {
    const HolderMeta& by = skip.by;
    const std::string who =
        fmt::format("{} (pid {}{}{})", terminal_safe(by.host, 64), by.pid,
                    by.user.empty() ? "" : ", user " + terminal_safe(by.user, 64),
                    by.label.empty() ? "" : ", '" + terminal_safe(by.label, 80) + "'");
    const auto when = [](long long ms) { return local_time(ms).substr(0, 19); };
    if (skip.why == "lost") {
        return fmt::format(
            "skipped '{}': Redis may have lost data at {}{}, after this "
            "occurrence's window could have begun, and its claim with it; with "
            "--at-most-once the job does not run again before {}",
            printable(name), when(skip.since_ms),
            skip.cause.empty() ? "" : " (" + std::string(loss_cause_text(skip.cause)) + ")",
            when(skip.until_ms));
    }
    if (skip.why == "lapsed") {
        return fmt::format("skipped '{}': the run on {} at {} left without finishing (its lease "
                           "ran out, or its slot was released for it), and may have done its "
                           "work; with --at-most-once the job does not run again before {}",
                           printable(name), who, when(skip.since_ms), when(skip.until_ms));
    }
    if (skip.why == "attempts") {
        const std::string how = by.exit_status ? fmt::format("failed (exit {})", *by.exit_status)
                                               : std::string("left without finishing");
        return fmt::format("skipped '{}': this occurrence was tried {} time{}, the most "
                           "--attempts allows; the last run, on {} at {}, {}; the next run may "
                           "start at {}",
                           printable(name), by.attempt, by.attempt == 1 ? "" : "s", who,
                           when(skip.since_ms), how, when(skip.until_ms));
    }
    if (skip.done) {
        return fmt::format("skipped '{}': it ran on {} at {} and succeeded; the next run may "
                           "start at {} (--once-per)",
                           printable(name), who, when(skip.since_ms), when(skip.until_ms));
    }
    return fmt::format("skipped '{}': it is running on {} since {} (--once-per; a waiting "
                       "caller would run it if that run fails)",
                       printable(name), who, when(skip.since_ms));
}

ParsedRequest parse_slot_request(const SlotRequest& request, const std::string& default_label,
                                 HolderMeta owner) {
    check_name(request.name);
    ParsedRequest parsed;
    parsed.options.limit = request.limit;
    if (request.slots) {
        if (request.limit && *request.slots > *request.limit) {
            throw UsageError(fmt::format("--slots {} is more than the limit given with -n ({})",
                                         *request.slots, *request.limit));
        }
        parsed.options.slots = *request.slots;
    }
    parsed.options.exclusive = request.exclusive;
    parsed.options.ttl = request.ttl;
    parsed.options.wait = request.wait;
    if (request.through_loss && (!request.wait || request.wait->count() != 0)) {
        throw UsageError("--through-loss goes with -w 0 (a longer wait already waits through a "
                         "closed admission)");
    }
    if ((request.supersede || request.max_waiting) && request.wait && request.wait->count() == 0) {
        throw UsageError(fmt::format("{} is about the queue, and -w 0 never queues",
                                     request.supersede ? "--supersede" : "--max-waiting"));
    }
    parsed.options.supersede = request.supersede;
    parsed.options.max_waiting = request.max_waiting;
    parsed.busy_exit = request.conflict_exit_code.value_or(static_cast<int>(ExitCode::timeout));
    parsed.options.loss_grace = resolve_loss_grace(request.loss_grace);
    parsed.options.replicas = resolve_replicas(request.replicas);
    if (std::getenv("REDSEM_HISTORY") != nullptr) {
        // redsem 0.1.0 stored it with every semaphore a caller used.
        std::cerr << "redsem: warning: $REDSEM_HISTORY is ignored: the history's length is the "
                     "semaphore's setting, set with 'redsem limit NAME --history N'\n";
    }
    owner.label = request.label.value_or(default_label);
    if (!request.label) {
        owner.ci = current_ci_job(); // an explicit --label says all (--label '': nothing)
    }
    if (owner.label.size() > k_max_label_bytes) {
        owner.label.resize(k_max_label_bytes);
    }
    parsed.options.meta = std::move(owner);
    return parsed;
}

std::optional<Lease> wait_for_slot(Connection& connection, const std::string& prefix,
                                   Semaphore& semaphore, const SlotRequest& request,
                                   AcquireOptions options, const SignalWatch& signals,
                                   const WatchedProcess* owner) {
    std::string token = generate_token();
    RecentHolds holds;
    const auto scene = [&] {
        return read_wait_scene(connection, prefix, request.name, token, holds);
    };
    WaitFeedback feedback(request.name, !request.quiet, scene);
    WaitLog log(request.name, !request.quiet && !feedback.enabled(), scene);
    const auto holders = [&] { return holders_of(connection, prefix, request.name); };
    std::optional<AnyReadable> signal_or_exit;
    if (owner != nullptr) {
        signal_or_exit.emplace(std::initializer_list<int>{signals.fd(), owner->fd()});
    }
    options.interrupt_fd = signal_or_exit ? signal_or_exit->fd() : signals.fd();
    options.on_wait = [&](const QueuePosition& position) {
        feedback.update(position);
        log.update(position);
    };
    options.live_position = feedback.enabled();
    // A closed admission is told once while waiting (-w 0 only in the error), whatever -q
    // says: it is not "busy", and the last reply says whether it was why no slot came.
    const bool own_grace = options.loss_grace.has_value();
    const bool try_once = options.wait && options.wait->count() == 0;
    bool told_closed = false;
    AdmissionClosed last_closed;
    options.on_closed = [&](const AdmissionClosed& closed) {
        last_closed = closed;
        if (!closed.closed() || told_closed || try_once) {
            return;
        }
        told_closed = true;
        feedback.clear();
        std::fprintf(stderr, "redsem: %s%s\n",
                     closed_message(request.name, closed, own_grace).c_str(),
                     closed.pause ? "; waiting in the queue" : "");
    };
    std::optional<Lease> lease;
    try {
        lease = semaphore.acquire(options, token);
        // --through-loss: -w 0 skips a busy semaphore, not a closed admission: after a
        // possible loss of data (not a pause) it waits until admission opens, as the server
        // says (at most the loss grace), then tries once more. So a cron job on a Redis
        // restarted just before runs.
        for (int round = 0; !lease && request.through_loss && last_closed.closed() &&
                            !last_closed.pause && round < k_reopen_rounds;
             ++round) {
            // Also with -q: the cron form waits up to the loss grace, which is not "busy".
            if (round == 0) {
                std::fprintf(stderr,
                             "redsem: %s; waiting for that (--through-loss), then trying "
                             "once\n",
                             closed_message(request.name, last_closed, own_grace).c_str());
            }
            wait_readable(options.interrupt_fd, last_closed.opens_in + k_reopen_margin);
            last_closed = AdmissionClosed{};
            token = generate_token();
            lease = semaphore.acquire(options, token);
        }
    } catch (const Skipped& skipped) {
        feedback.clear();
        if (skipped.skip().why == k_superseded_why) {
            const std::string message = superseded_message(request.name, skipped.skip().by);
            if (!request.quiet) {
                std::fprintf(stderr, "redsem: %s\n", message.c_str());
            }
            throw Superseded(message, true);
        }
        // A skip because a run's outcome is unknown (--at-most-once) is said also with -q:
        // somebody should find out whether the job ran.
        const bool unknown = skipped.skip().why == "lost" || skipped.skip().why == "lapsed";
        if (!request.quiet || unknown) {
            std::fprintf(stderr, "redsem: %s\n",
                         skip_message(request.name, skipped.skip()).c_str());
        }
        throw;
    } catch (const QueueFull& full) {
        feedback.clear();
        if (!request.quiet) {
            std::fprintf(stderr, "redsem: %s\n", full.what());
        }
        throw QueueFull(full.what(), true);
    } catch (const WaitInterrupted&) {
        if (signals.received() == 0 && owner != nullptr) {
            feedback.clear();
            throw UsageError(fmt::format("the --while-pid process {} exited while waiting for a "
                                         "slot of '{}'; nothing is held",
                                         owner->pid(), printable(request.name)));
        }
        feedback.clear();
        say_left(request, signals.received());
        throw Interrupted(signals.received());
    }
    if (signals.received() != 0) {
        // The signal came while the last script ran: nobody will use the slot; give it back.
        if (lease) {
            semaphore.release_quietly(lease->token);
        }
        feedback.clear();
        say_left(request, signals.received());
        throw Interrupted(signals.received());
    }
    feedback.clear(); // before any message
    if (!lease && last_closed.closed()) {
        if (try_once) {
            throw ClosedError(closed_message(request.name, last_closed, own_grace));
        }
        const std::string waited = format_duration(options.wait.value_or(Milliseconds{0}));
        if (last_closed.pause) {
            throw ClosedError(fmt::format("gave up on '{}' after {}: {}", printable(request.name),
                                          waited,
                                          closed_message(request.name, last_closed, own_grace)));
        }
        throw ClosedError(fmt::format("gave up on '{}' after {}: admission is still closed for "
                                      "{} more",
                                      printable(request.name), waited,
                                      seconds_up(last_closed.opens_in)));
    }
    if (!lease && !request.quiet) {
        std::fprintf(stderr, "redsem: no slot of '%s' free %s%s\n", printable(request.name).c_str(),
                     options.wait && options.wait->count() > 0
                         ? ("within " + format_duration(*options.wait)).c_str()
                         : "now",
                     holders().c_str());
    }
    return lease;
}

} // namespace redsem::cli

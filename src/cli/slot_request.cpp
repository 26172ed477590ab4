#include "cli/slot_request.hpp"

#include "process/any_readable.hpp"

#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

namespace redsem::cli {

namespace {

using Clock = std::chrono::steady_clock;

// One status line on a terminal, rewritten in place while waiting.
class WaitFeedback {
public:
    WaitFeedback(std::string name, bool enabled)
        : m_name(std::move(name)), m_enabled(enabled && isatty(STDERR_FILENO) != 0),
          m_started(Clock::now()) {}
    ~WaitFeedback() { clear(); }
    WaitFeedback(const WaitFeedback&) = delete;
    WaitFeedback& operator=(const WaitFeedback&) = delete;

    // Shown at all (stderr is a terminal, and not --quiet).
    bool enabled() const noexcept { return m_enabled; }

    void update(const QueuePosition& position) {
        if (!m_enabled || Clock::now() - m_started < std::chrono::seconds(1)) {
            return;
        }
        // Numbered as `status` numbers the queue: 1 is next.
        std::fprintf(stderr,
                     "\rredsem: waiting for '%s': number %lld of %lld in the queue, %lld/%lld "
                     "held\033[K",
                     printable(m_name).c_str(), position.ahead + 1, position.queued, position.held,
                     position.limit);
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
    bool m_shown = false;
    Clock::time_point m_started;
};

} // namespace

void add_slot_options(CLI::App& command, SlotRequest& request) {
    command.add_option("NAME", request.name, "Semaphore name")->required();
    command
        .add_option("-n,--limit", request.limit,
                    "How many may hold NAME at once (1-100000; default: the limit NAME has, 1 "
                    "for a new semaphore). A busy semaphore refuses another: see 'redsem limit'")
        ->type_name("N");
    command.add_option("--ttl", request.ttl, "Lease length; renew before it runs out")
        ->type_name("DUR")
        ->capture_default_str();
    command
        .add_option("-w,--wait", request.wait,
                    "Give up after DUR without a slot (0: try once; default: wait for ever)")
        ->type_name("DUR");
    command
        .add_option("-E,--conflict-exit-code", request.conflict_exit_code,
                    fmt::format("Exit status when no slot was had in time (default {})",
                                static_cast<int>(ExitCode::timeout)))
        ->type_name("CODE");
    command.add_option("--label", request.label, "Text shown beside this holder in status")
        ->type_name("TEXT");
    command
        .add_option("--loss-grace", request.loss_grace,
                    fmt::format("After Redis may have lost data (restart, flush, fail-over), "
                                "admit nobody new to NAME for DUR; stored with NAME (default: "
                                "the longer of the ttl and {})",
                                format_duration(k_default_loss_grace)))
        ->type_name("DUR");
    command.add_option("--replicas", request.replicas, k_replicas_help)->type_name("N");
    command.add_option("--history", request.history, k_history_help)->type_name("N");
    command.add_flag("-q,--quiet", request.quiet,
                     "Show no queue position while waiting, and no notice when no slot came");
}

ParsedRequest parse_slot_request(const SlotRequest& request, const std::string& default_label,
                                 HolderMeta owner) {
    check_name(request.name);
    ParsedRequest parsed;
    if (request.limit) {
        parsed.options.limit = parse_limit(*request.limit, "--limit");
    }
    parsed.options.ttl = parse_ttl(request.ttl, "--ttl");
    if (request.wait) {
        parsed.options.wait = parse_duration(*request.wait, "--wait");
    }
    parsed.busy_exit = request.conflict_exit_code
                           ? parse_exit_code(*request.conflict_exit_code, "--conflict-exit-code")
                           : static_cast<int>(ExitCode::timeout);
    parsed.options.loss_grace = resolve_loss_grace(request.loss_grace);
    parsed.options.replicas = resolve_replicas(request.replicas);
    parsed.options.history = resolve_history(request.history);
    owner.label = request.label.value_or(default_label);
    if (owner.label.size() > k_max_label_bytes) {
        owner.label.resize(k_max_label_bytes);
    }
    parsed.options.meta = std::move(owner);
    return parsed;
}

std::optional<Lease> wait_for_slot(Semaphore& semaphore, const SlotRequest& request,
                                   AcquireOptions options, const SignalWatch& signals,
                                   const WatchedProcess* owner) {
    WaitFeedback feedback(request.name, !request.quiet);
    std::optional<AnyReadable> signal_or_exit;
    if (owner != nullptr) {
        signal_or_exit.emplace(std::initializer_list<int>{signals.fd(), owner->fd()});
    }
    options.interrupt_fd = signal_or_exit ? signal_or_exit->fd() : signals.fd();
    options.on_wait = [&feedback](const QueuePosition& position) { feedback.update(position); };
    options.live_position = feedback.enabled();
    bool told_closed = false;
    options.on_closed = [&](const AdmissionClosed& closed) {
        if (request.quiet || told_closed) {
            return;
        }
        told_closed = true;
        feedback.clear();
        std::fprintf(stderr,
                     "redsem: Redis may have lost leases of '%s' (it restarted, was flushed, or is "
                     "another server); nobody is admitted for %s more, until they have run out "
                     "(--loss-grace)\n",
                     printable(request.name).c_str(), format_duration(closed.opens_in).c_str());
    };
    std::optional<Lease> lease;
    try {
        lease = semaphore.acquire(options, generate_token());
    } catch (const WaitInterrupted&) {
        if (signals.received() == 0 && owner != nullptr) {
            feedback.clear();
            throw UsageError(fmt::format("the --while-pid process {} exited while waiting for a "
                                         "slot of '{}'; nothing is held",
                                         owner->pid(), printable(request.name)));
        }
        throw Interrupted(signals.received());
    }
    if (signals.received() != 0) {
        // The signal came while the last script ran: nobody will use the slot; give it back.
        if (lease) {
            semaphore.release_quietly(lease->token);
        }
        throw Interrupted(signals.received());
    }
    feedback.clear(); // before any message
    if (!lease && !request.quiet) {
        std::fprintf(stderr, "redsem: no slot of '%s' free %s\n", printable(request.name).c_str(),
                     options.wait && options.wait->count() > 0
                         ? ("within " + format_duration(*options.wait)).c_str()
                         : "now");
    }
    return lease;
}

} // namespace redsem::cli

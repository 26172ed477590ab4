#include "semaphore/semaphore.hpp"

#include "lua_scripts.hpp"
#include "redis/retry_policy.hpp"
#include "redis/topology.hpp"
#include "semaphore/epoch_proof.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/protocol.hpp"
#include "semaphore/record.hpp"
#include "semaphore/wire.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <random>
#include <thread>
#include <unistd.h>
#include <variant>

namespace redsem {

using wire::ConflictReply;
using wire::QueuedReply;

namespace {

using Clock = std::chrono::steady_clock; // waits; leases use BootClock

// How often in a row a call may be told to prove another epoch marker (see Semaphore::run())
// before it gives up: each time, another client found a possible loss in between.
constexpr int k_proof_rounds = 8;

// A script's reply, once it is neither an error (thrown) nor a refusal to touch a key of
// another type (thrown as a conflict).
Reply checked_reply(const Script& script, Reply reply, const std::string& name) {
    if (reply.is_error()) {
        throw_script_error(script, reply.text);
    }
    check_readable(reply, name, "nothing was changed (delete the key, or choose another --prefix)");
    return reply;
}

// What Semaphore::run() answers a read it cannot prove (see Semaphore::admission()).
Reply unproven_reply() {
    Reply unproven;
    unproven.type = Reply::Type::error;
    unproven.text = "NOSCRIPT the server cannot prove it has seen the epoch";
    return unproven;
}

// Sleeps up to `duration`, returning early (true) when `interrupt_fd` becomes readable.
bool interruptible_sleep(Milliseconds duration, int interrupt_fd) {
    if (interrupt_fd < 0) {
        std::this_thread::sleep_for(duration);
        return false;
    }
    pollfd fd{interrupt_fd, POLLIN, 0};
    return poll(&fd, 1, static_cast<int>(duration.count())) > 0;
}

// How an acquire rides out failures: RetryPolicy's answer, for up to the connection's outage
// window of unbroken failure (a holder gets its lease back, a waiter its place, with the same
// token), and never past the acquire's own wait: -w bounds the whole command, so Redis
// unreachable at its end is an outage (69), not "busy". The window is read at each failure:
// it grows once the connection finds out that it talks to a Redis Cluster. A sleep between
// tries that overran (this process was stopped) does not count against the window: a waiter
// stopped through the end of a restart retries on waking instead of giving up at once.
class AcquireRetries {
public:
    AcquireRetries(int interrupt_fd, const Connection& connection,
                   std::optional<BootClock::time_point> give_up_at)
        : m_interrupt_fd(interrupt_fd), m_connection(connection) {
        m_policy.set_deadline(give_up_at);
    }

    void answered() { m_policy.answered(); }

    // Called from a catch block: returns after the policy's delay when `error` is worth
    // retrying, else rethrows it. Throws WaitInterrupted when the interrupt fd fires first.
    void after(const Error& error) {
        m_policy.set_window(m_connection.outage_window());
        const std::optional<Milliseconds> delay = m_policy.after(error);
        if (!delay) {
            throw;
        }
        const auto slept_from = BootClock::now();
        if (interruptible_sleep(*delay, m_interrupt_fd)) {
            throw WaitInterrupted();
        }
        m_policy.not_running(BootClock::now() - slept_from - *delay);
    }

private:
    int m_interrupt_fd;
    const Connection& m_connection;
    RetryPolicy m_policy;
};

// How long a queued waiter sleeps on its wake list: until a release hands it a slot, or (near
// the head) a lease may run out (its holder may have died) or admission opens, or it must
// refresh its place (later the further back it is), or the caller's wait ends.
Milliseconds wake_timeout(const QueuedReply& queued, bool live_position,
                          Clock::time_point give_up_at) {
    Milliseconds timeout = k_waiter_refresh;
    if (!live_position && queued.refresh_extra.count() > 0) {
        // Up to a tenth earlier, at random: waiters that queued together (and so would
        // refresh together, rarely) spread out instead of calling Redis all at once.
        thread_local std::minstd_rand random{std::random_device{}()};
        const long long extra = queued.refresh_extra.count();
        std::uniform_int_distribution<long long> earlier(0, extra / 10);
        timeout += Milliseconds{extra - earlier(random)};
    }
    if (queued.next_expiry_in_ms >= 0) {
        timeout = std::min(timeout, Milliseconds{queued.next_expiry_in_ms + 1});
    }
    if (give_up_at != Clock::time_point::max()) {
        timeout = std::min(timeout, std::chrono::ceil<Milliseconds>(give_up_at - Clock::now()));
    }
    return timeout;
}

} // namespace

std::string HolderMeta::to_json() const {
    // Compact, keys sorted; for people only: what the scripts act on is sent as arguments of
    // its own, and lua/acquire.lua adds it to the record it stores.
    nlohmann::json json{
        {"host", host}, {"pid", pid}, {"pid_of", pid_of}, {"user", user}, {"label", label}};
    if (ci) {
        json["ci"] = {
            {"system", ci->system}, {"url", ci->url}, {"pipeline", ci->pipeline}, {"job", ci->job}};
    }
    // Labels are arbitrary bytes; invalid UTF-8 is replaced rather than refused.
    return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string LeaseLoss::describe(long long granted_ms) const {
    if (lost_at_ms > granted_ms) {
        if (cause == "start") {
            return "Redis no longer has redsem's records (it restarted without its data, or was "
                   "flushed, since the grant)";
        }
        if (cause == "change") {
            return "Redis restarted or another server took over since the grant (a failover)";
        }
        if (cause == "evicted") {
            return "Redis may have evicted redsem's keys since the grant";
        }
        if (cause == "declared") {
            return "an operator declared a possible loss of data since the grant (redsem lost)";
        }
        return "Redis could not show it kept redsem's records since the grant (a restart?)";
    }
    if (why == "expired") {
        return "its lease ran out by the server's clock before this renewal (redsem was stopped "
               "or starved, or could not reach Redis in time)";
    }
    if (why == "gone") {
        return "the semaphore's keys are gone from Redis (restarted without its data, another "
               "server without them, or deleted)";
    }
    return "the server says this token no longer holds a slot (given back by 'redsem release', "
           "or its lease ran out and was removed)";
}

Semaphore::Semaphore(Connection& connection, std::string_view prefix, std::string_view name)
    : m_connection(connection), m_name(name), m_keys(Keys::make(prefix, name)) {}

Reply Semaphore::run(const Script& script, const std::vector<std::string>& args, Proof proof) {
    // Without INFO: in one transaction, the marker script of the marker the epoch key holds,
    // by EVALSHA, then the script, told the marker and the proof's nonce. Where the server
    // lacks the marker script, a fresh marker's, by EVAL, and the script told to declare it:
    // a possible loss, and the epoch's marker from then on. A reply {"prove", MARKER} names
    // the marker in force.
    std::string fresh;
    for (int round = 0;; ++round) {
        const bool proves = proof != Proof::none && m_epoch_marker;
        if (proves && fresh.empty() && m_epoch_marker->empty()) {
            if (proof == Proof::reads) {
                return unproven_reply(); // declaring a loss is not a reader's to do
            }
            fresh = new_epoch_marker();
        }
        const bool declares = !fresh.empty();
        Reply reply;
        if (!proves) {
            reply = std::move(m_connection
                                  .eval_pipeline({ScriptCall{script, m_keys.script_keys(),
                                                             m_keys.script_args(args),
                                                             m_keys.cluster_script_keys()}})
                                  .front());
        } else {
            const std::string& expected = *m_epoch_marker;
            const std::string nonce = new_epoch_marker();
            const ScriptCall marker_call{epoch_marker_script(declares ? fresh : expected),
                                         {m_keys.epoch},
                                         {nonce},
                                         {m_keys.own_epoch},
                                         declares ? ScriptCall::Send::body_only
                                                  : ScriptCall::Send::sha_only};
            // A function registered no-writes could not remove the proof: its text goes.
            const Script by_text{script.name, script.sha1, script.body};
            const ScriptCall call{
                script.no_writes ? by_text : script, m_keys.script_keys(),
                m_keys.script_args(args, fmt::format("{} {} {}", expected.empty() ? "-" : expected,
                                                     nonce, declares ? fresh : "-")),
                m_keys.cluster_script_keys()};
            std::vector<Reply> replies = m_connection.eval_atomically({marker_call, call});
            if (is_error_code(replies[0], "NOSCRIPT") && !declares) {
                // This process never checked the epoch: a restart, another server, SCRIPT
                // FLUSH.
                if (proof == Proof::reads) {
                    return unproven_reply();
                }
                fresh = new_epoch_marker();
                continue;
            }
            if (replies[0].is_error()) {
                throw_script_error(marker_call.script, replies[0].text);
            }
            reply = std::move(replies[1]);
        }
        std::optional<std::string> demanded = wire::demanded_proof(reply);
        if (!demanded) {
            if (declares) {
                m_epoch_marker = fresh; // the script wrote it (see demand_proof())
            }
            if (reply.is_error() && reply.text.find("WRONGTYPE") != std::string::npos) {
                throw_foreign_key(m_connection, m_keys, m_name,
                                  "delete it, or choose another --prefix");
            }
            return checked_reply(script, std::move(reply), m_name);
        }
        if (round == k_proof_rounds) {
            throw InternalError(fmt::format(
                "the epoch marker of '{}' changed at each of {} calls in a row (clients "
                "without INFO keep finding a possible loss of data)",
                printable(m_name), k_proof_rounds + 1));
        }
        m_epoch_marker = std::move(*demanded);
        fresh.clear();
    }
}

Reply Semaphore::attempt(const AcquireOptions& options, const std::string& token, bool queue,
                         bool known, std::optional<long long> first_answer_ms) {
    return run(scripts::k_acquire_script,
               wire::acquire_args({.token = token,
                                   .limit = options.limit,
                                   .ttl = options.ttl,
                                   .queue = queue,
                                   .liveness = k_waiter_liveness,
                                   .meta_json = options.meta.to_json(),
                                   .known = known,
                                   .loss_grace = options.loss_grace,
                                   .slots = options.slots,
                                   .exclusive = options.exclusive,
                                   .first_answer_ms = first_answer_ms,
                                   .once_per = options.once_per,
                                   .keeper = options.keeper,
                                   .max_hold = options.max_hold,
                                   .collects = true,
                                   .supersede = options.supersede,
                                   .max_waiting = options.max_waiting}),
               Proof::admits);
}

std::optional<Lease> Semaphore::wait_for_hand_over(const AcquireOptions& options,
                                                   const std::string& token, Milliseconds timeout,
                                                   BootClock::time_point asked_at,
                                                   const QueuedReply& queued) {
    const std::string wake_list = m_keys.wake(token);
    const std::string nudge_list = m_keys.nudge(token);
    const std::string left_list = m_keys.left(token);
    const std::string too_large_list = m_keys.too_large(token);
    auto wake_by = Clock::now() + std::max(timeout, Milliseconds{1});
    Reply reply;
    for (;;) {
        const auto left =
            std::max(std::chrono::ceil<Milliseconds>(wake_by - Clock::now()), Milliseconds{1});
        const std::string seconds =
            fmt::format("{:.3f}", static_cast<double>(left.count()) / 1000.0);
        // The wake list first: when both have something, the grant is what counts.
        reply = m_connection.command(
            Command{wake_list,
                    {"BLPOP", wake_list, nudge_list, left_list, too_large_list, seconds}},
            left, options.interrupt_fd);
        if (reply.is_error()) {
            throw_reply_error(reply.text);
        }
        if (reply.is_nil()) {
            return std::nullopt;
        }
        if (reply.at(0).as_string() == left_list) {
            if (auto skip = wire::decode_left_note(reply.at(1).as_string())) {
                skip->server_now_ms = queued.server_now_ms;
                throw Skipped(std::move(*skip));
            }
            throw_place_released(token);
        }
        if (reply.at(0).as_string() == too_large_list) {
            throw_too_large(options, wire::decode_too_large(reply.at(1).as_string()));
        }
        if (reply.at(0).as_string() != nudge_list) {
            break;
        }
        // Moved up near the head (nudge_near_head_entrant() in lua/lib/queue.lua): look again when
        // a lease may run out, and as often as the head does.
        Milliseconds look_in = k_waiter_refresh;
        if (const std::optional<Milliseconds> due_in =
                wire::decode_nudge(reply.at(1).as_string())) {
            look_in = std::min(look_in, *due_in + Milliseconds{1});
        }
        wake_by = std::min(wake_by, Clock::now() + look_in);
    }
    // The BLPOP took the grant into this socket, as it would have into the socket of a process
    // that died or was stopped meanwhile: the slot is this waiter's once it removed its claim
    // deadline (k_collects_field), before prune() took the slot back. When that is gone, the
    // acquire that follows tells whether the slot is held all the same (a release before
    // k_collects_field took the BLPOP for the collection) or is lost.
    const Reply claim = m_connection.command(Command{m_keys.alive, {"ZREM", m_keys.alive, token}},
                                             Milliseconds{0}, options.interrupt_fd);
    if (claim.is_error()) {
        throw_reply_error(claim.text);
    }
    if (claim.as_integer() != 1) {
        return std::nullopt;
    }
    // The grant came after the acquire that queued or refreshed this waiter, and may have sat
    // in the list (or in this socket, while the process was stopped) a while: time the lease
    // from that acquire, whose script read the server clock after `asked_at`.
    const wire::HandOver grant = wire::decode_hand_over(reply.at(1).as_string());
    return Lease{.token = token,
                 .fence = grant.fence,
                 .slot = grant.slot,
                 .slots = grant.slots,
                 .limit = grant.limit.value_or(queued.position.limit),
                 .ttl = options.ttl,
                 .deadline_ms = grant.deadline_ms,
                 .server_now_ms = queued.server_now_ms,
                 .waited = true,
                 .handed_over = true,
                 .local_start = asked_at};
}

bool Semaphore::confirm(Lease& lease) {
    // A lease is acted on with its whole ttl ahead, less at most a safety margin. A grant
    // that lost more before this process could act on it (stopped or starved after it was
    // made, or a hand-over collected late) is renewed first: a script given a token with a
    // fraction of its lease left would overrun it. One that may have run out entirely may
    // have been handed on, and only the server can say.
    if (lease.ends_by() - BootClock::now() >= lease.ttl - Lease::safety_margin(lease.ttl)) {
        return true;
    }
    const auto sent = BootClock::now();
    std::optional<Renewal> renewal;
    try {
        renewal = renew(lease.token, lease.ttl);
    } catch (const NotHeldError&) {
        // Queued here, not holding: a Redis that lost the grant (restarted, or failed back to
        // a replica that never had it) but kept the queue entry. Nothing is held: keep the
        // place and wait again.
        return false;
    }
    if (!renewal) {
        return false;
    }
    lease.deadline_ms = renewal->deadline_ms;
    lease.server_now_ms = renewal->server_now_ms;
    lease.local_start = sent;
    return true;
}

std::optional<Lease> Semaphore::acquire(const AcquireOptions& options, const std::string& token) {
    std::optional<Lease> lease = acquire_unreplicated(options, token);
    if (!lease || options.replicas == 0) {
        return lease;
    }
    // The grant may have been written by another client (a release handing the slot over):
    // renew it from here, so that WAIT covers it, and act on the lease only once replicas
    // have it (a failover to one of them keeps it).
    AcquireOptions again = options;
    again.retry = true; // the server knows the token: a waiter keeps its place
    std::optional<Renewal> renewal;
    const auto sent = BootClock::now();
    try {
        renewal = renew(token, lease->ttl, options.replicas);
    } catch (const NotReplicatedError& error) {
        // Given back where it was granted: a former master keeps it to itself, and at the new
        // master a waiter keeps its place.
        try {
            release_here(token);
        } catch (const Error&) {
        }
        if (m_connection.primary_changed()) {
            // Granted by a former master, which lost its replicas to a failover and takes
            // writes until the sentinels make it a replica: queue at the new one.
            return acquire(again, token);
        }
        throw NotReplicatedError(fmt::format("{}; the slot was given back", error.what()));
    } catch (const NotHeldError&) {
        // The token is queued here, not holding: a new master after a failover, which had
        // the queue entry and not the grant. Not granted here: keep the place, wait again.
        return acquire(again, token);
    } catch (const Error&) {
        release_quietly(token);
        throw;
    }
    if (!renewal) {
        // Lost between the grant and the renewal (this process was stopped that long, or a
        // former master granted it): take a slot again.
        return acquire(again, token);
    }
    lease->deadline_ms = renewal->deadline_ms;
    lease->server_now_ms = renewal->server_now_ms;
    lease->local_start = sent;
    return lease;
}

std::optional<Lease> Semaphore::acquire_unreplicated(const AcquireOptions& options,
                                                     const std::string& token) {
    const bool try_once = options.wait && options.wait->count() == 0;
    const auto give_up_at = options.wait ? Clock::now() + *options.wait : Clock::time_point::max();
    bool sent = options.retry; // once sent, the server may know the token (holder or waiter)
    bool waited = false;
    std::optional<long long> first_answer_ms; // (see wire::AcquireArgs)
    // A bounded wait bounds how long an outage (a failover, a cluster's pause) is ridden out
    // too: after it, one last try, whose connect is bounded by the connect timeout.
    std::optional<BootClock::time_point> retry_until;
    if (options.wait) {
        retry_until = BootClock::now() + *options.wait;
    }
    const Connection::RetriesUntil bounded(m_connection, retry_until);
    AcquireRetries retries(options.interrupt_fd, m_connection, retry_until);
    try {
        for (;;) {
            wire::AcquireReply reply;
            const auto asked_at = BootClock::now();
            try {
                reply =
                    wire::decode_acquire(attempt(options, token, !try_once, sent, first_answer_ms));
                sent = true;
                retries.answered();
                if (const auto* granted = std::get_if<wire::Granted>(&reply)) {
                    Lease lease{.token = token,
                                .fence = granted->fence,
                                .slot = granted->slot,
                                .slots = granted->slots,
                                .limit = granted->limit,
                                .ttl = options.ttl,
                                .deadline_ms = granted->deadline_ms,
                                .server_now_ms = granted->server_now_ms,
                                .waited = waited,
                                .local_start = asked_at};
                    if (confirm(lease)) {
                        return lease;
                    }
                    continue; // it ran out while this process was stopped: queue again
                }
            } catch (const Error& error) {
                sent = sent || error.transience() == Transience::broken; // it may have run
                retries.after(error);
                continue;
            }
            if (const auto* busy = std::get_if<wire::Busy>(&reply)) {
                report_closed(options, busy->closed);
                return std::nullopt;
            }
            if (const auto* conflict = std::get_if<ConflictReply>(&reply)) {
                throw_conflict(*conflict, options.limit);
            }
            if (std::holds_alternative<wire::Left>(reply)) {
                // Its note says why; a once-per skip's was judged by the script already.
                const std::optional<Skip> note = read_left_note(token);
                if (note && note->why == k_superseded_why) {
                    throw Skipped(*note);
                }
                throw_place_released(token);
            }
            if (const auto* full = std::get_if<wire::Full>(&reply)) {
                throw QueueFull(fmt::format("the queue of '{}' is full: {} waiting, and "
                                            "--max-waiting {} lets no more in; nothing is held",
                                            printable(m_name), full->queued, full->max_waiting));
            }
            if (const auto* too_large = std::get_if<wire::TooLarge>(&reply)) {
                throw_too_large(options, too_large->limit);
            }
            if (const auto* skip = std::get_if<Skip>(&reply)) {
                throw Skipped(*skip); // nothing held nor queued: the script saw to it
            }
            const QueuedReply& queued = std::get<QueuedReply>(reply);
            waited = true;
            if (!first_answer_ms) {
                first_answer_ms = queued.server_now_ms;
            }
            report_closed(options, queued.closed);
            if (Clock::now() >= give_up_at) {
                // Leaves the queue, or gives back a slot handed over since the last reply.
                release(token);
                return std::nullopt;
            }
            if (options.on_wait) {
                options.on_wait(queued.position);
            }
            try {
                if (auto lease = wait_for_hand_over(
                        options, token, wake_timeout(queued, options.live_position, give_up_at),
                        asked_at, queued)) {
                    if (confirm(*lease)) {
                        return lease;
                    }
                }
            } catch (const Error& error) {
                retries.after(error);
            }
        }
    } catch (const PlaceReleased&) {
        throw; // nothing is held, and the queue has no place left to leave
    } catch (const QueueFull&) {
        throw; // it never queued
    } catch (const WaitInterrupted&) {
        // Leave the queue (or give back a slot handed over in a reply we did not read) before
        // reporting the interruption; a failure here is covered by the waiter's liveness.
        release_quietly(token);
        throw;
    } catch (const Error&) {
        if (sent) {
            release_quietly(token);
        }
        throw;
    }
}

void Semaphore::report_closed(const AcquireOptions& options, const AdmissionClosed& closed) const {
    if (options.on_closed) {
        options.on_closed(closed);
    }
}

void Semaphore::throw_conflict(const ConflictReply& conflict,
                               std::optional<long long> wanted_limit) const {
    if (conflict.stored_limit == -1) {
        throw ConflictError(
            fmt::format("the stored limit of '{}' is not a number (key '{}' was changed by hand); "
                        "run 'redsem gc {}' once its leases ran out, or delete that key",
                        m_name, m_keys.state, m_name));
    }
    if (conflict.stored_limit < 0) {
        throw ConflictError(
            fmt::format("'{}' has holders but its state key '{}' is gone (deleted, or evicted: "
                        "use maxmemory-policy noeviction); it admits nobody new until its "
                        "leases run out and 'redsem gc {}' cleans it",
                        m_name, m_keys.state, m_name));
    }
    throw ConflictError(fmt::format(
        "'{}' has limit {} with {} holding and {} waiting, not {}; leave out -n to use the "
        "stored limit, or change it for everyone with 'redsem limit {} {}'",
        m_name, conflict.stored_limit, conflict.held, conflict.queued, wanted_limit.value_or(1),
        m_name, wanted_limit.value_or(1)));
}

void Semaphore::throw_too_large(const AcquireOptions& options, long long limit) const {
    throw ConflictError(fmt::format("'{}' has limit {}, fewer than the {} slots asked for "
                                    "(--slots); nothing is held (raise it with 'redsem limit "
                                    "{} {}', or ask for fewer)",
                                    printable(m_name), limit, options.slots, printable(m_name),
                                    options.slots));
}

std::optional<Skip> Semaphore::read_left_note(const std::string& token) {
    const std::string list = m_keys.left(token);
    const Reply note = m_connection.command(Command{list, {"BLPOP", list, "0.001"}});
    if (note.is_error()) {
        throw_reply_error(note.text);
    }
    return note.is_nil() ? std::nullopt : wire::decode_left_note(note.at(1).as_string());
}

void Semaphore::throw_place_released(const std::string& token) const {
    throw PlaceReleased(fmt::format("this waiter's place in the queue of '{}' (token {}) was "
                                    "released by 'redsem release'; no slot was taken",
                                    printable(m_name), token.substr(0, 8)));
}

void Semaphore::release_quietly(const std::string& token) noexcept {
    try {
        release(token);
    } catch (const std::exception&) {
    }
}

ReleaseOutcome Semaphore::release(const std::string& token, Releaser by,
                                  const std::optional<CommandEnd>& end, bool once) {
    // Through sentinels, not to a former master that still takes writes after a failover
    // (unless a sentinel named it just now: a quick `run` pays no extra round trip).
    m_connection.primary_changed(k_release_recheck);
    return release_here(token, by, end, once);
}

ReleaseOutcome Semaphore::release_here(const std::string& token, Releaser by,
                                       const std::optional<CommandEnd>& end, bool once) {
    return wire::decode_release(run(scripts::k_release_script,
                                    wire::release_args(token, by == Releaser::owner, end, once),
                                    Proof::admits));
}

std::optional<Renewal> Semaphore::renew(const std::string& token, std::optional<Milliseconds> ttl,
                                        long long replicas, bool claimed, LeaseLoss* loss) {
    const wire::RenewReply reply = wire::decode_renew(
        run(scripts::k_renew_script, wire::renew_args(token, ttl, replicas > 0, claimed)));
    if (std::holds_alternative<wire::StillQueued>(reply)) {
        throw NotHeldError(fmt::format("that token is waiting for a slot of '{}', not holding one; "
                                       "nothing was renewed",
                                       printable(m_name)));
    }
    const auto* renewed = std::get_if<Renewal>(&reply);
    if (renewed == nullptr) {
        if (loss != nullptr) {
            *loss = std::get<wire::Lost>(reply).loss;
        }
        return std::nullopt;
    }
    const Renewal renewal = *renewed;
    if (replicas > 0) {
        const Milliseconds wait = replica_wait(renewal.ttl);
        const long long confirmed = m_connection.wait_for_replicas(replicas, wait);
        if (confirmed < replicas) {
            throw NotReplicatedError(fmt::format(
                "only {} of {} replica{} of {} confirmed the lease on '{}' within {} (--replicas)",
                confirmed, replicas, replicas == 1 ? "" : "s", m_connection.server(),
                printable(m_name), format_duration(wait)));
        }
    }
    return renewal;
}

Milliseconds Semaphore::replica_wait(Milliseconds ttl) const {
    return std::clamp(ttl / 4, Milliseconds{1}, m_connection.options().command_timeout);
}

LimitInfo Semaphore::limit(std::optional<long long> new_limit, std::optional<long long> history) {
    return wire::decode_limit(run(scripts::k_limit_script, wire::limit_args(new_limit, history),
                                  new_limit ? Proof::admits : Proof::none));
}

LimitInfo Semaphore::unset_limit() {
    return wire::decode_limit(run(scripts::k_limit_script, wire::unset_limit_args(), Proof::none));
}

AdmissionState Semaphore::admission() {
    const Reply reply = run(scripts::k_view_script, wire::admission_args(), Proof::reads);
    if (is_error_code(reply, "NOSCRIPT")) {
        // Without INFO, the server could not prove that it has seen the epoch: the next call
        // that may admit records a possible loss (see lua/lib/epoch.lua), from its own time.
        const long long now = server_time_ms(m_connection, m_keys.state);
        return AdmissionState{.opens_at_ms = now + k_default_loss_grace.count(),
                              .cause = "unproven",
                              .lost_at_ms = now,
                              .noticed = false,
                              .server_now_ms = now};
    }
    const wire::View view = wire::decode_view(reply);
    if (!view.admission) {
        throw InternalError("view.lua answered without admission");
    }
    return *view.admission;
}

PauseInfo Semaphore::pause_call(wire::PauseAction action, const HolderMeta* by,
                                std::optional<Milliseconds> duration) {
    const std::optional<PauseInfo> info = wire::decode_pause(
        run(scripts::k_pause_script,
            wire::pause_args(action, by != nullptr ? by->to_json() : "{}", duration),
            action == wire::PauseAction::resume ? Proof::admits : Proof::none));
    if (!info) {
        throw ConflictError(fmt::format("the stored limit of '{}' is not one this redsem reads "
                                        "(key '{}' was changed by hand, or by a newer redsem); "
                                        "nothing was changed",
                                        printable(m_name), m_keys.state));
    }
    return *info;
}

PauseInfo Semaphore::pause(const HolderMeta& by, std::optional<Milliseconds> duration) {
    return pause_call(wire::PauseAction::pause, &by, duration);
}

PauseInfo Semaphore::resume(const HolderMeta& by) {
    return pause_call(wire::PauseAction::resume, &by, std::nullopt);
}

PauseInfo Semaphore::look_at_pause() {
    return pause_call(wire::PauseAction::look, nullptr, std::nullopt);
}

LossDeclared Semaphore::declare_loss() {
    const Reply reply = run(scripts::k_lost_script, wire::lost_args());
    check_readable(reply, m_name, "no loss was declared");
    return wire::decode_lost(reply);
}

bool Semaphore::wait_for_departure(Milliseconds timeout, int interrupt_fd) {
    const std::string list = m_keys.drained();
    const Reply reply = m_connection.command(
        Command{
            list,
            {"BLPOP", list,
             fmt::format("{:.3f}", static_cast<double>(std::max(timeout, Milliseconds{1}).count()) /
                                       1000.0)}},
        timeout, interrupt_fd);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return !reply.is_nil();
}

Milliseconds Lease::safety_margin(Milliseconds ttl) {
    return std::min(ttl / 4, Milliseconds{2000});
}

BootClock::time_point Lease::ends_by() const {
    return local_start + Milliseconds{std::max(0LL, deadline_ms - server_now_ms)};
}

} // namespace redsem

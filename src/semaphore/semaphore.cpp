#include "semaphore/semaphore.hpp"

#include "lua_scripts.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <pwd.h>
#include <thread>
#include <unistd.h>

namespace redsem {

namespace {

using Clock = std::chrono::steady_clock;

std::string this_user() {
    // getpwuid_r: several threads may build holder metadata at once.
    passwd entry{};
    passwd* found = nullptr;
    std::array<char, 4096> buffer{};
    if (getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
        found != nullptr && found->pw_name != nullptr) {
        return found->pw_name;
    }
    if (const char* user = std::getenv("USER"); user != nullptr) {
        return user;
    }
    return std::to_string(geteuid());
}

std::string this_host() {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) {
        return "unknown";
    }
    return name;
}

// Turns the replies every script may give instead of its own into errors.
void check_common_replies(const Reply& reply, std::string_view semaphore) {
    if (reply.type != Reply::Type::array || reply.elements.empty() ||
        reply.elements[0].type != Reply::Type::string) {
        return;
    }
    if (reply.elements[0].text == "wrongtype") {
        throw ConflictError(fmt::format(
            "key '{}' of semaphore '{}' holds a {}, not the {} redsem keeps there; nothing was "
            "changed (delete the key, or choose another --prefix)",
            printable(reply.at(1).as_string(), 300), semaphore, reply.at(2).as_string(),
            reply.at(3).as_string()));
    }
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

} // namespace

HolderMeta HolderMeta::of_this_process(std::string label) {
    if (label.size() > k_max_label_bytes) {
        label.resize(k_max_label_bytes);
    }
    return HolderMeta{this_host(), static_cast<long long>(getpid()), this_user(), std::move(label)};
}

std::string HolderMeta::to_json() const {
    const nlohmann::json json{{"host", host}, {"pid", pid}, {"user", user}, {"label", label}};
    // Labels are arbitrary bytes; invalid UTF-8 is replaced rather than refused.
    return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Semaphore::Semaphore(Connection& connection, std::string_view prefix, std::string_view name)
    : m_connection(connection), m_name(name), m_keys(Keys::make(prefix, name)) {}

Reply Semaphore::run(const Script& script, std::vector<std::string> args) {
    args.insert(args.begin(), m_keys.wake_prefix);
    Reply reply = m_connection.eval(script, m_keys.script_keys(), args);
    check_common_replies(reply, m_name);
    return reply;
}

Reply Semaphore::attempt(const AcquireOptions& options, const std::string& token, bool queue,
                         bool known) {
    return run(scripts::k_acquire_script,
               {token, std::to_string(options.limit), std::to_string(options.ttl.count()),
                queue ? "wait" : "try", std::to_string(k_waiter_liveness.count()),
                options.meta.to_json(), known ? "1" : "0"});
}

std::optional<Lease> Semaphore::wait_for_hand_over(const AcquireOptions& options,
                                                   const std::string& token, Milliseconds timeout,
                                                   Clock::time_point asked_at,
                                                   long long server_now_at_ask) {
    timeout = std::max(timeout, Milliseconds{1});
    const std::string seconds =
        fmt::format("{:.3f}", static_cast<double>(timeout.count()) / 1000.0);
    const Reply reply = m_connection.command({"BLPOP", m_keys.wake_prefix + token, seconds},
                                             timeout, options.interrupt_fd);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    if (reply.is_nil()) {
        return std::nullopt;
    }
    // "FENCE SLOT DEADLINE_MS NOW_MS", pushed by hand_over() in lua/lib.lua.
    const std::string& grant = reply.at(1).as_string();
    Lease lease{token, 0, 0, options.limit, options.ttl, 0, 0, true, true, asked_at};
    long long granted_at_ms = 0;
    if (std::sscanf(grant.c_str(), "%lld %lld %lld %lld", &lease.fence, &lease.slot,
                    &lease.deadline_ms, &granted_at_ms) != 4) {
        throw InternalError(fmt::format("malformed hand-over '{}'", printable(grant)));
    }
    // The grant came after the acquire that queued or refreshed this waiter, and may have sat
    // in the list a while: time the lease from that acquire, whose script read the server
    // clock after `asked_at`.
    lease.server_now_ms = server_now_at_ask;
    return lease;
}

namespace {

// Redis could not be reached or dropped the connection (as opposed to refusing the request).
bool is_unreachable(const Error& error) {
    return dynamic_cast<const UnavailableError*>(&error) != nullptr;
}

} // namespace

std::optional<Lease> Semaphore::acquire(const AcquireOptions& options, const std::string& token) {
    const bool try_once = options.wait && options.wait->count() == 0;
    const auto give_up_at = options.wait ? Clock::now() + *options.wait : Clock::time_point::max();
    bool sent = options.retry; // once sent, the server may know the token (holder or waiter)
    bool waited = false;
    bool answered = false; // Redis answered at least once during this acquire
    std::optional<Clock::time_point> unreachable_since;
    Milliseconds backoff = k_reconnect_backoff;
    // Redis unreachable: retry with the same token (a holder gets its lease back, a waiter its
    // place) with backoff, for up to k_reconnect_window; then the error being handled stands.
    auto retry_or_rethrow = [&] {
        const auto now = Clock::now();
        if (!unreachable_since) {
            unreachable_since = now;
        }
        if (now - *unreachable_since >= k_reconnect_window) {
            throw;
        }
        if (interruptible_sleep(backoff, options.interrupt_fd)) {
            throw WaitInterrupted();
        }
        backoff = std::min(backoff * 2, k_max_reconnect_backoff);
    };
    try {
        for (;;) {
            Reply reply;
            const auto asked_at = Clock::now();
            try {
                reply = attempt(options, token, !try_once, sent);
            } catch (const Error& error) {
                // Unreachable from the start is reported at once; a connection that broke
                // after Redis had answered (a restart, a blip) is retried.
                const bool lost = dynamic_cast<const ConnectionLost*>(&error) != nullptr;
                sent = sent || lost; // the request may have run before the connection broke
                if (!is_unreachable(error) || !(lost || answered)) {
                    throw;
                }
                retry_or_rethrow();
                continue;
            }
            sent = true;
            answered = true;
            unreachable_since.reset();
            backoff = k_reconnect_backoff;
            const std::string& status = reply.at(0).as_string();
            if (status == "ok") {
                return Lease{token,
                             reply.at(1).as_integer(),
                             reply.at(2).as_integer(),
                             reply.at(4).as_integer(),
                             options.ttl,
                             reply.at(3).as_integer(),
                             reply.at(5).as_integer(),
                             waited,
                             false,
                             asked_at};
            }
            if (status == "busy") {
                return std::nullopt;
            }
            if (status == "conflict") {
                const long long current = reply.at(1).as_integer();
                if (current == -1) {
                    throw ConflictError(fmt::format(
                        "the stored limit of '{}' is not a number (key '{}' was changed by hand); "
                        "run 'redsem gc {}' once its leases ran out, or delete that key",
                        m_name, m_keys.state, m_name));
                }
                if (current < 0) {
                    throw ConflictError(fmt::format(
                        "'{}' has holders but its state key '{}' is gone (deleted, or evicted: "
                        "use maxmemory-policy noeviction); it admits nobody new until its "
                        "leases run out and 'redsem gc {}' cleans it",
                        m_name, m_keys.state, m_name));
                }
                throw ConflictError(fmt::format(
                    "'{}' has limit {} with {} holding and {} waiting; it cannot change to {} "
                    "until it is idle (use -n {})",
                    m_name, current, reply.at(2).as_integer(), reply.at(3).as_integer(),
                    options.limit, current));
            }
            if (status != "wait") {
                throw InternalError(
                    fmt::format("unexpected acquire reply '{}'", printable(status)));
            }
            waited = true;
            const auto now = Clock::now();
            if (now >= give_up_at) {
                // Leaves the queue, or gives back a slot handed over since the last reply.
                release(token);
                return std::nullopt;
            }
            if (options.on_wait) {
                options.on_wait(QueuePosition{reply.at(1).as_integer(), reply.at(2).as_integer(),
                                              reply.at(3).as_integer(), reply.at(5).as_integer()});
            }
            // Sleep until a release hands this waiter a slot, or until the earliest holder's
            // lease runs out (it may have died), or until this waiter must refresh its place.
            Milliseconds timeout = k_waiter_refresh;
            const long long next_expiry_in = reply.at(4).as_integer();
            if (next_expiry_in >= 0) {
                timeout = std::min(timeout, Milliseconds{next_expiry_in + 1});
            }
            if (options.wait) {
                timeout = std::min(timeout, std::chrono::ceil<Milliseconds>(give_up_at - now));
            }
            try {
                if (auto lease = wait_for_hand_over(options, token, timeout, asked_at,
                                                    reply.at(6).as_integer())) {
                    return lease;
                }
            } catch (const Error& error) {
                if (!is_unreachable(error)) {
                    throw;
                }
                retry_or_rethrow();
            }
        }
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

void Semaphore::release_quietly(const std::string& token) noexcept {
    try {
        release(token);
    } catch (const std::exception&) {
    }
}

ReleaseOutcome Semaphore::release(const std::string& token) {
    const Reply reply = run(scripts::k_release_script, {token});
    switch (reply.as_integer()) {
    case 1:
        return ReleaseOutcome::released;
    case 2:
        return ReleaseOutcome::left_queue;
    default:
        return ReleaseOutcome::not_found;
    }
}

std::optional<Renewal> Semaphore::renew(const std::string& token, Milliseconds ttl) {
    const Reply reply = run(scripts::k_renew_script, {token, std::to_string(ttl.count())});
    if (reply.at(0).as_integer() != 1) {
        return std::nullopt;
    }
    return Renewal{reply.at(1).as_integer(), reply.at(2).as_integer()};
}

} // namespace redsem

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
                                                   const std::string& token, Milliseconds timeout) {
    timeout = std::max(timeout, Milliseconds{1});
    const std::string seconds = fmt::format("{:.3f}", static_cast<double>(timeout.count()) / 1000.0);
    const Reply reply = m_connection.command({"BLPOP", m_keys.wake_prefix + token, seconds}, timeout,
                                             options.interrupt_fd);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    if (reply.is_nil()) {
        return std::nullopt;
    }
    // "FENCE SLOT DEADLINE_MS NOW_MS", pushed by hand_over() in lua/lib.lua.
    const std::string& grant = reply.at(1).as_string();
    Lease lease{token, 0, 0, options.limit, options.ttl, 0, 0, true, true};
    if (std::sscanf(grant.c_str(), "%lld %lld %lld %lld", &lease.fence, &lease.slot,
                    &lease.deadline_ms, &lease.server_now_ms) != 4) {
        throw InternalError(fmt::format("malformed hand-over '{}'", printable(grant)));
    }
    return lease;
}

std::optional<Lease> Semaphore::acquire(const AcquireOptions& options, const std::string& token) {
    const bool try_once = options.wait && options.wait->count() == 0;
    const auto give_up_at = options.wait ? Clock::now() + *options.wait : Clock::time_point::max();
    bool sent = options.retry; // once sent, the server may know the token (holder or waiter)
    bool waited = false;
    int reconnects = 0;
    try {
        for (;;) {
            Reply reply;
            try {
                reply = attempt(options, token, !try_once, sent);
            } catch (const ConnectionLost&) {
                // The reply may have been lost after the script ran; the same token makes the
                // retry safe (a holder gets its lease back, a waiter keeps its place).
                sent = true;
                if (++reconnects > k_max_reconnects) {
                    throw;
                }
                if (interruptible_sleep(k_reconnect_backoff * (1 << (reconnects - 1)),
                                        options.interrupt_fd)) {
                    throw WaitInterrupted();
                }
                continue;
            }
            sent = true;
            reconnects = 0;
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
                             false};
            }
            if (status == "busy") {
                return std::nullopt;
            }
            if (status == "conflict") {
                const long long current = reply.at(1).as_integer();
                if (current < 0) {
                    throw ConflictError(fmt::format(
                        "the stored limit of '{}' is not a number (key '{}' was changed by hand); "
                        "delete that key to reset it",
                        m_name, m_keys.state));
                }
                throw ConflictError(fmt::format(
                    "'{}' has limit {} with {} holding and {} waiting; it cannot change to {} "
                    "until it is idle (use -n {})",
                    m_name, current, reply.at(2).as_integer(), reply.at(3).as_integer(),
                    options.limit, current));
            }
            if (status != "wait") {
                throw InternalError(fmt::format("unexpected acquire reply '{}'", printable(status)));
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
                if (auto lease = wait_for_hand_over(options, token, timeout)) {
                    return lease;
                }
            } catch (const ConnectionLost&) {
                if (++reconnects > k_max_reconnects) {
                    throw;
                }
            }
        }
    } catch (const WaitInterrupted&) {
        // Leave the queue (or give back a slot handed over in a reply we did not read) before
        // reporting the interruption; a failure here is covered by the waiter's liveness.
        try {
            release(token);
        } catch (const Error&) {
        }
        throw;
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

#include "redis/sentinel.hpp"

#include "redis/server_connection.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <fmt/format.h>

namespace redsem {

namespace {

// How to reach one sentinel: the TLS settings of the URL, the sentinels' own password, and
// `timeout` for the whole exchange.
ConnectOptions sentinel_options(const ConnectOptions& options, const Endpoint& sentinel,
                                Milliseconds timeout) {
    RedisUrl url = options.url.at(sentinel);
    url.user.reset();
    url.password = options.sentinel_password;
    url.db = 0;
    return ConnectOptions{.url = std::move(url),
                          .connect_timeout = timeout,
                          .command_timeout = timeout,
                          .tls = options.tls,
                          .sentinel_password = std::nullopt,
                          .open_transport = options.open_transport};
}

// The master's address in a sentinel's reply; nullopt when the reply is not one.
std::optional<Endpoint> address_in(const Reply& reply) {
    if (reply.type != Reply::Type::array || reply.elements.size() != 2 ||
        reply.elements[0].type != Reply::Type::string ||
        reply.elements[1].type != Reply::Type::string || reply.elements[0].text.empty()) {
        return std::nullopt;
    }
    const auto port = parse_integer(reply.elements[1].text, 1, 65535);
    if (!port || !is_host_name(reply.elements[0].text)) {
        return std::nullopt;
    }
    return Endpoint{.host = reply.elements[0].text, .port = static_cast<int>(*port)};
}

} // namespace

SentinelChoice::SentinelChoice() = default;
SentinelChoice::~SentinelChoice() = default;
SentinelChoice::SentinelChoice(SentinelChoice&&) noexcept = default;
SentinelChoice& SentinelChoice::operator=(SentinelChoice&&) noexcept = default;

Endpoint ask_sentinels(const ConnectOptions& options, SentinelChoice& choice, std::size_t tries,
                       Milliseconds timeout) {
    const RedisUrl& url = options.url;
    const std::size_t count = url.sentinels.size();
    const std::size_t first = choice.first;
    std::string failures;    // why each sentinel could not say, for the message
    std::string denied;      // the first sentinel that refused our password
    bool any_answer = false; // a sentinel answered, but did not know the master
    const std::size_t asked = std::min(tries, count);
    const auto give_up_at = std::chrono::steady_clock::now() + timeout;
    for (std::size_t i = 0; i < asked; ++i) {
        const std::size_t index = (first + i) % count;
        const Endpoint& sentinel = url.sentinels[index];
        // Asked next time if this one fails.
        choice.first = (index + 1) % count;
        auto failed = [&](const std::string& why) {
            failures += fmt::format("{}{}", failures.empty() ? "" : "; ", why);
        };
        const auto share = std::chrono::duration_cast<Milliseconds>(
                               give_up_at - std::chrono::steady_clock::now()) /
                           static_cast<long long>(asked - i);
        if (share <= Milliseconds{0}) {
            failed(fmt::format("the sentinel at {}: not asked, the connect timeout ({}) ran out",
                               sentinel.describe(), format_duration(timeout)));
            continue;
        }
        const ConnectOptions asking = sentinel_options(options, sentinel, timeout);
        std::unique_ptr<ServerConnection> connection =
            index == first && choice.connection ? std::move(choice.connection)
                                                : std::make_unique<ServerConnection>(asking);
        connection->set_command_timeout(share); // a kept connection was opened with another
        Reply reply;
        try {
            if (!connection->is_open()) {
                connection->open(asking.url, share);
            }
            reply = connection->exchange({"SENTINEL", "get-master-addr-by-name", url.master_name});
        } catch (const Error& error) {
            if (error.exit_code() == static_cast<int>(ExitCode::usage)) {
                throw; // a TLS file that cannot be used: the same for every sentinel
            }
            if (error.exit_code() == static_cast<int>(ExitCode::denied) && denied.empty()) {
                // AUTH refused (the password is wrong, or the sentinel has none).
                denied = fmt::format("the sentinel at {}: {}", sentinel.describe(), error.what());
            }
            failed(error.what());
            continue;
        }
        if (reply.is_error()) {
            if (classify_reply_error(reply.text).code == ExitCode::denied && denied.empty()) {
                denied = fmt::format("the sentinel at {} refused redsem ({})", sentinel.describe(),
                                     printable(reply.text, 100));
            }
            failed(fmt::format("the sentinel at {} answered with an error: {}", sentinel.describe(),
                               printable(reply.text, 100)));
            continue;
        }
        if (reply.is_nil()) {
            any_answer = true;
            continue;
        }
        const std::optional<Endpoint> master = address_in(reply);
        if (!master) {
            failed(fmt::format("the sentinel at {} gave no address for the master '{}' (is it a "
                               "sentinel?)",
                               sentinel.describe(), printable(url.master_name)));
            continue;
        }
        choice.first = index;
        choice.connection = std::move(connection);
        return *master;
    }
    if (!denied.empty()) {
        throw DeniedError(fmt::format("{}; the sentinels' password is read from "
                                      "--sentinel-password-file or $REDSEM_SENTINEL_PASSWORD",
                                      denied));
    }
    if (any_answer) {
        throw UnavailableError(
            fmt::format("the sentinels of {} know no master named '{}'{}", url.describe(),
                        printable(url.master_name),
                        failures.empty() ? "" : fmt::format(" (and: {})", failures)));
    }
    throw UnavailableError(
        fmt::format("no sentinel of {} could be asked: {}", url.describe(), failures));
}

} // namespace redsem

#include "redis/sentinel.hpp"

#include "redis/connection.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <fmt/format.h>

namespace redsem {

namespace {

// How to reach one sentinel: the TLS settings of the URL, the sentinels' own password, and the
// connect timeout for the whole exchange.
ConnectOptions sentinel_options(const ConnectOptions& options, const Endpoint& sentinel) {
    RedisUrl url = options.url.at(sentinel);
    url.user.reset();
    url.password = options.sentinel_password;
    url.db = 0;
    return ConnectOptions{.url = std::move(url),
                          .connect_timeout = options.connect_timeout,
                          .command_timeout = options.connect_timeout,
                          .tls = options.tls,
                          .sentinel_password = std::nullopt};
}

[[noreturn]] void throw_sentinel_refusal(const Endpoint& sentinel, const std::string& error) {
    const ReplyErrorMeaning meaning = classify_reply_error(error);
    if (meaning.code == ExitCode::denied) {
        throw DeniedError(fmt::format(
            "the sentinel at {} refused redsem ({}): give the sentinels' password with "
            "--sentinel-password-file or $REDSEM_SENTINEL_PASSWORD",
            sentinel.describe(), printable(error, 100)));
    }
    throw UnavailableError(fmt::format("the sentinel at {} answered with an error: {}",
                                       sentinel.describe(), printable(error, 200)));
}

} // namespace

SentinelChoice::SentinelChoice() = default;
SentinelChoice::~SentinelChoice() = default;
SentinelChoice::SentinelChoice(SentinelChoice&&) noexcept = default;
SentinelChoice& SentinelChoice::operator=(SentinelChoice&&) noexcept = default;

Endpoint ask_sentinels(const ConnectOptions& options, SentinelChoice& choice) {
    const RedisUrl& url = options.url;
    const std::size_t count = url.sentinels.size();
    const std::size_t first = choice.first;
    std::string failures;   // why each sentinel could not say, for the message
    bool any_answer = false; // a sentinel answered, but did not know the master
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t index = (first + i) % count;
        const Endpoint& sentinel = url.sentinels[index];
        Reply reply;
        std::unique_ptr<Connection> connection = index == first && choice.connection
                                                     ? std::move(choice.connection)
                                                     : std::make_unique<Connection>(
                                                           sentinel_options(options, sentinel));
        try {
            reply = connection->command(
                std::vector<std::string>{"SENTINEL", "get-master-addr-by-name", url.master_name});
        } catch (const Error& error) {
            if (error.exit_code() == static_cast<int>(ExitCode::denied)) {
                // AUTH refused (the password is wrong, or the sentinel has none).
                throw DeniedError(fmt::format("the sentinel at {}: {}; the sentinels' password "
                                              "is read from --sentinel-password-file or "
                                              "$REDSEM_SENTINEL_PASSWORD",
                                              sentinel.describe(), error.what()));
            }
            if (error.exit_code() == static_cast<int>(ExitCode::usage)) {
                throw;
            }
            failures += fmt::format("{}{}", failures.empty() ? "" : "; ", error.what());
            continue;
        }
        if (reply.is_error()) {
            throw_sentinel_refusal(sentinel, reply.text);
        }
        if (reply.is_nil()) {
            any_answer = true;
            continue;
        }
        const std::vector<Reply>& address = reply.as_array();
        const auto port = address.size() == 2 ? parse_integer(address[1].as_string(), 1, 65535)
                                               : std::nullopt;
        if (!port || address[0].as_string().empty()) {
            throw UnavailableError(fmt::format("the sentinel at {} gave a malformed address for "
                                               "the master '{}'",
                                               sentinel.describe(), printable(url.master_name)));
        }
        choice.first = index;
        choice.connection = std::move(connection);
        return Endpoint{.host = address[0].as_string(), .port = static_cast<int>(*port)};
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

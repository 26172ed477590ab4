#include "cli/options.hpp"

#include "semaphore/inspect.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>

namespace redsem::cli {

namespace {

std::optional<std::string> env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return std::nullopt;
    }
    return std::string(value);
}

} // namespace

void print_json(const nlohmann::json& value) {
    std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void add_name_and_token(CLI::App& command, std::string& name, std::string& token) {
    command.add_option("NAME", name, "Semaphore name")->required();
    command
        .add_option(
            "TOKEN", token,
            "Token printed by 'redsem acquire', or a unique start of it as 'redsem status' shows")
        ->required();
}

void add_global_options(CLI::App& app, GlobalOptions& options) {
    app.add_option("-u,--url", options.url,
                   fmt::format("Redis URL: redis://[[user]:password@]host[:port][/db] or "
                               "unix:///path.sock[?db=N] (default: $REDSEM_URL, $REDIS_URL, {})",
                               k_default_redis_url))
        ->type_name("URL");
    app.add_option("--prefix", options.prefix,
                   fmt::format("Prefix of redsem's Redis keys (default: $REDSEM_PREFIX or {})",
                               k_default_prefix))
        ->type_name("PREFIX");
    app.add_option("--connect-timeout", options.connect_timeout,
                   fmt::format("How long to wait for Redis to accept the connection and answer "
                               "(default: $REDSEM_CONNECT_TIMEOUT or {})",
                               format_duration(k_default_connect_timeout)))
        ->type_name("DUR");
}

ConnectOptions resolve_connection(const GlobalOptions& options) {
    std::string text(k_default_redis_url);
    std::string source = "the default";
    if (options.url) {
        text = *options.url;
        source = "--url";
    } else if (auto url = env("REDSEM_URL")) {
        text = *url;
        source = "$REDSEM_URL";
    } else if (auto redis_url = env("REDIS_URL")) {
        text = *redis_url;
        source = "$REDIS_URL";
    }
    RedisUrl url;
    try {
        url = parse_redis_url(text);
    } catch (const UsageError& error) {
        throw UsageError(fmt::format("{} (from {})", error.what(), source));
    }
    if (options.url && url.password) {
        std::cerr << "redsem: warning: a password on the command line can be seen by other users; "
                     "set REDSEM_PASSWORD instead\n";
    }
    if (!url.password) {
        url.password = env("REDSEM_PASSWORD");
    }
    ConnectOptions connect{std::move(url)};
    const char* timeout_source = "--connect-timeout";
    std::optional<std::string> timeout = options.connect_timeout;
    if (!timeout) {
        timeout = env("REDSEM_CONNECT_TIMEOUT");
        timeout_source = "$REDSEM_CONNECT_TIMEOUT";
    }
    if (timeout) {
        connect.connect_timeout = parse_duration(*timeout, timeout_source);
        if (connect.connect_timeout.count() <= 0) {
            throw UsageError(fmt::format("{} must be longer than 0", timeout_source));
        }
    }
    return connect;
}

std::string resolve_prefix(const GlobalOptions& options) {
    std::string prefix(k_default_prefix);
    if (options.prefix) {
        prefix = *options.prefix;
    } else if (auto from_env = env("REDSEM_PREFIX")) {
        prefix = *from_env;
    }
    if (auto problem = prefix_problem(prefix)) {
        throw UsageError(fmt::format("invalid prefix '{}': {}", printable(prefix), *problem));
    }
    return prefix;
}

long long parse_limit(const std::string& text, const char* option) {
    auto limit = parse_integer(text, k_min_limit, k_max_limit);
    if (!limit) {
        throw UsageError(fmt::format("{}: '{}' is not a whole number from {} to {}", option,
                                     printable(text), k_min_limit, k_max_limit));
    }
    return *limit;
}

int parse_exit_code(const std::string& text, const char* option) {
    auto code = parse_integer(text, 0, 255);
    if (!code) {
        throw UsageError(
            fmt::format("{}: '{}' is not an exit code from 0 to 255", option, printable(text)));
    }
    return static_cast<int>(*code);
}

long long parse_pid(const std::string& text, const char* option) {
    constexpr long long k_max_pid = 4'194'304; // PID_MAX_LIMIT on 64-bit Linux
    auto pid = parse_integer(text, 1, k_max_pid);
    if (!pid) {
        throw UsageError(fmt::format("{}: '{}' is not a process id", option, printable(text)));
    }
    return *pid;
}

Milliseconds parse_ttl(const std::string& text, const char* option) {
    const Milliseconds ttl = parse_duration(text, option);
    if (ttl < k_min_ttl) {
        throw UsageError(fmt::format("{}: '{}' is too short; a lease lasts at least {}", option,
                                     printable(text), format_duration(k_min_ttl)));
    }
    return ttl;
}

std::optional<Milliseconds> resolve_loss_grace(const std::optional<std::string>& option) {
    if (option) {
        return parse_duration(*option, "--loss-grace");
    }
    if (auto from_env = env("REDSEM_LOSS_GRACE")) {
        return parse_duration(*from_env, "REDSEM_LOSS_GRACE");
    }
    return std::nullopt;
}

std::string resolve_token(Connection& connection, const std::string& prefix,
                          const std::string& name, const std::string& token) {
    if (is_token(token)) {
        return token;
    }
    const bool hex = std::all_of(token.begin(), token.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
    if (!hex || token.size() < k_min_short_token || token.size() > 2 * k_token_bytes) {
        throw UsageError(fmt::format("'{}' is not a redsem token (32 hex digits as printed by "
                                     "'redsem acquire', or the first {} or more of them as "
                                     "'redsem status' shows)",
                                     printable(token, 40), k_min_short_token));
    }
    const std::vector<std::string> found = tokens_starting_with(connection, prefix, name, token);
    if (found.empty()) {
        throw NotHeldError(
            fmt::format("no holder or waiter of '{}' has a token starting with '{}' (its lease "
                        "expired, it was released, or it never held one)",
                        name, token));
    }
    if (found.size() > 1) {
        std::string candidates;
        for (std::size_t i = 0; i < found.size() && i < 5; ++i) {
            candidates += (i > 0 ? ", " : "") + found[i];
        }
        throw UsageError(fmt::format("'{}' is the start of {} tokens of '{}' ({}{}); give more "
                                     "of it",
                                     token, found.size(), name, candidates,
                                     found.size() > 5 ? ", ..." : ""));
    }
    return found.front();
}

} // namespace redsem::cli

#include "cli/options.hpp"

#include "cli/secret_files.hpp"
#include "cli/tls_options.hpp"
#include "cli/variables.hpp"
#include "process/inherited_secret.hpp"
#include "process/secrecy.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <filesystem>
#include <fmt/format.h>
#include <iostream>

namespace redsem::cli {

namespace {

std::optional<std::string> resolve_password(const GlobalOptions& options) {
    if (options.password_file) {
        return read_password_file(*options.password_file, "--password-file");
    }
    if (auto password = env("REDSEM_PASSWORD")) {
        return password;
    }
    if (auto path = env("REDSEM_PASSWORD_FILE")) {
        return read_password_file(*path, "$REDSEM_PASSWORD_FILE");
    }
    return env("REDISCLI_AUTH");
}

std::optional<std::string> resolve_sentinel_password(const GlobalOptions& options,
                                                     const RedisUrl& url) {
    if (url.kind != RedisUrl::Kind::sentinel) {
        if (options.sentinel_password_file) {
            throw UsageError(fmt::format("--sentinel-password-file needs a redis-sentinel:// URL, "
                                         "not {}",
                                         url.describe()));
        }
        return std::nullopt;
    }
    if (options.sentinel_password_file) {
        return read_password_file(*options.sentinel_password_file, "--sentinel-password-file");
    }
    if (auto password = env("REDSEM_SENTINEL_PASSWORD")) {
        return password;
    }
    if (auto path = env("REDSEM_SENTINEL_PASSWORD_FILE")) {
        return read_password_file(*path, "$REDSEM_SENTINEL_PASSWORD_FILE");
    }
    return std::nullopt;
}

} // namespace

Milliseconds parse_connect_timeout(const std::string& text, const char* option) {
    const Milliseconds timeout = parse_duration(text, option);
    if (timeout.count() <= 0) {
        throw UsageError(fmt::format("{} must be longer than 0", option));
    }
    return timeout;
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
                     "use --password-file or set REDSEM_PASSWORD instead\n";
    }
    if (!url.password) {
        url.password = resolve_password(options);
    }
    TlsOptions tls = resolve_tls(options, url);
    std::optional<std::string> sentinel_password = resolve_sentinel_password(options, url);
    hide_environment_passwords(); // read once: /proc/PID/environ shows them no more
    ConnectOptions connect{.url = std::move(url),
                           .tls = std::move(tls),
                           .sentinel_password = std::move(sentinel_password)};
    if (options.connect_timeout) {
        connect.connect_timeout = *options.connect_timeout;
    } else if (const std::optional<std::string> timeout = env("REDSEM_CONNECT_TIMEOUT")) {
        connect.connect_timeout = parse_connect_timeout(*timeout, "$REDSEM_CONNECT_TIMEOUT");
    }
    if (const std::optional<std::string> functions = env("REDSEM_FUNCTIONS")) {
        connect.functions = parse_switch(*functions, "$REDSEM_FUNCTIONS");
    }
    return connect;
}

std::vector<std::string> connection_for_child(const GlobalOptions& options,
                                              const ConnectOptions& connect) {
    std::vector<std::string> entries;
    auto file = [&](const char* variable, const std::optional<std::string>& path) {
        if (path) {
            std::error_code error;
            const auto absolute = std::filesystem::absolute(*path, error);
            entries.push_back(fmt::format("{}={}", variable, error ? *path : absolute.string()));
        }
    };
    if (options.url) {
        entries.push_back("REDSEM_URL=" + connect.url.describe());
    }
    if (options.connect_timeout) {
        entries.push_back(
            "REDSEM_CONNECT_TIMEOUT=" + std::to_string(options.connect_timeout->count()) + "ms");
    }
    auto secret = [&](const char* variable, const std::optional<std::string>& path,
                      const std::optional<std::string>& password, const char* name) {
        if (path) {
            file(variable, path);
        } else if (password) {
            if (auto inherited = inherited_secret(*password, name)) {
                entries.push_back(fmt::format("{}={}", variable, *inherited));
            }
        }
    };
    secret("REDSEM_PASSWORD_FILE", options.password_file, connect.url.password, "redsem-password");
    secret("REDSEM_SENTINEL_PASSWORD_FILE", options.sentinel_password_file,
           connect.sentinel_password, "redsem-sentinel-password");
    file("REDSEM_CACERT", options.cacert);
    file("REDSEM_CACERTDIR", options.cacertdir);
    file("REDSEM_CERT", options.cert);
    file("REDSEM_KEY", options.key);
    if (options.sni) {
        entries.push_back("REDSEM_SNI=" + *options.sni);
    }
    if (options.insecure) {
        entries.push_back("REDSEM_INSECURE=1");
    }
    return entries;
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

Milliseconds parse_loss_grace(const std::string& text, const char* source) {
    const Milliseconds grace = parse_duration(text, source);
    if (grace > k_default_loss_grace) {
        throw UsageError(fmt::format("{}: '{}' is longer than {}, the loss grace every client has; "
                                     "it can only shorten this caller's wait",
                                     source, printable(text),
                                     format_duration(k_default_loss_grace)));
    }
    return grace;
}

std::optional<Milliseconds> resolve_loss_grace(std::optional<Milliseconds> option) {
    if (option) {
        return option;
    }
    if (auto from_env = env("REDSEM_LOSS_GRACE")) {
        return parse_loss_grace(*from_env, "$REDSEM_LOSS_GRACE");
    }
    return std::nullopt;
}

long long parse_replicas(const std::string& text, const char* option) {
    const auto replicas = parse_integer(text, 0, k_max_replicas);
    if (!replicas) {
        throw UsageError(fmt::format("{}: '{}' is not a whole number from 0 to {}", option,
                                     printable(text), k_max_replicas));
    }
    return *replicas;
}

long long resolve_replicas(std::optional<long long> option) {
    if (option) {
        return *option;
    }
    const std::optional<std::string> text = env("REDSEM_REPLICAS");
    return text ? parse_replicas(*text, "$REDSEM_REPLICAS") : 0;
}

long long parse_max_waiting(const std::string& text, const char* option) {
    const auto most = parse_integer(text, 1, k_max_waiting);
    if (!most) {
        throw UsageError(fmt::format("{}: '{}' is not a whole number of waiters from 1 to {} "
                                     "(-w 0 never waits)",
                                     option, printable(text), k_max_waiting));
    }
    return *most;
}

long long parse_history(const std::string& text, const char* option) {
    const auto history = parse_integer(text, 0, k_max_history);
    if (!history) {
        throw UsageError(fmt::format("{}: '{}' is not a whole number of events from 0 to {}",
                                     option, printable(text), k_max_history));
    }
    return *history;
}

} // namespace redsem::cli

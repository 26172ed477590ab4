#include "cli/options.hpp"

#include "process/secrecy.hpp"
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
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace redsem::cli {

namespace {

std::optional<std::string> env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return std::nullopt;
    }
    return std::string(value);
}

// An option's value, else its environment variable's; `source` names where it came from.
std::optional<std::string> option_or_env(const std::optional<std::string>& option,
                                         const char* variable, std::string& source,
                                         const char* option_name) {
    if (option) {
        source = option_name;
        return option;
    }
    source = fmt::format("${}", variable);
    return env(variable);
}

bool parse_switch(const std::string& text, const char* variable) {
    if (text == "1" || text == "yes" || text == "true") {
        return true;
    }
    if (text == "0" || text == "no" || text == "false") {
        return false;
    }
    throw UsageError(fmt::format("{}: '{}' is neither 1 nor 0", variable, printable(text)));
}

// A password file holds a password, and nothing that could block or fill memory.
constexpr off_t k_max_password_file = 64 * 1024;

// Closes a descriptor when it goes out of scope.
struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
};

// Why redsem refuses the file `fd` was opened on, as ssh refuses a key file: one that is not
// a regular file (a FIFO would block, a device may never end), is owned by another user than
// this one or root, or that others may write (they could have put their own password there).
std::optional<std::string> refusal(const struct stat& file) {
    if (S_ISDIR(file.st_mode)) {
        return "is a directory";
    }
    if (!S_ISREG(file.st_mode)) {
        return "is not a regular file (a FIFO, a device or a socket)";
    }
    if (file.st_uid != geteuid() && file.st_uid != 0) {
        return fmt::format("is owned by another user (uid {}), who could change it", file.st_uid);
    }
    if ((file.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return "can be written by other users: chmod 600 it";
    }
    if (file.st_size > k_max_password_file) {
        return fmt::format("is larger than {} KiB: not a password file",
                           k_max_password_file / 1024);
    }
    return std::nullopt;
}

// The first line of a password file: opened once, then what was opened is checked and read
// (so a file swapped in between is never read unchecked). Warns when other users may read it.
std::string read_password_file(const std::string& path, std::string_view source) {
    const auto fail = [&](std::string_view why) {
        return UsageError(
            fmt::format("the password file '{}' ({}) {}", printable(path), source, why));
    };
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        throw UsageError(fmt::format("cannot read the password file '{}' ({}): {}", printable(path),
                                     source, std::strerror(errno)));
    }
    const FdCloser closer{fd};
    struct stat file {};
    if (::fstat(fd, &file) != 0) {
        throw fail(fmt::format("cannot be examined: {}", std::strerror(errno)));
    }
    if (auto why = refusal(file)) {
        throw fail(*why);
    }
    std::string content;
    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof(buffer));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            throw fail(fmt::format("cannot be read: {}", std::strerror(errno)));
        }
        if (got == 0) {
            break;
        }
        content.append(buffer, static_cast<std::size_t>(got));
        if (content.size() > static_cast<std::size_t>(k_max_password_file)) {
            throw fail(fmt::format("is larger than {} KiB: not a password file",
                                   k_max_password_file / 1024));
        }
    }
    std::string password = content.substr(0, content.find('\n'));
    if (!password.empty() && password.back() == '\r') {
        password.pop_back();
    }
    if (password.empty()) {
        throw fail("has an empty first line");
    }
    if ((file.st_mode & (S_IRGRP | S_IROTH)) != 0) {
        std::cerr << fmt::format("redsem: warning: the password file '{}' can be read by other "
                                 "users; chmod 600 it\n",
                                 printable(path));
    }
    return password;
}

// Warns when others may read the TLS client key (OpenSSL reads it later, by its path).
void check_key_file(const std::string& path) {
    struct stat file {};
    if (::stat(path.c_str(), &file) == 0 && S_ISREG(file.st_mode) &&
        (file.st_mode & (S_IRGRP | S_IROTH)) != 0) {
        std::cerr << fmt::format("redsem: warning: the TLS client key '{}' can be read by other "
                                 "users; chmod 600 it\n",
                                 printable(path));
    }
}

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

TlsOptions resolve_tls(const GlobalOptions& options, const RedisUrl& url) {
    TlsOptions tls;
    std::string cert_source;
    std::string key_source;
    std::string ignored;
    tls.ca_file = option_or_env(options.cacert, "REDSEM_CACERT", ignored, "--cacert");
    tls.ca_dir = option_or_env(options.cacertdir, "REDSEM_CACERTDIR", ignored, "--cacertdir");
    tls.cert_file = option_or_env(options.cert, "REDSEM_CERT", cert_source, "--cert");
    tls.key_file = option_or_env(options.key, "REDSEM_KEY", key_source, "--key");
    tls.sni = option_or_env(options.sni, "REDSEM_SNI", ignored, "--sni");
    tls.insecure = options.insecure;
    if (auto insecure = env("REDSEM_INSECURE"); insecure && !options.insecure && url.tls) {
        tls.insecure = parse_switch(*insecure, "$REDSEM_INSECURE");
    }
    // Options on the command line are for this URL; variables may be meant for other ones.
    const bool tls_options_given = options.cacert || options.cacertdir || options.cert ||
                                   options.key || options.sni || options.insecure;
    if (!url.tls) {
        if (tls_options_given) {
            throw UsageError(fmt::format(
                "TLS options need a rediss:// or rediss-sentinel:// URL, not {}", url.describe()));
        }
        return TlsOptions{};
    }
    if (tls.sni && tls.sni->empty()) {
        // An empty name would turn the certificate's name check off.
        throw UsageError("--sni needs a server name");
    }
    if (tls.cert_file && !tls.key_file) {
        throw UsageError(
            fmt::format("{} needs a private key too (--key or $REDSEM_KEY)", cert_source));
    }
    if (tls.key_file && !tls.cert_file) {
        throw UsageError(
            fmt::format("{} needs a certificate too (--cert or $REDSEM_CERT)", key_source));
    }
    if (tls.key_file) {
        check_key_file(*tls.key_file);
    }
    if (tls.insecure) {
        std::cerr << fmt::format("redsem: warning: not verifying the TLS certificate of {} "
                                 "(--insecure): anyone on the way can read and change what is "
                                 "sent, the password included\n",
                                 url.describe());
    }
    return tls;
}

} // namespace

void warn_unlisted(const std::vector<UnlistedNode>& unlisted) {
    for (const UnlistedNode& node : unlisted) {
        std::cerr << fmt::format("redsem: warning: the semaphores of the cluster primary {} are "
                                 "not listed: {}\n",
                                 node.node, node.why);
    }
}

void print_json(const nlohmann::json& value) {
    std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

nlohmann::json ci_json(const std::optional<CiJob>& ci) {
    if (!ci) {
        return nullptr;
    }
    const auto text = [](const std::string& field) {
        return field.empty() ? nlohmann::json(nullptr) : nlohmann::json(field);
    };
    return {{"system", ci->system},
            {"url", text(ci->url)},
            {"pipeline", text(ci->pipeline)},
            {"job", text(ci->job)}};
}

int flush_stdout() {
    // std::cout writes through C's stdout (synchronised with stdio): the bytes wait in its
    // buffer, and a write that failed earlier (the buffer filled up) leaves its error flag set,
    // but not its errno: the first error found is kept.
    static int first_error = 0;
    errno = 0;
    std::cout.flush();
    const bool written = std::fflush(stdout) == 0 && std::ferror(stdout) == 0 && std::cout.good();
    if (written || first_error != 0) {
        return first_error;
    }
    first_error = errno;
    if (first_error == 0) {
        // Failed before: a pipe or socket whose reader went away reports an error when polled.
        pollfd out{.fd = STDOUT_FILENO, .events = POLLOUT, .revents = 0};
        first_error = poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0 ? EPIPE : EIO;
    }
    return first_error;
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
                   fmt::format("Redis URL: redis://[[user]:password@]host[:port][/db], "
                               "rediss://... for TLS, redis://host1:port1,host2:port2,... for "
                               "the nodes of one Redis Cluster, unix:///path.sock[?db=N], or "
                               "redis-sentinel://[[user]:password@]host[:port][,host[:port]...]"
                               "[/db]#MASTER (rediss-sentinel:// for TLS) (default: "
                               "$REDSEM_URL, $REDIS_URL, {})",
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
    struct ConnectionOption {
        const char* name;
        std::optional<std::string> GlobalOptions::*value;
        const char* type;
        const char* help;
    };
    static constexpr ConnectionOption k_connection_options[] = {
        {"--password-file", &GlobalOptions::password_file, "FILE",
         "Read the Redis password from the first line of FILE (default: $REDSEM_PASSWORD, "
         "$REDSEM_PASSWORD_FILE, $REDISCLI_AUTH)"},
        {"--sentinel-password-file", &GlobalOptions::sentinel_password_file, "FILE",
         "redis-sentinel://: read the sentinels' password from the first line of FILE "
         "(default: $REDSEM_SENTINEL_PASSWORD, $REDSEM_SENTINEL_PASSWORD_FILE)"},
        {"--cacert", &GlobalOptions::cacert, "FILE",
         "rediss://: trust the CA certificates in FILE instead of the system's (default: "
         "$REDSEM_CACERT)"},
        {"--cacertdir", &GlobalOptions::cacertdir, "DIR",
         "rediss://: trust the CA certificates in DIR, hashed as by c_rehash (default: "
         "$REDSEM_CACERTDIR)"},
        {"--cert", &GlobalOptions::cert, "FILE",
         "rediss://: client certificate for mutual TLS, with --key (default: $REDSEM_CERT)"},
        {"--key", &GlobalOptions::key, "FILE",
         "rediss://: private key of --cert (default: $REDSEM_KEY)"},
        {"--sni", &GlobalOptions::sni, "NAME",
         "rediss://: the server name to ask for and to verify in its certificate (default: "
         "$REDSEM_SNI, else the URL's host)"},
    };
    for (const ConnectionOption& option : k_connection_options) {
        app.add_option(option.name, options.*option.value, option.help)->type_name(option.type);
    }
    app.add_flag("--insecure", options.insecure,
                 "rediss://: do not verify the server's certificate (warns each time; "
                 "default: $REDSEM_INSECURE)");
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
    if (const std::optional<std::string> functions = env("REDSEM_FUNCTIONS")) {
        connect.functions = parse_switch(*functions, "$REDSEM_FUNCTIONS");
    }
    return connect;
}

namespace {

// A read-only, private memfd holding `secret` (and a newline) that a child inherits; its
// path as the child sees it, or nullopt when it could not be made (then the secret does not
// reach the child at all).
std::optional<std::string> inherited_secret(const std::string& secret, const char* name) {
    const int fd = memfd_create(name, MFD_ALLOW_SEALING);
    if (fd < 0) {
        return std::nullopt;
    }
    const std::string content = secret + "\n";
    const bool written =
        fchmod(fd, 0600) == 0 &&
        write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0;
    if (!written) {
        close(fd);
        return std::nullopt;
    }
    return "/proc/self/fd/" + std::to_string(fd);
}

} // namespace

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
        entries.push_back("REDSEM_CONNECT_TIMEOUT=" + *options.connect_timeout);
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

namespace {

// A caller's own loss grace, from `source`: at most the one every client has, so that a
// waiter kept out by its own grace never keeps out those queued behind it.
Milliseconds parse_loss_grace(const std::string& text, const std::string& source) {
    const Milliseconds grace = parse_duration(text, source);
    if (grace > k_default_loss_grace) {
        throw UsageError(fmt::format("{}: '{}' is longer than {}, the loss grace every client has; "
                                     "it can only shorten this caller's wait",
                                     source, printable(text),
                                     format_duration(k_default_loss_grace)));
    }
    return grace;
}

} // namespace

std::optional<Milliseconds> resolve_loss_grace(const std::optional<std::string>& option) {
    if (option) {
        return parse_loss_grace(*option, "--loss-grace");
    }
    if (auto from_env = env("REDSEM_LOSS_GRACE")) {
        return parse_loss_grace(*from_env, "$REDSEM_LOSS_GRACE");
    }
    return std::nullopt;
}

long long resolve_replicas(const std::optional<std::string>& option) {
    std::string source = "--replicas";
    std::optional<std::string> text = option;
    if (!text) {
        text = env("REDSEM_REPLICAS");
        source = "$REDSEM_REPLICAS";
    }
    if (!text) {
        return 0;
    }
    const auto replicas = parse_integer(*text, 0, k_max_replicas);
    if (!replicas) {
        throw UsageError(fmt::format("{}: '{}' is not a whole number from 0 to {}", source,
                                     printable(*text), k_max_replicas));
    }
    return *replicas;
}

long long parse_history(const std::string& text) {
    const auto history = parse_integer(text, 0, k_max_history);
    if (!history) {
        throw UsageError(fmt::format("--history: '{}' is not a whole number of events from 0 to {}",
                                     printable(text), k_max_history));
    }
    return *history;
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

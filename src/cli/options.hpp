#pragma once

#include <optional>
#include <string>
#include <vector>

#include "redis/connection.hpp"
#include "semaphore/semaphore.hpp"

namespace redsem::cli {

// Options every subcommand accepts, before or after the subcommand's name.
struct GlobalOptions {
    std::optional<std::string> url;
    std::optional<std::string> prefix;
    std::optional<Milliseconds> connect_timeout;
    std::optional<std::string> password_file;
    std::optional<std::string> sentinel_password_file; // redis-sentinel:// URLs
    // TLS, for rediss:// URLs (see TlsOptions).
    std::optional<std::string> cacert;
    std::optional<std::string> cacertdir;
    std::optional<std::string> cert;
    std::optional<std::string> key;
    std::optional<std::string> sni;
    bool insecure = false;
};

// Where to connect: --url, else $REDSEM_URL, else $REDIS_URL, else redis://127.0.0.1:6379.
// The password: from the URL, else the first line of --password-file, else $REDSEM_PASSWORD,
// else the file $REDSEM_PASSWORD_FILE, else $REDISCLI_AUTH. Warns on stderr when the password
// came from the command line, or its file can be read by other users. TLS options: each
// option, else its variable ($REDSEM_CACERT, $REDSEM_CACERTDIR, $REDSEM_CERT, $REDSEM_KEY,
// $REDSEM_SNI, $REDSEM_INSECURE); --insecure warns. The connect timeout: --connect-timeout,
// else $REDSEM_CONNECT_TIMEOUT, else 2s. Throws UsageError for a bad URL, timeout, TLS option
// or password file.
ConnectOptions resolve_connection(const GlobalOptions& options);

// How run's command reaches the same Redis, as "VARIABLE=value" entries for what was given
// on the command line: REDSEM_URL (without its password), REDSEM_CONNECT_TIMEOUT,
// REDSEM_PASSWORD_FILE, REDSEM_SENTINEL_PASSWORD_FILE and the TLS variables, files as
// absolute paths. Never a password: one given any other way than a file (the URL, a
// variable) reaches the command as REDSEM_PASSWORD_FILE=/proc/self/fd/N, a sealed memfd of
// mode 0600 that it inherits, so that a nested redsem authenticates as this one does.
std::vector<std::string> connection_for_child(const GlobalOptions& options,
                                              const ConnectOptions& connect);

// --prefix, else $REDSEM_PREFIX, else "redsem"; validated.
std::string resolve_prefix(const GlobalOptions& options);

// A caller's own loss grace given to `option`: at most the one every client has, so that a
// waiter kept out by its own grace never keeps out those queued behind it.
Milliseconds parse_loss_grace(const std::string& text, const char* option);

// `option` (--loss-grace), else $REDSEM_LOSS_GRACE, else nullopt (the semaphore's stored
// grace, or the default). Throws UsageError for a bad $REDSEM_LOSS_GRACE.
std::optional<Milliseconds> resolve_loss_grace(std::optional<Milliseconds> option);

// --replicas, else $REDSEM_REPLICAS, else 0. Throws UsageError for anything but a whole
// number from 0 to k_max_replicas.
inline constexpr long long k_max_replicas = 64;
inline constexpr const char* k_replicas_help =
    "Count a slot as held, or renewed, only once N replicas have it (WAIT), so that it "
    "survives a failover; fewer in time: exit 69 (default: $REDSEM_REPLICAS or 0)";
long long parse_replicas(const std::string& text, const char* option);
long long resolve_replicas(std::optional<long long> option);

// --max-waiting: a whole number of waiters from 1 to k_max_waiting, else UsageError.
inline constexpr long long k_max_waiting = 1'000'000;
long long parse_max_waiting(const std::string& text, const char* option);

// limit's --history: a whole number from 0 to k_max_history, else UsageError.
long long parse_history(const std::string& text, const char* option);

// Converters of option values (see typed_option.hpp): each throws UsageError naming `option`.
Milliseconds parse_connect_timeout(const std::string& text, const char* option); // above 0
long long parse_limit(const std::string& text, const char* option);
int parse_exit_code(const std::string& text, const char* option);
long long parse_pid(const std::string& text, const char* option);
Milliseconds parse_ttl(const std::string& text, const char* option);

} // namespace redsem::cli

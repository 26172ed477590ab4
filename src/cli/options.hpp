#pragma once

#include <optional>
#include <string>

#include "redis/connection.hpp"

#include <nlohmann/json_fwd.hpp>

namespace CLI {
class App;
}

namespace redsem::cli {

// Options every subcommand accepts, before or after the subcommand's name.
struct GlobalOptions {
    std::optional<std::string> url;
    std::optional<std::string> prefix;
    std::optional<std::string> connect_timeout;
};

// Prints `value` on stdout as one line of JSON (--json). Text from Redis that is not valid
// UTF-8 is shown with U+FFFD rather than failing.
void print_json(const nlohmann::json& value);

// Declares the NAME and TOKEN arguments of release and renew.
void add_name_and_token(CLI::App& command, std::string& name, std::string& token);

// Adds the global options to `app` (the main app; subcommands fall through to it).
void add_global_options(CLI::App& app, GlobalOptions& options);

// Where to connect: --url, else $REDSEM_URL, else $REDIS_URL, else redis://127.0.0.1:6379;
// the password from the URL, else $REDSEM_PASSWORD. Warns on stderr when the password came
// from the command line. The connect timeout: --connect-timeout, else $REDSEM_CONNECT_TIMEOUT,
// else 2s. Throws UsageError for a bad URL or timeout.
ConnectOptions resolve_connection(const GlobalOptions& options);

// --prefix, else $REDSEM_PREFIX, else "redsem"; validated.
std::string resolve_prefix(const GlobalOptions& options);

// --loss-grace, else $REDSEM_LOSS_GRACE, else nullopt (the semaphore's stored grace, or the
// default). Throws UsageError for a bad duration.
std::optional<Milliseconds> resolve_loss_grace(const std::optional<std::string>& option);

// Checked parsers for option values; each throws UsageError naming `option`.
long long parse_limit(const std::string& text, const char* option);
int parse_exit_code(const std::string& text, const char* option);
long long parse_pid(const std::string& text, const char* option);
Milliseconds parse_ttl(const std::string& text, const char* option);

// A token as given to release or renew: the whole token, or a unique start of it of at least
// k_min_short_token hex digits (`status` prints the first 8), looked up among NAME's holders
// and waiters. Throws UsageError for a malformed or ambiguous one (naming the candidates),
// NotHeldError when no holder or waiter has it.
inline constexpr std::size_t k_min_short_token = 4;
std::string resolve_token(Connection& connection, const std::string& prefix,
                          const std::string& name, const std::string& token);

} // namespace redsem::cli

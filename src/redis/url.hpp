#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace redsem {

inline constexpr int k_default_redis_port = 6379;
inline constexpr std::string_view k_default_redis_url = "redis://127.0.0.1:6379";

// Where and how to reach Redis, parsed from a URL.
struct RedisUrl {
    enum class Kind { tcp, unix_socket };

    Kind kind = Kind::tcp;
    bool tls = false;               // rediss://
    std::string host = "127.0.0.1"; // tcp: name or address, IPv6 without brackets
    int port = k_default_redis_port;
    std::string socket_path; // unix_socket
    int db = 0;
    std::optional<std::string> user;
    std::optional<std::string> password;

    // The URL without its password, safe for messages: "redis://alice@[::1]:6380/2",
    // "rediss://host:6380".
    std::string describe() const;
};

// Parses redis://[[user]:password@]host[:port][/db], redis://[::1]:6380, rediss://... (TLS), and
// unix://[[user]:password@]/path/to.sock[?db=N] (also redis+unix://). User and password may be
// percent-encoded. Throws UsageError that never repeats the password.
RedisUrl parse_redis_url(std::string_view text);

} // namespace redsem

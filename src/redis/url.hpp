#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redsem {

inline constexpr int k_default_redis_port = 6379;
inline constexpr int k_default_sentinel_port = 26379;
inline constexpr std::string_view k_default_redis_url = "redis://127.0.0.1:6379";

// A host (name or address, IPv6 without brackets) and a port.
struct Endpoint {
    std::string host;
    int port = 0;

    // "host:port", "[::1]:port".
    std::string describe() const;
};

// Whether a host named by a server (a MOVED or ASK reply, CLUSTER SLOTS, a sentinel) can be
// one: a name or an address of letters, digits and ".-_:%", at most 253 bytes. Anything else
// (terminal escapes from a hostile server) is refused, not followed.
bool is_host_name(std::string_view host);

// Where and how to reach Redis, parsed from a URL.
struct RedisUrl {
    // sentinel: ask the sentinels where the master named `master_name` is, then connect to it
    // as to a tcp URL with the same TLS, database and credentials.
    enum class Kind { tcp, unix_socket, sentinel };

    Kind kind = Kind::tcp;
    bool tls = false;               // rediss://, rediss-sentinel://
    std::string host = "127.0.0.1"; // tcp: name or address, IPv6 without brackets
    int port = k_default_redis_port;
    std::string socket_path; // unix_socket
    int db = 0;
    std::optional<std::string> user; // of Redis (for a sentinel URL: of the master)
    std::optional<std::string> password;
    std::vector<Endpoint> seeds;     // tcp with several hosts: the nodes of one Redis
                                     // Cluster, tried in this order (host:port is the first)
    std::vector<Endpoint> sentinels; // sentinel: whom to ask, in this order
    std::string master_name;         // sentinel

    // The URL without its password, safe for messages and parsing back to the same URL (user,
    // socket path and master name percent-encoded where needed): "redis://alice@[::1]:6380/2",
    // "rediss://host:6380", "redis-sentinel://s1:26379,s2:26379#mymaster".
    std::string describe() const;
    // The same URL pointing at one server (for a sentinel URL: that master's address; for
    // several seeds: that node).
    RedisUrl at(const Endpoint& server) const;
};

// Parses redis://[[user]:password@]host[:port][/db], redis://[::1]:6380, rediss://... (TLS),
// redis://host1[:port1],host2[:port2]... (seeds of one Redis Cluster),
// unix://[[user]:password@]/path/to.sock[?db=N] (also redis+unix://), and Lettuce's form for
// Sentinel: redis-sentinel://[[user]:password@]host1[:port1][,host2[:port2]...][/db]#MASTER
// (port 26379 by default; rediss-sentinel:// for TLS to the sentinels and the master). User and
// password may be percent-encoded. Throws UsageError that never repeats the password.
RedisUrl parse_redis_url(std::string_view text);

} // namespace redsem

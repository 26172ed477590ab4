#include "redis/url.hpp"

#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <cctype>
#include <fmt/format.h>

namespace redsem {

namespace {

// The longest host name DNS allows; an IPv6 literal (with a zone) is far shorter.
constexpr std::size_t k_max_host = 253;

[[noreturn]] void fail(std::string_view why) {
    throw UsageError(fmt::format("invalid Redis URL: {}", why));
}

int hex_value(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

std::string percent_decode(std::string_view text, std::string_view what) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        if (i + 2 >= text.size() || hex_value(text[i + 1]) < 0 || hex_value(text[i + 2]) < 0) {
            fail(fmt::format("bad %-escape in the {}", what));
        }
        out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
        i += 2;
    }
    return out;
}

// The inverse of percent_decode(): every byte outside RFC 3986's unreserved characters, the
// sub-delimiters other than ',' and `also_keep` is written %XX, so that a described URL parses back
// to the same parts (a '#' or '@' in a user name, a '?' in a socket path) and shows no control
// bytes.
std::string percent_encode(std::string_view text, std::string_view also_keep = {}) {
    constexpr std::string_view kept = "-._~!$&'()*+;=";
    std::string out;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        const bool alnum =
            (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (alnum || kept.find(c) != std::string_view::npos ||
            also_keep.find(c) != std::string_view::npos) {
            out += c;
        } else {
            out += fmt::format("%{:02X}", byte);
        }
    }
    return out;
}

int parse_db(std::string_view text) {
    auto db = parse_integer(text, 0, 1'000'000);
    if (!db) {
        fail(fmt::format("database '{}' is not a number from 0 up", printable(text)));
    }
    return *db;
}

// Splits "[user[:password]@]rest" and stores the credentials into `url`.
std::string_view take_userinfo(std::string_view rest, RedisUrl& url) {
    const std::size_t at = rest.rfind('@');
    if (at == std::string_view::npos) {
        return rest;
    }
    const std::string_view userinfo = rest.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    const std::string_view user = userinfo.substr(0, colon);
    if (!user.empty()) {
        url.user = percent_decode(user, "user name");
    }
    if (colon != std::string_view::npos) {
        url.password = percent_decode(userinfo.substr(colon + 1), "password");
    }
    return rest.substr(at + 1);
}

// Parses "host[:port]" or "[v6]:port" into an endpoint with `default_port`.
Endpoint parse_endpoint(std::string_view text, int default_port) {
    Endpoint endpoint{.host = {}, .port = default_port};
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        const std::size_t close = text.find(']');
        if (close == std::string_view::npos) {
            fail("an IPv6 address needs a closing ']'");
        }
        endpoint.host = std::string(text.substr(1, close - 1));
        const std::string_view after = text.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') {
                fail("expected ':port' after the IPv6 address");
            }
            port = after.substr(1);
            if (port.empty()) {
                fail("the port after ':' is empty");
            }
        }
    } else {
        const std::size_t colon = text.find(':');
        endpoint.host = std::string(text.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = text.substr(colon + 1);
            if (port.empty()) {
                fail("the port after ':' is empty");
            }
        }
    }
    if (endpoint.host.empty()) {
        fail("the host is missing (as in redis://127.0.0.1:6379)");
    }
    if (endpoint.host.size() > k_max_host) {
        fail(fmt::format("the host is longer than {} characters", k_max_host));
    }
    for (const char c : endpoint.host) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte <= 0x20 || byte >= 0x7F || c == '@' || c == '/' || c == '?' || c == '#' ||
            c == ',' || c == '[' || c == ']') {
            fail(fmt::format("host '{}' contains a character that cannot be in a host name",
                             printable(endpoint.host)));
        }
    }
    if (!port.empty()) {
        auto number = parse_integer(port, 1, 65535);
        if (!number) {
            // Never echoed: without its '@', "user:password" reads as "host:port".
            fail("the port is not a number from 1 to 65535 (not shown: it may be a password "
                 "without its '@')");
        }
        endpoint.port = static_cast<int>(*number);
    }
    return endpoint;
}

// Splits "[user[:password]@]hosts[/db]" into the credentials, the host part and the database.
std::string_view take_userinfo_and_db(std::string_view rest, RedisUrl& url) {
    rest = take_userinfo(rest, url);
    if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
        const std::string_view path = rest.substr(slash + 1);
        if (!path.empty()) {
            url.db = parse_db(path);
        }
        rest = rest.substr(0, slash);
    }
    if (rest.find('?') != std::string_view::npos) {
        fail("query parameters are only understood for unix:// sockets");
    }
    return rest;
}

void parse_tcp(std::string_view rest, RedisUrl& url) {
    rest = take_userinfo_and_db(rest, url);
    if (rest.find(',') != std::string_view::npos) {
        // Seeds of one Redis Cluster (checked when connecting: each must be a cluster node).
        for (;;) {
            const std::size_t comma = rest.find(',');
            url.seeds.push_back(parse_endpoint(rest.substr(0, comma), k_default_redis_port));
            if (comma == std::string_view::npos) {
                break;
            }
            rest = rest.substr(comma + 1);
        }
        url.host = url.seeds.front().host;
        url.port = url.seeds.front().port;
        return;
    }
    const Endpoint endpoint = parse_endpoint(rest, k_default_redis_port);
    url.host = endpoint.host;
    url.port = endpoint.port;
}

void parse_sentinel(std::string_view rest, RedisUrl& url) {
    url.kind = RedisUrl::Kind::sentinel;
    // The master's name follows the first '#', as a URL's fragment does (a '#' in a password
    // must be written %23, as in every URL).
    const std::size_t hash = rest.find('#');
    const std::string_view name =
        hash == std::string_view::npos ? std::string_view{} : rest.substr(hash + 1);
    if (name.empty()) {
        fail("a redis-sentinel:// URL needs the master's name after '#', as in "
             "redis-sentinel://host1,host2,host3#mymaster");
    }
    url.master_name = percent_decode(name, "master name");
    for (const char c : url.master_name) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte <= 0x20 || byte == 0x7F) {
            fail(fmt::format("the master name '{}' contains a space or a control character",
                             printable(url.master_name)));
        }
    }
    std::string_view hosts = take_userinfo_and_db(rest.substr(0, hash), url);
    for (;;) {
        const std::size_t comma = hosts.find(',');
        url.sentinels.push_back(parse_endpoint(hosts.substr(0, comma), k_default_sentinel_port));
        if (comma == std::string_view::npos) {
            break;
        }
        hosts = hosts.substr(comma + 1);
    }
    url.host = url.sentinels.front().host; // for TLS's default server name, until discovery
    url.port = url.sentinels.front().port;
}

void parse_unix(std::string_view rest, RedisUrl& url) {
    url.kind = RedisUrl::Kind::unix_socket;
    const std::size_t slash = rest.find('/');
    if (slash == std::string_view::npos) {
        fail("a unix:// URL needs an absolute socket path, as in unix:///run/redis/redis.sock");
    }
    if (slash > 0) {
        const std::string_view before = rest.substr(0, slash);
        if (before.back() != '@') {
            fail("a unix:// URL takes no host: write unix:///path/to.sock");
        }
        take_userinfo(before, url);
    }
    std::string_view path = rest.substr(slash);
    if (const std::size_t question = path.find('?'); question != std::string_view::npos) {
        std::string_view query = path.substr(question + 1);
        path = path.substr(0, question);
        while (!query.empty()) {
            const std::size_t amp = query.find('&');
            const std::string_view param = query.substr(0, amp);
            if (param.substr(0, 3) == "db=") {
                url.db = parse_db(param.substr(3));
            } else {
                fail(fmt::format("unknown parameter '{}' (only db=N is understood)",
                                 printable(param.substr(0, param.find('=')))));
            }
            query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        }
    }
    url.socket_path = percent_decode(path, "socket path");
    if (url.socket_path.size() <= 1) {
        fail("the socket path is missing");
    }
}

} // namespace

RedisUrl parse_redis_url(std::string_view text) {
    RedisUrl url;
    const std::size_t sep = text.find("://");
    if (sep == std::string_view::npos) {
        std::string hint;
        // Never echoed when it may hold a password ("user:pass@host", "user:pass"); a port
        // is all digits after the last ':', as in "cache:6380".
        const std::size_t colon = text.rfind(':');
        const bool may_hold_password =
            text.find('@') != std::string_view::npos ||
            (colon != std::string_view::npos &&
             text.substr(colon + 1).find_first_not_of("0123456789") != std::string_view::npos);
        if (!text.empty() && !may_hold_password) {
            hint = fmt::format(" (did you mean '{}{}'?)",
                               text.front() == '/' ? "unix://" : "redis://", printable(text, 100));
        }
        fail("expected redis://host[:port][/db], rediss://host[:port][/db] or "
             "unix:///path/to.sock" +
             hint);
    }
    const std::string_view scheme = text.substr(0, sep);
    const std::string_view rest = text.substr(sep + 3);
    if (scheme == "redis" || scheme == "rediss") {
        url.tls = scheme == "rediss";
        parse_tcp(rest, url);
    } else if (scheme == "redis-sentinel" || scheme == "rediss-sentinel") {
        url.tls = scheme == "rediss-sentinel";
        parse_sentinel(rest, url);
    } else if (scheme == "unix" || scheme == "redis+unix") {
        parse_unix(rest, url);
    } else {
        fail(fmt::format("unknown scheme '{}' (use redis://, rediss://, redis-sentinel://, "
                         "rediss-sentinel://, unix:// or redis+unix://)",
                         printable(scheme, 20)));
    }
    return url;
}

bool is_host_name(std::string_view host) {
    return !host.empty() && host.size() <= k_max_host &&
           std::all_of(host.begin(), host.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' ||
                      c == '_' || c == ':' || c == '%';
           });
}

std::string Endpoint::describe() const {
    // Escaped: a host may come from a server's reply.
    const bool ipv6 = host.find(':') != std::string::npos;
    return fmt::format("{}{}{}:{}", ipv6 ? "[" : "", printable(host, k_max_host), ipv6 ? "]" : "",
                       port);
}

std::string RedisUrl::describe() const {
    const std::string user_part = user ? percent_encode(*user) + "@" : std::string();
    const std::string db_part = db != 0 ? fmt::format("/{}", db) : std::string();
    switch (kind) {
    case Kind::unix_socket:
        return fmt::format("unix://{}{}{}", user_part, percent_encode(socket_path, "/:@"),
                           db != 0 ? fmt::format("?db={}", db) : std::string());
    case Kind::sentinel: {
        std::string hosts;
        for (const Endpoint& sentinel : sentinels) {
            hosts += (hosts.empty() ? "" : ",") + sentinel.describe();
        }
        return fmt::format("{}://{}{}{}#{}", tls ? "rediss-sentinel" : "redis-sentinel", user_part,
                           hosts, db_part, percent_encode(master_name));
    }
    case Kind::tcp:
        break;
    }
    std::string hosts = Endpoint{host, port}.describe();
    for (std::size_t i = 1; i < seeds.size(); ++i) {
        hosts += "," + seeds[i].describe();
    }
    return fmt::format("{}://{}{}{}", tls ? "rediss" : "redis", user_part, hosts, db_part);
}

RedisUrl RedisUrl::at(const Endpoint& server) const {
    RedisUrl url = *this;
    url.kind = Kind::tcp;
    url.host = server.host;
    url.port = server.port;
    url.seeds.clear();
    url.sentinels.clear();
    url.master_name.clear();
    return url;
}

} // namespace redsem

// Fuzzes redsem::parse_redis_url() and RedisUrl::describe().
//
// Contract checked: the parser either returns a URL or throws UsageError (anything else
// escapes and crashes the fuzzer); a parsed URL is in range; describe() never shows the
// password; and neither describe() nor an error message depends on the password at all; a
// URL's description parses back to the same URL without its password.
#include "redis/url.hpp"
#include "util/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

[[noreturn]] void violated(const char* what, std::string_view input) {
    std::fprintf(stderr, "fuzz_url: invariant violated: %s\ninput: '%.*s'\n", what,
                 static_cast<int>(input.size()), input.data());
    std::abort();
}

struct Outcome {
    std::optional<redsem::RedisUrl> url;
    std::string error; // what() when parsing failed
};

Outcome parse(std::string_view text) {
    Outcome out;
    try {
        out.url = redsem::parse_redis_url(text);
    } catch (const redsem::UsageError& e) {
        out.error = e.what();
    }
    return out;
}

// Where the raw (still percent-encoded) password sits in `text`, found the way url.cpp splits a
// URL: for redis://, between the first ':' of the userinfo and the last '@'; for unix://, the
// same within the part before the first '/', which must end in '@'.
std::optional<std::pair<std::size_t, std::size_t>> password_span(std::string_view text) {
    const std::size_t sep = text.find("://");
    if (sep == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view scheme = text.substr(0, sep);
    const std::size_t base = sep + 3;
    std::string_view rest = text.substr(base);
    if (scheme == "unix" || scheme == "redis+unix") {
        const std::size_t slash = rest.find('/');
        if (slash == std::string_view::npos || slash == 0 || rest[slash - 1] != '@') {
            return std::nullopt;
        }
        rest = rest.substr(0, slash);
    } else if (scheme == "redis-sentinel" || scheme == "rediss-sentinel") {
        rest = rest.substr(0, rest.find('#')); // the master's name follows the first '#'
    } else if (scheme != "redis" && scheme != "rediss") {
        return std::nullopt;
    }
    const std::size_t at = rest.rfind('@');
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    const std::size_t colon = rest.substr(0, at).find(':');
    if (colon == std::string_view::npos || colon + 1 == at) {
        return std::nullopt;
    }
    return std::make_pair(base + colon + 1, at - colon - 1);
}

bool same_place(const redsem::RedisUrl& a, const redsem::RedisUrl& b) {
    const auto endpoints = [](const redsem::RedisUrl& url) {
        std::vector<std::pair<std::string, int>> out;
        for (const auto& endpoint : url.sentinels) {
            out.emplace_back(endpoint.host, endpoint.port);
        }
        return out;
    };
    return a.kind == b.kind && a.tls == b.tls && a.host == b.host && a.port == b.port &&
           a.socket_path == b.socket_path && a.db == b.db && a.user == b.user &&
           a.password == b.password && endpoints(a) == endpoints(b) &&
           a.master_name == b.master_name;
}

void check_url(const redsem::RedisUrl& url, std::string_view input) {
    using Kind = redsem::RedisUrl::Kind;
    if (url.db < 0 || url.db > 1'000'000) {
        violated("db out of range", input);
    }
    if (url.tls && url.kind == Kind::unix_socket) {
        violated("TLS on a unix socket", input);
    }
    const bool tls_scheme =
        input.substr(0, 9) == "rediss://" || input.substr(0, 18) == "rediss-sentinel://";
    if (url.tls != tls_scheme) {
        violated("TLS without rediss://, or rediss:// without TLS", input);
    }
    if (url.kind == Kind::tcp) {
        if (url.host.empty() || url.port < 1 || url.port > 65535) {
            violated("tcp URL without host or with a bad port", input);
        }
    } else if (url.kind == Kind::sentinel) {
        if (url.sentinels.empty() || url.master_name.empty()) {
            violated("sentinel URL without sentinels or master name", input);
        }
        for (const auto& sentinel : url.sentinels) {
            if (sentinel.host.empty() || sentinel.port < 1 || sentinel.port > 65535) {
                violated("sentinel without host or with a bad port", input);
            }
        }
    } else if (url.socket_path.size() < 2 || url.socket_path.front() != '/') {
        violated("unix URL without an absolute socket path", input);
    }
    if (url.user && url.user->empty()) {
        violated("user is set but empty", input);
    }

    const std::string described = url.describe();
    redsem::RedisUrl without_password = url;
    without_password.password.reset();
    const std::string described_without = without_password.describe();
    // What describe() prints (and `run` hands to its command as REDSEM_URL) is the same URL.
    if (!same_place(redsem::parse_redis_url(described), without_password)) {
        violated("describe() does not parse back to the same URL", input);
    }
    if (described != described_without) {
        violated("describe() depends on the password", input);
    }
    if (url.password && !url.password->empty()) {
        const std::string shown = ":" + *url.password + "@";
        // The ":password@" form must not appear, unless the same text is in the URL's public
        // parts (a socket path "/a:pw@b", a user name "%3Apw"), which describe() shows by design.
        if (described.find(shown) != std::string::npos &&
            described_without.find(shown) == std::string::npos) {
            violated("describe() shows ':password@'", input);
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const Outcome first = parse(input);
    if (first.url) {
        check_url(*first.url, input);
    } else if (first.error.empty()) {
        violated("UsageError with an empty message", input);
    }

    // Replace the raw password by as many 'x': the outcome may differ only in the password.
    const auto span = password_span(input);
    if (!span) {
        return 0;
    }
    std::string other(input);
    other.replace(span->first, span->second, std::string(span->second, 'x'));
    const Outcome second = parse(other);
    if (first.error == "invalid Redis URL: bad %-escape in the password") {
        return 0; // the password itself is bad; "xx..." decodes, so anything may follow
    }
    if (first.url && second.url) {
        if (first.url->describe() != second.url->describe() ||
            second.url->password != std::string(span->second, 'x')) {
            violated("another password changed the parsed URL", input);
        }
    } else if (!first.url && !second.url) {
        if (first.error != second.error) {
            violated("the error message depends on the password", input);
        }
    } else {
        violated("another password changed whether the URL parses", input);
    }
    return 0;
}

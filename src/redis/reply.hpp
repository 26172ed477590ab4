#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/errors.hpp"

namespace redsem {

// A Redis reply as a plain value, so that nothing outside src/redis/ sees hiredis.
struct Reply {
    enum class Type { nil, status, error, integer, string, array };

    Type type = Type::nil;
    std::string text; // status, error and string replies
    long long integer = 0;
    std::vector<Reply> elements;

    bool is_error() const noexcept { return type == Type::error; }
    bool is_nil() const noexcept { return type == Type::nil; }

    // Typed access for replies whose shape the protocol fixes; a different shape means the
    // server and redsem disagree, and throws InternalError.
    long long as_integer() const;
    const std::string& as_string() const; // string or status
    const std::vector<Reply>& as_array() const;
    const Reply& at(std::size_t index) const;
};

// Whether `reply` is an error reply whose code (its first word) is `code`.
inline bool is_error_code(const Reply& reply, std::string_view code) {
    return reply.is_error() && reply.text.size() >= code.size() &&
           std::string_view(reply.text).substr(0, code.size()) == code &&
           (reply.text.size() == code.size() || reply.text[code.size()] == ' ');
}

// What a Redis error reply means to a redsem user: the exit code and a one-line message.
struct ReplyErrorMeaning {
    ExitCode code;
    std::string message;
    Transience transience = Transience::permanent;
};

// Maps an error reply ("NOAUTH ...", "WRONGPASS ...", "OOM ...") to its meaning. Auth and ACL
// failures are `denied`; a server that cannot serve now (LOADING, READONLY, OOM, BUSY...) is
// `unavailable`, and transient when it will pass by itself (LOADING, BUSY, TRYAGAIN,
// CLUSTERDOWN, MASTERDOWN); WRONGTYPE is `conflict`; anything else is `internal`.
ReplyErrorMeaning classify_reply_error(std::string_view error);

// Throws the Error that classify_reply_error() describes.
[[noreturn]] void throw_reply_error(std::string_view error);

} // namespace redsem

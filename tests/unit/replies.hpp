#pragma once

// Replies built by hand, as the client library hands them over after parsing (src/redis/reply.hpp),
// for the unit tests that decode them without a server. (fake_redis.hpp encodes RESP instead,
// for tests that go through a Connection.)
#include "redis/reply.hpp"

#include <string>
#include <utility>
#include <vector>

namespace redsem::replies {

// A bulk string (what a Lua string becomes).
inline Reply bulk(std::string text) {
    Reply reply;
    reply.type = Reply::Type::string;
    reply.text = std::move(text);
    return reply;
}

// An integer (what a Lua number becomes, truncated).
inline Reply integer(long long value) {
    Reply reply;
    reply.type = Reply::Type::integer;
    reply.integer = value;
    return reply;
}

inline Reply array(std::vector<Reply> elements) {
    Reply reply;
    reply.type = Reply::Type::array;
    reply.elements = std::move(elements);
    return reply;
}

} // namespace redsem::replies

// Fuzzes the handling of what Redis sends back:
//
//  - redsem::parse_record(), which parses the holder/waiter entries stored in a semaphore's
//    info hash (anyone with access to Redis can edit them): it must never throw or crash;
//  - redsem::classify_reply_error(): always an exit code and a non-empty message;
//  - the decoders of the scripts' replies (redsem::wire, semaphore/wire.cpp): any reply
//    decodes or throws redsem::InternalError, nothing else;
//  - the hiredis 0.14 reply reader as linked (the system library, not instrumented for
//    coverage, but its allocations and libc calls are checked by ASan), fed the input in one
//    piece and byte by byte, as a socket may deliver it: both must give the same replies. Each
//    reply goes through the same conversion as Connection::read_reply() (redis/connection.cpp)
//    and the typed accessors of redsem::Reply.
#include "redis/reply.hpp"
#include "semaphore/record.hpp"
#include "semaphore/wire.hpp"
#include "util/errors.hpp"

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "fuzz_reply: invariant violated: %s\n", what);
    std::abort();
}

// A copy of convert() in redis/connection.cpp, which is file-local there.
redsem::Reply convert(const redisReply& raw) {
    using Type = redsem::Reply::Type;
    redsem::Reply reply;
    switch (raw.type) {
    case REDIS_REPLY_STATUS:
        reply.type = Type::status;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_ERROR:
        reply.type = Type::error;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_STRING:
        reply.type = Type::string;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_INTEGER:
        reply.type = Type::integer;
        reply.integer = raw.integer;
        break;
    case REDIS_REPLY_ARRAY:
        reply.type = Type::array;
        reply.elements.reserve(raw.elements);
        for (std::size_t i = 0; i < raw.elements; ++i) {
            if (raw.element[i] == nullptr) {
                violated("hiredis returned an array with a null element");
            }
            reply.elements.push_back(convert(*raw.element[i]));
        }
        break;
    default:
        reply.type = Type::nil;
        break;
    }
    return reply;
}

// hiredis NUL-terminates strings; reading str[len] makes ASan check the allocation's size.
void check_raw(const redisReply& raw) {
    if (raw.type == REDIS_REPLY_STATUS || raw.type == REDIS_REPLY_ERROR ||
        raw.type == REDIS_REPLY_STRING) {
        if (raw.str == nullptr || raw.str[raw.len] != '\0') {
            violated("hiredis string reply is not NUL-terminated at len");
        }
    }
    if (raw.type == REDIS_REPLY_ARRAY) {
        for (std::size_t i = 0; i < raw.elements; ++i) {
            if (raw.element[i] != nullptr) {
                check_raw(*raw.element[i]);
            }
        }
    }
}

// Uses the reply the way the protocol code does, through the typed accessors.
// Every decoder of redsem::wire on `reply`: a value, or InternalError (an escaping
// exception of another type crashes the fuzzer).
void decode_reply(const redsem::Reply& reply) {
    namespace wire = redsem::wire;
    const auto attempt = [](auto&& decode) {
        try {
            decode();
        } catch (const redsem::InternalError&) {
        }
    };
    attempt([&] { (void)wire::decode_acquire(reply); });
    attempt([&] { (void)wire::decode_release(reply); });
    attempt([&] { (void)wire::decode_renew(reply); });
    attempt([&] { (void)wire::decode_limit(reply); });
    attempt([&] { (void)wire::decode_pause(reply); });
    attempt([&] { (void)wire::decode_view(reply); });
    attempt([&] { (void)wire::decode_lost(reply); });
    attempt([&] { (void)wire::decode_gc(reply); });
    attempt([&] { (void)wire::wrong_type(reply); });
    attempt([&] { (void)wire::newer_format(reply); });
    attempt([&] { (void)wire::demanded_proof(reply); });
    if (reply.type == redsem::Reply::Type::string) {
        attempt([&] { (void)wire::decode_hand_over(reply.text); });
    }
}

void use_reply(const redsem::Reply& reply) {
    decode_reply(reply);
    try {
        (void)reply.as_integer();
    } catch (const redsem::InternalError&) {
    }
    try {
        (void)reply.as_string();
    } catch (const redsem::InternalError&) {
    }
    try {
        (void)reply.at(0);
        (void)reply.at(reply.as_array().size());
        violated("Reply::at() past the end did not throw");
    } catch (const redsem::InternalError&) {
    }
    if (reply.is_error()) {
        if (redsem::classify_reply_error(reply.text).message.empty()) {
            violated("classify_reply_error() gave an empty message");
        }
        try {
            redsem::throw_reply_error(reply.text);
        } catch (const redsem::Error& e) {
            if (e.exit_code() == 0) {
                violated("throw_reply_error() threw exit code 0");
            }
        }
    }
    if (reply.type == redsem::Reply::Type::array) {
        for (const auto& element : reply.elements) {
            use_reply(element);
        }
    }
}

// A canonical rendering, to compare what the two readers produced.
void render(const redsem::Reply& reply, std::string& out) {
    out += std::to_string(static_cast<int>(reply.type));
    out += ':';
    out += std::to_string(reply.text.size());
    out += ':';
    out += reply.text;
    out += ':';
    out += std::to_string(reply.integer);
    out += '[';
    for (const auto& element : reply.elements) {
        render(element, out);
    }
    out += ']';
}

struct ReaderDeleter {
    void operator()(redisReader* reader) const { redisReaderFree(reader); }
};
using ReaderPtr = std::unique_ptr<redisReader, ReaderDeleter>;

// Takes every complete reply out of the reader. Returns false once the reader failed.
bool drain(redisReader* reader, std::string& rendered) {
    for (;;) {
        void* raw = nullptr;
        if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
            if (raw != nullptr) {
                violated("redisReaderGetReply() failed but returned a reply");
            }
            return false;
        }
        if (raw == nullptr) {
            return true;
        }
        std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                           freeReplyObject);
        check_raw(*reply);
        const redsem::Reply converted = convert(*reply);
        use_reply(converted);
        render(converted, rendered);
        rendered += '\n';
    }
}

// hiredis allocates an array's element pointers as soon as it reads the header "*N\r\n", and
// 0.14 accepts any N up to INT_MAX (1.x caps it at 2^32-1): "*2147483647\r\n" asks calloc()
// for 16 GiB. That is the library working as designed (glibc hands out untouched zero pages),
// but it trips libFuzzer's malloc limit, so inputs declaring huge arrays skip the reader.
bool declares_huge_array(const char* data, std::size_t size) {
    constexpr long long k_max_elements = 1 << 20;
    for (std::size_t i = 0; i < size; ++i) {
        if (data[i] != '*') {
            continue;
        }
        std::size_t k = i + 1;
        if (k < size && data[k] == '+') {
            ++k;
        }
        long long count = 0;
        for (; k < size && data[k] >= '0' && data[k] <= '9'; ++k) {
            count = count * 10 + (data[k] - '0');
            if (count > k_max_elements) {
                return true;
            }
        }
    }
    return false;
}

void fuzz_hiredis(const char* data, std::size_t size) {
    if (declares_huge_array(data, size)) {
        return;
    }
    std::string whole;
    bool whole_ok = false;
    {
        ReaderPtr reader(redisReaderCreate());
        if (!reader) {
            return;
        }
        whole_ok =
            redisReaderFeed(reader.get(), data, size) == REDIS_OK && drain(reader.get(), whole);
    }
    std::string bytewise;
    bool bytewise_ok = true;
    {
        ReaderPtr reader(redisReaderCreate());
        if (!reader) {
            return;
        }
        for (std::size_t i = 0; i < size && bytewise_ok; ++i) {
            bytewise_ok = redisReaderFeed(reader.get(), data + i, 1) == REDIS_OK &&
                          drain(reader.get(), bytewise);
        }
    }
    if (whole_ok != bytewise_ok || whole != bytewise) {
        std::fprintf(stderr, "whole (%s):\n%s\nbyte by byte (%s):\n%s\n", whole_ok ? "ok" : "error",
                     whole.c_str(), bytewise_ok ? "ok" : "error", bytewise.c_str());
        violated("feeding the reader byte by byte gave other replies than in one piece");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);

    // Must not throw: an escaping exception crashes the fuzzer.
    if (const auto record = redsem::parse_record(input)) {
        if (record->kind == redsem::Record::Kind::waiter &&
            (record->slot != -1 || record->fence != 0)) {
            violated("a waiter record has a slot or a fence");
        }
    }

    if (redsem::classify_reply_error(input).message.empty()) {
        violated("classify_reply_error() gave an empty message");
    }

    fuzz_hiredis(input.data(), input.size());
    return 0;
}

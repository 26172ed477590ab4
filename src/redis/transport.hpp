#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "redis/url.hpp"

namespace redsem {

// How to check the server of a rediss:// URL, and who we are to it.
struct TlsOptions {
    std::optional<std::string> ca_file;   // trust these CAs instead of the system's
    std::optional<std::string> ca_dir;    // a hashed directory of CAs (c_rehash)
    std::optional<std::string> cert_file; // a client certificate (chain), for mutual TLS
    std::optional<std::string> key_file;  // its private key
    std::optional<std::string> sni;       // the name to ask for and to verify (default: host)
    bool insecure = false;                // skip verification of the server's certificate
};

// The result of Transport::read_some().
struct ReadResult {
    enum class Status { data, closed, timed_out, interrupted };
    Status status = Status::data;
    std::size_t size = 0; // bytes read, with Status::data
};

// A byte stream to Redis: a non-blocking socket (TCP or Unix), close-on-exec, with poll()-based
// deadlines, and TLS over it (OpenSSL) for rediss:// URLs. Knows nothing of the protocol.
class Transport {
public:
    using Clock = std::chrono::steady_clock;

    // Connects to `url` and, for rediss://, completes the TLS handshake, all within
    // `connect_timeout`.
    // Throws UnavailableError (unreachable, refused, no handshake in time, the certificate
    // failed verification), DeniedError when the server refused our certificate, UsageError for
    // a CA, certificate or key file that cannot be used.
    static std::unique_ptr<Transport> open(const RedisUrl& url, const TlsOptions& tls,
                                           std::chrono::milliseconds connect_timeout);

    virtual ~Transport() = default;
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    // Sends all of `data` by `deadline`; throws ConnectionLost when the stream broke or the
    // server would not take the bytes in time.
    virtual void write_all(std::string_view data, Clock::time_point deadline) = 0;

    // Reads what has come, at least one byte, waiting until `deadline` (and, past it, looking
    // once more: a process resumed after a stop finds the reply that came meanwhile). Returns
    // early with Status::interrupted when `interrupt_fd` (>= 0) becomes readable first. Throws
    // ConnectionLost when the stream broke, DeniedError when the server refused our identity
    // (TLS 1.3 reports a missing client certificate only after the handshake).
    virtual ReadResult read_some(char* buffer, std::size_t size, Clock::time_point deadline,
                                 int interrupt_fd) = 0;

protected:
    Transport() = default;
};

// The OpenSSL version redsem runs with (for --version).
std::string openssl_version();

} // namespace redsem

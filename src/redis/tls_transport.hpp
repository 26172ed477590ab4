#pragma once

// TLS over a socket, for rediss:// URLs (src/redis/ only).

#include <memory>

#include "redis/socket.hpp"
#include "redis/transport.hpp"

namespace redsem::net {

// Connects to `url` and completes the TLS handshake by `deadline`, checking the server as
// `tls` says. Throws as Transport::open() does.
std::unique_ptr<Transport> open_tls(const RedisUrl& url, const TlsOptions& tls,
                                    Clock::time_point deadline, Milliseconds connect_timeout);

} // namespace redsem::net

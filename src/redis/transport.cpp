#include "redis/transport.hpp"

#include "redis/socket.hpp"
#include "redis/tls_transport.hpp"

namespace redsem {

std::unique_ptr<Transport> Transport::open(const RedisUrl& url, const TlsOptions& tls,
                                           std::chrono::milliseconds connect_timeout) {
    const auto deadline = Clock::now() + connect_timeout;
    if (!url.tls) {
        return net::plain_transport(net::open_socket(url, deadline, connect_timeout),
                                    url.describe());
    }
    return net::open_tls(url, tls, deadline, connect_timeout);
}

} // namespace redsem

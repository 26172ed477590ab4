#include "support/cutting_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace redsem::test {

namespace {

int connect_to(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

} // namespace

CuttingProxy::CuttingProxy(int redis_port) : m_redis_port(redis_port) {
    m_listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    if (bind(m_listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(m_listener, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
        listen(m_listener, 16) != 0) {
        throw std::runtime_error("proxy cannot listen");
    }
    m_port = ntohs(address.sin_port);
    m_thread = std::thread([this] { serve(); });
}

CuttingProxy::~CuttingProxy() {
    m_stop = true;
    shutdown(m_listener, SHUT_RDWR);
    close(m_listener);
    m_thread.join();
}

void CuttingProxy::serve() {
    std::vector<std::thread> relays;
    bool first = true;
    while (!m_stop) {
        const int client = accept(m_listener, nullptr, nullptr);
        if (client < 0) {
            break;
        }
        relays.emplace_back([this, client, cut = first] { relay(client, cut); });
        first = false;
    }
    for (auto& relay : relays) {
        relay.join();
    }
}

void CuttingProxy::relay(int client, bool cut) {
    const int server = connect_to(m_redis_port);
    char buffer[65536];
    while (server >= 0 && !m_stop) {
        pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
        if (poll(fds, 2, 100) <= 0) {
            continue;
        }
        if (fds[0].revents != 0) {
            const ssize_t got = read(client, buffer, sizeof(buffer));
            if (got <= 0 || write(server, buffer, static_cast<size_t>(got)) != got) {
                break;
            }
        }
        if (fds[1].revents != 0) {
            const ssize_t got = read(server, buffer, sizeof(buffer));
            if (got <= 0) {
                break;
            }
            if (cut && buffer[0] != '-') {
                ++m_cuts;
                break; // the reply is lost with the connection
            }
            if (write(client, buffer, static_cast<size_t>(got)) != got) {
                break;
            }
        }
    }
    close(client);
    if (server >= 0) {
        close(server);
    }
}

} // namespace redsem::test

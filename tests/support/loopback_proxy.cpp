#include "support/loopback_proxy.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace redsem::test {

namespace {

sockaddr_in loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port));
    return address;
}

int connect_to(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = loopback(port);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// A send that reports a peer gone as a short count, not as SIGPIPE: the waiter a test cuts off
// may close its end while the proxy writes to it.
long long send_quietly(int fd, const char* data, long long size) {
    return send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL);
}

} // namespace

int listen_on_loopback(int& port) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = loopback(0);
    socklen_t length = sizeof(address);
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
        listen(fd, 16) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        throw std::runtime_error("cannot listen on a loopback port");
    }
    port = ntohs(address.sin_port);
    return fd;
}

LoopbackProxy::LoopbackProxy(int server_port, Filter filter)
    : m_server_port(server_port), m_filter(std::move(filter)) {
    m_listener = listen_on_loopback(m_port);
    m_thread = std::thread([this] { serve(); });
}

LoopbackProxy::~LoopbackProxy() {
    m_stop = true;
    shutdown(m_listener, SHUT_RDWR);
    close(m_listener);
    m_thread.join();
}

void LoopbackProxy::serve() {
    std::vector<std::thread> relays;
    int connection = 0;
    while (!m_stop) {
        const int client = accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) {
            break;
        }
        relays.emplace_back([this, client, connection] { relay(client, connection); });
        ++connection;
    }
    for (auto& relay : relays) {
        relay.join();
    }
}

void LoopbackProxy::relay(int client, int connection) {
    const int server = connect_to(m_server_port);
    char buffer[65536];
    while (server >= 0 && !m_stop) {
        pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
        if (poll(fds, 2, 100) <= 0) {
            continue;
        }
        if (fds[0].revents != 0) {
            const ssize_t got = read(client, buffer, sizeof(buffer));
            if (got <= 0 || send_quietly(server, buffer, got) != got) {
                break;
            }
        }
        if (fds[1].revents != 0) {
            const ssize_t got = read(server, buffer, sizeof(buffer));
            if (got <= 0) {
                break;
            }
            const long long pass = m_filter(connection, buffer, got);
            if (pass < 0) {
                break; // what the server sent is lost with the connection
            }
            if (pass > 0 && send_quietly(client, buffer, pass) != pass) {
                break;
            }
        }
    }
    close(client);
    if (server >= 0) {
        close(server);
    }
}

CuttingProxy::CuttingProxy(int redis_port)
    : m_proxy(redis_port, [this](int connection, const char* data, long long size) {
          if (connection == 0 && data[0] != '-') {
              ++m_cuts;
              return -1LL;
          }
          return size;
      }) {}

StallingProxy::StallingProxy(int server_port, long long budget)
    : m_left(budget), m_proxy(server_port, [this](int, const char*, long long size) {
          const long long left = m_left.load();
          if (left < 0) {
              return size;
          }
          const long long pass = std::min(left, size);
          m_left -= pass;
          return pass;
      }) {}

} // namespace redsem::test

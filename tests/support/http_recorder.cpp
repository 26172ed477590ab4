#include "support/http_recorder.hpp"

#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace redsem::test {

namespace {

constexpr int k_poll_ms = 50; // how often the loop looks at the stop flag

// The value of header `name` in `head` (its lines, case as sent), or "".
std::string header(const std::string& head, const std::string& name) {
    std::size_t at = 0;
    while ((at = head.find("\r\n", at)) != std::string::npos) {
        at += 2;
        if (strncasecmp(head.c_str() + at, (name + ":").c_str(), name.size() + 1) == 0) {
            const std::size_t from = head.find_first_not_of(' ', at + name.size() + 1);
            return head.substr(from, head.find("\r\n", from) - from);
        }
    }
    return "";
}

} // namespace

HttpRecorder::HttpRecorder(int status) : m_status(status) {
    m_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0; // a free port
    socklen_t length = sizeof(address);
    if (m_listener < 0 || bind(m_listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        listen(m_listener, 16) != 0 ||
        getsockname(m_listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        throw std::runtime_error(std::string("HttpRecorder: ") + std::strerror(errno));
    }
    m_port = ntohs(address.sin_port);
    m_thread = std::thread([this] { serve(); });
}

HttpRecorder::~HttpRecorder() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_changed.notify_all();
    m_thread.join();
    close(m_listener);
}

std::string HttpRecorder::url() const {
    return "http://127.0.0.1:" + std::to_string(m_port);
}

std::vector<HttpRecorder::Request> HttpRecorder::requests() const {
    std::lock_guard lock(m_mutex);
    return m_requests;
}

bool HttpRecorder::wait_for(std::size_t count, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(m_mutex);
    return m_changed.wait_for(lock, timeout, [&] { return m_requests.size() >= count; });
}

void HttpRecorder::hold_answers(bool hold) {
    {
        std::lock_guard lock(m_mutex);
        m_hold = hold;
    }
    m_changed.notify_all();
}

void HttpRecorder::serve() {
    for (;;) {
        {
            std::lock_guard lock(m_mutex);
            if (m_stop) {
                return;
            }
        }
        pollfd wait{m_listener, POLLIN, 0};
        if (poll(&wait, 1, k_poll_ms) == 1) {
            const int client = accept4(m_listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (client >= 0) {
                handle(client);
                close(client);
            }
        }
    }
}

void HttpRecorder::handle(int client) {
    Request request;
    std::size_t head_end = std::string::npos;
    std::size_t wanted = 0;
    char buffer[4096];
    // At most 5 s for the whole request, as read in pieces.
    for (int polls = 0; polls < 5000 / k_poll_ms;) {
        if (head_end != std::string::npos && request.raw.size() >= head_end + 4 + wanted) {
            break;
        }
        pollfd wait{client, POLLIN, 0};
        if (poll(&wait, 1, k_poll_ms) != 1) {
            ++polls;
            continue;
        }
        const ssize_t got = recv(client, buffer, sizeof(buffer), 0);
        if (got <= 0) {
            return; // closed before a whole request: not one
        }
        request.raw.append(buffer, static_cast<std::size_t>(got));
        if (head_end == std::string::npos) {
            head_end = request.raw.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                const std::string head = request.raw.substr(0, head_end + 2);
                const std::string length = header(head, "Content-Length");
                wanted = length.empty() ? 0 : std::stoul(length);
            }
        }
    }
    if (head_end == std::string::npos) {
        return;
    }
    const std::size_t method_end = request.raw.find(' ');
    const std::size_t path_end = request.raw.find(' ', method_end + 1);
    request.method = request.raw.substr(0, method_end);
    request.path = request.raw.substr(method_end + 1, path_end - method_end - 1);
    request.body = request.raw.substr(head_end + 4, wanted);
    std::unique_lock lock(m_mutex);
    m_requests.push_back(request);
    m_changed.notify_all();
    m_changed.wait(lock, [&] { return !m_hold || m_stop; });
    lock.unlock();
    const std::string answer = "HTTP/1.1 " + std::to_string(m_status) +
                               " Whatever\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK";
    send(client, answer.data(), answer.size(), MSG_NOSIGNAL); // (the client may have gone)
}

} // namespace redsem::test

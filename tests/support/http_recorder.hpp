#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace redsem::test {

// A real HTTP server on a free loopback port, for the tests of `run --ping`: it reads each
// request whole (the request line, the headers and a Content-Length body), records it, and
// answers it with `status`, one connection at a time; while answers are held, it records
// requests and answers none until they are let go. Stopped by the destructor.
class HttpRecorder {
public:
    struct Request {
        std::string method;
        std::string path;
        std::string body;
        std::string raw; // every byte received
    };

    explicit HttpRecorder(int status = 200);
    ~HttpRecorder();
    HttpRecorder(const HttpRecorder&) = delete;
    HttpRecorder& operator=(const HttpRecorder&) = delete;

    // "http://127.0.0.1:PORT".
    std::string url() const;
    std::vector<Request> requests() const;
    // Whether `count` requests came within `timeout`.
    bool wait_for(std::size_t count, std::chrono::milliseconds timeout) const;
    // Holds the answers from now on (true), or lets them go (false).
    void hold_answers(bool hold);

private:
    void serve();
    void handle(int client);

    int m_status;
    int m_listener = -1;
    int m_port = 0;
    mutable std::mutex m_mutex;
    mutable std::condition_variable m_changed;
    std::vector<Request> m_requests;
    bool m_hold = false;
    bool m_stop = false;
    std::thread m_thread;
};

} // namespace redsem::test

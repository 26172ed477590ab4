#include "process/signal_watch.hpp"

#include "util/errors.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace redsem {

namespace {

// Signal handlers can only reach globals; SignalWatch allows one instance at a time.
std::atomic<int> g_first_signal{0};
int g_pipe[2] = {-1, -1};
sigset_t g_caught = [] {
    sigset_t none;
    sigemptyset(&none);
    return none;
}();

extern "C" void on_signal(int signal) {
    const int saved_errno = errno;
    int expected = 0;
    g_first_signal.compare_exchange_strong(expected, signal);
    const char byte = static_cast<char>(signal);
    // Non-blocking: when the pipe is full, the fd is readable already.
    [[maybe_unused]] const ssize_t ignored = write(g_pipe[1], &byte, 1);
    errno = saved_errno;
}

} // namespace

SignalWatch::SignalWatch(std::initializer_list<int> signals)
    : SignalWatch(std::span<const int>(signals.begin(), signals.size())) {}

SignalWatch::SignalWatch(std::span<const int> signals) {
    if (g_pipe[0] >= 0) {
        throw InternalError("only one SignalWatch may exist at a time");
    }
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        throw InternalError(std::string("cannot create a pipe: ") + std::strerror(errno));
    }
    g_first_signal = 0;
    for (const int signal : signals) {
        add(signal);
    }
}

void SignalWatch::add(int signal) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; // no SA_RESTART: a blocking call returns EINTR and rechecks
    Watched& watched = m_watched.emplace_back(Watched{signal, {}});
    sigaddset(&g_caught, signal);
    sigaction(signal, &action, &watched.previous);
}

const sigset_t& caught_signals() noexcept {
    return g_caught;
}

SignalWatch::~SignalWatch() {
    for (const Watched& watched : m_watched) {
        sigaction(watched.signal, &watched.previous, nullptr);
    }
    close(g_pipe[0]);
    close(g_pipe[1]);
    g_pipe[0] = g_pipe[1] = -1;
}

int SignalWatch::fd() const noexcept {
    return g_pipe[0];
}

int SignalWatch::received() const noexcept {
    return g_first_signal.load();
}

std::vector<int> SignalWatch::take_pending() {
    std::vector<int> signals;
    char bytes[64];
    for (;;) {
        const ssize_t got = read(g_pipe[0], bytes, sizeof(bytes));
        if (got <= 0) {
            return signals;
        }
        for (ssize_t i = 0; i < got; ++i) {
            signals.push_back(static_cast<unsigned char>(bytes[i]));
        }
    }
}

} // namespace redsem

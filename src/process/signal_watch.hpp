#pragma once

#include <csignal>
#include <initializer_list>
#include <span>
#include <vector>

namespace redsem {

// Catches the given signals for its lifetime (one instance at a time per process). Each
// caught signal is remembered and makes fd() readable, so a poll()-based wait can return at
// once. The destructor restores the previous handlers.
class SignalWatch {
public:
    explicit SignalWatch(std::initializer_list<int> signals);
    explicit SignalWatch(std::span<const int> signals);
    ~SignalWatch();
    SignalWatch(const SignalWatch&) = delete;
    SignalWatch& operator=(const SignalWatch&) = delete;

    // Starts watching one more signal.
    void add(int signal);

    // Readable once any watched signal has arrived.
    int fd() const noexcept;
    // The first signal caught, or 0.
    int received() const noexcept;
    // Every signal caught since the last call, in order (drains fd()).
    std::vector<int> take_pending();

private:
    struct Watched {
        int signal;
        struct sigaction previous; // restored at the end
    };
    std::vector<Watched> m_watched;
};

// Every signal a SignalWatch has caught in this process, watched now or before. A child
// started with vfork() resets only these: it runs in this process's memory until it execs,
// so a handler of ours must not run there. Read without locks (async-signal-safe).
const sigset_t& caught_signals() noexcept;

} // namespace redsem

#pragma once

#include <algorithm>
#include <chrono>

namespace redsem {

// Delays between retries of a failed Redis call: 100 ms, doubling up to 1 s. Every retry loop
// (acquire's reconnects, the heartbeat's renewals, the keeper's release) waits by this one.
class Backoff {
public:
    using Milliseconds = std::chrono::milliseconds;
    static constexpr Milliseconds k_first{100};
    static constexpr Milliseconds k_max{1'000};

    // The delay to wait now; the next one is twice as long, up to k_max.
    Milliseconds next() {
        const Milliseconds delay = m_delay;
        m_delay = std::min(m_delay * 2, k_max);
        return delay;
    }
    // After a success: the next failure starts again from k_first.
    void reset() { m_delay = k_first; }

private:
    Milliseconds m_delay = k_first;
};

} // namespace redsem

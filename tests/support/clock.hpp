#pragma once

#include <ctime>

namespace redsem::test {

// The observer's clock: the machine's real clock now (CLOCK_REALTIME) in nanoseconds, the
// clock `date +%s%N` reads, as the commands' logs write it (helpers.hpp's logging_body(), the
// chaos harness).
inline long long real_now_ns() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<long long>(now.tv_sec) * 1'000'000'000LL + now.tv_nsec;
}

} // namespace redsem::test

#include "semaphore/held_slot.hpp"

#include "redis/retry_policy.hpp"

#include <thread>

namespace redsem {

HeldSlot::HeldSlot(HeldSlot&& other) noexcept
    : m_semaphore(other.m_semaphore), m_lease(std::move(other.m_lease)) {
    other.m_semaphore = nullptr;
}

HeldSlot::~HeldSlot() {
    try {
        release();
    } catch (const std::exception&) {
    }
}

bool HeldSlot::release(const std::optional<CommandEnd>& end) {
    return release(end, false, Milliseconds{0}) == ReleaseOutcome::released;
}

ReleaseOutcome HeldSlot::release_once(const CommandEnd& end, Milliseconds beyond_lease) {
    return release(end, true, end.status == 0 ? beyond_lease : Milliseconds{0});
}

ReleaseOutcome HeldSlot::release(const std::optional<CommandEnd>& end, bool once,
                                 Milliseconds beyond_lease) {
    if (m_semaphore == nullptr) {
        return ReleaseOutcome::not_found;
    }
    Semaphore* semaphore = m_semaphore;
    m_semaphore = nullptr;
    // While the lease lasts (after it the server hands the slot on by itself): a failover, a
    // slot migration or a connection that died while idle is retried; a Redis that cannot be
    // reached at all is not waited for (a release at exit would hold up the caller). A run's
    // success that must reach its occurrence's claim is worth waiting for beyond the lease,
    // also through a Redis that refuses connections while it restarts (it was reached before:
    // the slot was granted).
    const auto lease_left = std::chrono::ceil<Milliseconds>(m_lease.ends_by() - BootClock::now());
    const bool keep_trying = beyond_lease > Milliseconds{0};
    RetryPolicy retries(std::max(lease_left, Milliseconds{0}) + beyond_lease, RetryPolicy::k_calls,
                        keep_trying);
    for (;;) {
        try {
            return semaphore->release(m_lease.token, Releaser::owner, end, once);
        } catch (const Error& error) {
            // A second try after a lost reply finds nothing to release, which is fine.
            const std::optional<Milliseconds> delay = retries.after(error);
            if (!delay) {
                throw;
            }
            std::this_thread::sleep_for(*delay);
        }
    }
}

} // namespace redsem

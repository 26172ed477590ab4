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

bool HeldSlot::release(std::optional<int> exit_status) {
    if (m_semaphore == nullptr) {
        return false;
    }
    Semaphore* semaphore = m_semaphore;
    m_semaphore = nullptr;
    // While the lease lasts (after it the server hands the slot on by itself): a failover, a
    // slot migration or a connection that died while idle is retried; a Redis that cannot be
    // reached at all is not waited for (a release at exit would hold up the caller).
    const auto lease_left = std::chrono::ceil<Milliseconds>(m_lease.ends_by() - BootClock::now());
    RetryPolicy retries(std::max(lease_left, Milliseconds{0}));
    for (;;) {
        try {
            return semaphore->release(m_lease.token, Releaser::owner, exit_status) ==
                   ReleaseOutcome::released;
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

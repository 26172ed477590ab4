#include "semaphore/held_slot.hpp"

#include "util/backoff.hpp"

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

bool HeldSlot::release() {
    if (m_semaphore == nullptr) {
        return false;
    }
    Semaphore* semaphore = m_semaphore;
    m_semaphore = nullptr;
    Backoff backoff;
    bool reconnected = false;
    for (;;) {
        try {
            return semaphore->release(m_lease.token) == ReleaseOutcome::released;
        } catch (const ConnectionLost&) {
            // The connection may have died while idle; the connection reconnects on the next
            // command. A second try after a lost reply finds nothing to release, which is fine.
            if (reconnected) {
                throw;
            }
            reconnected = true;
        } catch (const Error& error) {
            // A failover or a slot migration under way: try again while the lease lasts (after
            // it the server hands the slot on by itself).
            const Milliseconds delay = backoff.next();
            if (error.transience() != Transience::transient ||
                BootClock::now() + delay >= m_lease.ends_by()) {
                throw;
            }
            std::this_thread::sleep_for(delay);
        }
    }
}

} // namespace redsem

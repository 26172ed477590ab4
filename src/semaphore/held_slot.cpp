#include "semaphore/held_slot.hpp"

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
    try {
        return semaphore->release(m_lease.token) == ReleaseOutcome::released;
    } catch (const ConnectionLost&) {
        // The connection may have died while idle; the connection reconnects on the next
        // command. A second try after a lost reply finds nothing to release, which is fine.
        return semaphore->release(m_lease.token) == ReleaseOutcome::released;
    }
}

} // namespace redsem

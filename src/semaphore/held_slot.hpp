#pragma once

#include "semaphore/semaphore.hpp"

namespace redsem {

// A slot this process holds. Move-only; the destructor releases it (errors there are
// swallowed: the lease then simply runs out by its ttl).
class HeldSlot {
public:
    HeldSlot(Semaphore& semaphore, Lease lease)
        : m_semaphore(&semaphore), m_lease(std::move(lease)) {}
    ~HeldSlot();
    HeldSlot(HeldSlot&& other) noexcept;
    HeldSlot& operator=(HeldSlot&&) = delete;
    HeldSlot(const HeldSlot&) = delete;
    HeldSlot& operator=(const HeldSlot&) = delete;

    const Lease& lease() const noexcept { return m_lease; }

    // Releases now; true when the slot was still held. Tries once more after a lost
    // connection, and keeps trying through a transient error (a failover, a slot migration)
    // while the lease lasts. Throws Error on other Redis failures.
    // `end`: how `run`'s command ended, kept with the released event.
    bool release(const std::optional<CommandEnd>& end = std::nullopt);

    // The release of a `run --once-per` whose command ended as `end` says: as release(),
    // but a success marks the occurrence done even when the lease ran out before the release
    // came (ReleaseOutcome::late_*), so the release of a success keeps trying through a Redis
    // out of reach for up to `beyond_lease` after the lease's end. Throws Error when Redis
    // could not be reached in time or refused.
    ReleaseOutcome release_once(const CommandEnd& end, Milliseconds beyond_lease);

private:
    ReleaseOutcome release(const std::optional<CommandEnd>& end, bool once,
                           Milliseconds beyond_lease);

    Semaphore* m_semaphore; // null once released or moved from
    Lease m_lease;
};

} // namespace redsem

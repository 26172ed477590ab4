#pragma once

#include <chrono>

#include "redis/sentinel.hpp"
#include "redis/topology.hpp"

namespace redsem {

// Through sentinels, how often a connection in use asks a sentinel again whether its server
// is still the master: after a failover the old master may go on accepting writes (that will
// be lost) until the sentinels turn it into a replica, seconds later.
inline constexpr Milliseconds k_master_recheck{1'000};
// ... asking one sentinel, and waiting at most this for it (the connect timeout if shorter).
inline constexpr Milliseconds k_recheck_timeout{500};

// The master that the sentinels of a redis-sentinel:// URL name. Connecting asks them where it
// is and confirms with ROLE that it is one; a master that cannot be reached or is not one is a
// failover under way (a transient error). A link in use asks a sentinel again at most every
// k_master_recheck, before a command, and moves to the new master when there is one. A
// READONLY or UNBLOCKED reply means the server stopped being the master and nothing ran: the
// command is sent once more, to the master found anew.
class SentinelTopology final : public Topology {
public:
    explicit SentinelTopology(const ConnectOptions& options) : Topology(options) {}

    std::string describe() const override;
    void begin_batch() override { m_found_anew = false; }
    std::optional<Endpoint> destination(std::string_view key) const override;
    void connect() override;
    ReplyVerdict judge(const Reply& reply) override;
    bool primary_changed(Milliseconds fresh) override;
    Milliseconds outage_window() const override { return k_failover_window; }
    std::vector<Endpoint> primaries() override { return {}; }

private:
    using Clock = std::chrono::steady_clock;

    // The master now, as the sentinels say (see ask_sentinels()).
    Endpoint find_master(std::size_t tries, Milliseconds timeout);
    // Within `connect_timeout`: what the sentinels left of the connect timeout.
    void open_master(const Endpoint& master, Milliseconds connect_timeout);

    SentinelChoice m_sentinel;      // whom to ask where the master is
    Clock::time_point m_checked_at; // when a sentinel last named the link's server the master
    bool m_found_anew = false;      // this batch already went to a master found anew
};

} // namespace redsem

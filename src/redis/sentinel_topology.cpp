#include "redis/sentinel_topology.hpp"

#include "util/name.hpp"

#include <fmt/format.h>

namespace redsem {

std::string SentinelTopology::describe() const {
    return fmt::format("the master '{}' of the sentinels of {}",
                       printable(m_options.url.master_name), m_options.url.describe());
}

std::optional<Endpoint> SentinelTopology::destination(std::string_view /*key*/) const {
    return std::nullopt;
}

void SentinelTopology::connect() {
    if (m_link.is_open()) {
        primary_changed(k_master_recheck);
        if (m_link.is_open()) {
            return;
        }
    }
    // One connect timeout for the sentinels and the master together.
    const auto give_up_at = Clock::now() + m_options.connect_timeout;
    const Endpoint master = find_master(m_options.url.sentinels.size(), m_options.connect_timeout);
    const auto left = std::chrono::duration_cast<Milliseconds>(give_up_at - Clock::now());
    open_master(master, std::max(left, Milliseconds{1}));
}

bool SentinelTopology::primary_changed(Milliseconds fresh) {
    if (!m_link.is_open() || Clock::now() - m_checked_at < fresh) {
        return false;
    }
    // One sentinel, briefly: a renewal must not wait for sentinels that do not answer.
    Endpoint master;
    try {
        master = find_master(1, std::min(m_options.connect_timeout, k_recheck_timeout));
    } catch (const Error&) {
        m_checked_at = Clock::now(); // the next one is asked a while later
        return false;                // meanwhile, stay with the master we have
    }
    const RedisUrl& server = m_link.server();
    if (master.host == server.host && master.port == server.port) {
        return false;
    }
    m_link.close();
    return true;
}

Endpoint SentinelTopology::find_master(std::size_t tries, Milliseconds timeout) {
    const auto asked_at = Clock::now();
    const Endpoint master = ask_sentinels(m_options, m_sentinel, tries, timeout);
    m_checked_at = asked_at;
    return master;
}

void SentinelTopology::open_master(const Endpoint& master, Milliseconds connect_timeout) {
    const std::string& name = m_options.url.master_name;
    // The sentinels may not have noticed yet that the master died, or that another took over.
    auto failover_under_way = [&](const std::string& what) {
        m_link.close();
        return Error(ExitCode::unavailable,
                     fmt::format("the sentinels name {} as the master '{}', but {} (a failover "
                                 "under way?)",
                                 master.describe(), printable(name), what),
                     Transience::transient);
    };
    try {
        m_link.open(m_options.url.at(master), connect_timeout);
    } catch (const Error& error) {
        if (error.transience() != Transience::unreachable &&
            error.transience() != Transience::broken) {
            throw; // refused (a password, a certificate): the same on any server
        }
        throw failover_under_way(fmt::format("it cannot be reached ({})", error.what()));
    }
    // HELLO, which every user may send (ROLE is @dangerous); where it is renamed away, ROLE.
    // Where neither answers, a replica shows itself by READONLY at the first write (judge()).
    std::optional<std::string> role = m_link.hello_field("role");
    if (!role) {
        const Reply reply = m_link.exchange({"ROLE"});
        if (reply.type == Reply::Type::array && !reply.elements.empty()) {
            role = reply.at(0).as_string();
        }
    }
    if (role && *role != "master") {
        m_link.close();
        throw failover_under_way(fmt::format("its role is '{}'", printable(*role)));
    }
}

ReplyVerdict SentinelTopology::judge(const Reply& reply) {
    if (!is_error_code(reply, "READONLY") && !is_error_code(reply, "UNBLOCKED")) {
        return {};
    }
    if (m_found_anew) {
        // The sentinels have not caught up with a failover yet.
        throw Error(ExitCode::unavailable,
                    fmt::format("the server the sentinels name as the master is not one ({}): a "
                                "failover under way?",
                                printable(reply.text, 100)),
                    Transience::transient);
    }
    m_found_anew = true;
    m_link.close();
    return {.kind = ReplyVerdict::Kind::resend};
}

} // namespace redsem

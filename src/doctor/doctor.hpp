#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"

namespace redsem {

// How a finding of `redsem doctor` is judged, from best to worst.
enum class Verdict { ok, warn, unsafe };

std::string_view verdict_name(Verdict verdict);

// One thing `redsem doctor` found: which check, its verdict, what it saw and what that means
// for redsem, and what to do about it (empty when nothing needs doing).
struct Finding {
    explicit Finding(std::string check_name, std::string about = {}, Verdict judged = Verdict::ok,
                     std::string what = {}, std::string how = {})
        : check(std::move(check_name)), verdict(judged), found(std::move(what)),
          fix(std::move(how)), node(std::move(about)) {}

    std::string check; // "reachable", "version", "mode", "tls", "acl user", "permissions",
                       // "eviction", "persistence", "replication", "clock", "keys"
    Verdict verdict = Verdict::ok;
    std::string found;
    std::string fix;
    std::string node; // on a Redis Cluster, the primary it is about (as Connection::server()
                      // names it: redis://HOST:PORT); else empty
};

// What the caller would run redsem with, beyond the connection: what the checks judge against.
struct DoctorSettings {
    std::string prefix;
    std::optional<Milliseconds> loss_grace; // $REDSEM_LOSS_GRACE, if set
    long long replicas = 0;                 // $REDSEM_REPLICAS
};

struct DoctorReport {
    std::string target;            // what the connection talks to (Connection::describe())
    std::vector<Finding> findings; // in the order the checks ran
    // How the server was reached: unreachable (nothing else was checked), refused our
    // credentials (nothing else either), or reached.
    enum class Reach { reached, unreachable, denied };
    Reach reach = Reach::reached;

    Verdict verdict() const; // the worst finding's
};

// Checks whether the Redis behind `connection` is safe for redsem: reachable, version, mode,
// TLS, the ACL user and its permissions (probed without running anything), eviction,
// persistence, replication, the clocks, and redsem's own keys under `settings.prefix`; on a
// Redis Cluster, each primary. Writes nothing. A refusal by the server (an ACL rule, a
// renamed command) is a finding, never an error; an unreachable server or a refused login
// ends the report there (see DoctorReport::reach).
DoctorReport examine(Connection& connection, const DoctorSettings& settings);

} // namespace redsem

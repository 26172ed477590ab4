#pragma once

// The checks of `redsem doctor` that have files of their own; doctor.cpp runs them.

#include <optional>
#include <string>
#include <vector>

#include "doctor/doctor.hpp"
#include "redis/connection.hpp"
#include "redis/server_info.hpp"

namespace redsem::doctor {

// What one server told the checks.
struct ServerFacts {
    std::string node;    // "HOST:PORT" on a cluster, else empty
    ServerInfo hello;    // HELLO's fields (empty when HELLO was refused)
    ServerInfo info;     // INFO's (empty when INFO was refused)
    std::string refusal; // INFO's error reply, when it was refused
    bool cluster = false;
    std::string cluster_state; // a cluster node: CLUSTER INFO's cluster_state
    long long slots = -1;      // a cluster node: how many hash slots are served (-1: unknown)
    int db = 0;
};

// Whether the user may run every command redsem needs on the server commands without a key
// go to, asked by redis.acl_check_cmd in a script (Redis 7; the probe itself runs nothing).
// One finding per kind of gap (keys, needed commands, features, INFO), or one "ok"; the fixes
// name `user`.
std::vector<Finding> check_permissions(Connection& connection, const ServerFacts& facts,
                                       const std::string& prefix, const std::string& user);

// redsem's keys under `prefix` on every primary: how many semaphores, which are abandoned
// (only dead holders and waiters left), and keys at redsem's names that are not redsem's.
// Also whether admission is closed after a possible loss of data: as INFO shows it, or for a
// user without INFO, as a call that could tell recorded it (doctor writes no proof).
// With `shared_epoch` (not a cluster, where each semaphore has its own), says what a missing
// epoch key means for the first admissions, by the server's `uptime_s` when known.
Finding check_own_keys(Connection& connection, const std::string& prefix, bool shared_epoch,
                       std::optional<long long> uptime_s);

} // namespace redsem::doctor

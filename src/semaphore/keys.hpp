#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/reply.hpp"
#include "semaphore/wire.hpp"

namespace redsem {

class Connection;

inline constexpr std::string_view k_default_prefix = "redsem";

// The Redis keys of one semaphore. All share the hash tag {name}, so every script touches one
// Redis Cluster slot. lua/lib/call.lua documents what each holds.
struct Keys {
    std::string state;
    std::string holders;
    std::string info;
    std::string queue;
    std::string alive;
    std::string slots;
    std::string epoch;       // "<prefix>:epoch", shared by all semaphores: notices lost data
    std::string own_epoch;   // "<prefix>:{<name>}:epoch", used instead on a Redis Cluster
    std::string log;         // the history stream (redsem log)
    std::string wake_prefix; // + token = the waiter's wake list

    // The lists a waiter or holder `token` is told things by (protocol.hpp).
    std::string wake(std::string_view token) const;
    std::string nudge(std::string_view token) const;
    std::string left(std::string_view token) const;
    std::string too_large(std::string_view token) const;
    std::string released(std::string_view token) const;
    // The list a draining client waits on.
    std::string drained() const;
    // Every key of the semaphore that a caller may touch, with `token`'s lists: what a user's
    // ACL key patterns must reach (the shared epoch key aside).
    std::vector<std::string> every_key(std::string_view token) const;

    // Builds the keys for `name` under `prefix`: "<prefix>:{<name>}:<part>".
    static Keys make(std::string_view prefix, std::string_view name);

    // The KEYS array every script takes, in lua/lib/call.lua's order: with the shared epoch key,
    // or with the semaphore's own (on a Redis Cluster, where a script's keys share one slot).
    std::vector<std::string> script_keys() const;
    // A script's ARGV: the wake-list prefix, the proof of the epoch (`proof`: "" for none; see
    // Semaphore::run()), then `args` (see wire.hpp).
    std::vector<std::string> script_args(std::vector<std::string> args,
                                         std::string proof = {}) const;
    std::vector<std::string> cluster_script_keys() const;
};

// Every script replies kind "wrongtype" (wire::WrongType) when a key in semaphore `name`'s
// place holds another kind of value, and kind "newer" when a newer redsem stored its state in a
// format this one does not read (load_state() in lua/lib/state.lua). Throws either reply as a
// ConflictError (a foreign key's ends with `consequence`); any other reply passes.
void check_readable(const Reply& reply, std::string_view name, std::string_view consequence);

// The first of `keys` that holds another kind of value than redsem keeps there (asked with
// TYPE), if any: after a WRONGTYPE error (a key of another type appeared after the semaphore
// was made).
std::optional<wire::WrongType> find_foreign_key(Connection& connection, const Keys& keys);

// After a WRONGTYPE error about semaphore `name` (a key of another type appeared after the
// semaphore was made): throws a ConflictError naming the first of its keys that holds another
// kind of value than redsem keeps there (asked with TYPE), ending with `consequence`; the
// generic conflict when none does any more.
[[noreturn]] void throw_foreign_key(Connection& connection, const Keys& keys, std::string_view name,
                                    std::string_view consequence);

} // namespace redsem

#pragma once

#include <string>
#include <vector>

#include "redis/script.hpp"

namespace redsem {

// A command with the key it routes by. Redis Cluster runs a command on the node that owns its
// key's hash slot (for a semaphore, any of its keys: they share one hash tag); TIME for a
// semaphore names the semaphore's key, so the clock read is the one its scripts read. A
// command about no key (SCAN, INFO) has an empty key.
struct Command {
    Command(std::string routing_key, std::vector<std::string> words)
        : key(std::move(routing_key)), argv(std::move(words)) {}

    std::string key;
    std::vector<std::string> argv;
};

// One run of a Lua script: its KEYS (the first routes the call) and ARGV. A Redis Cluster
// refuses a script whose keys are on several hash slots (CROSSSLOT): `cluster_keys`, when not
// empty, are the keys to use there instead (redsem's shared epoch key is one per semaphore on a
// cluster).
struct ScriptCall {
    // How the script is sent: EVALSHA and on NOSCRIPT EVAL; EVALSHA alone (a NOSCRIPT reply
    // stands); or EVAL alone.
    enum class Send { sha_then_body, sha_only, body_only };

    const Script& script;
    std::vector<std::string> keys;
    std::vector<std::string> args;
    std::vector<std::string> cluster_keys = {};
    Send send = Send::sha_then_body;
};

} // namespace redsem

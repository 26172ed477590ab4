#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace redsem {

inline constexpr std::string_view k_default_prefix = "redsem";

// The Redis keys of one semaphore. All share the hash tag {name}, so every script touches one
// Redis Cluster slot. lua/lib.lua documents what each holds.
struct Keys {
    std::string state;
    std::string holders;
    std::string info;
    std::string queue;
    std::string alive;
    std::string slots;
    std::string epoch;       // "<prefix>:epoch", shared by all semaphores: notices lost data
    std::string wake_prefix; // + token = the waiter's wake list

    // Builds the keys for `name` under `prefix`: "<prefix>:{<name>}:<part>".
    static Keys make(std::string_view prefix, std::string_view name);

    // The KEYS array every script takes, in lib.lua's order.
    std::vector<std::string> script_keys() const;
};

} // namespace redsem

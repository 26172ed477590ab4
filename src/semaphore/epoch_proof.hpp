#pragma once

// Proof, without INFO, that the Redis process has checked a semaphore's epoch: the script
// cache lives exactly as long as a process. A call that may admit is sent as a variant of the
// joined admitting scripts (scripts::k_admit_script: acquire, release and limit in one text)
// whose text names the epoch marker the client expects the epoch key to hold; only a process
// that ran that variant before has it cached, and EVALSHA runs it only there. The rule, and
// what it does not see, is in lua/lib/epoch.lua.

#include "redis/script.hpp"

#include <string>
#include <string_view>

namespace redsem {

// `script` with a comment line naming `marker` appended: a text of its own, cached by Redis
// apart from the script and from every other marker's variant. Built once per process for
// each script and marker; the reference stays valid for the life of the process.
const Script& epoch_variant(const Script& script, std::string_view marker);

// A fresh marker: 128 random bits as 32 hex digits (unguessable, so that no other variant in
// any cache can name it by chance).
std::string new_epoch_marker();

} // namespace redsem

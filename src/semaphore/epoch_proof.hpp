#pragma once

// Proof, without INFO, that the Redis process has checked a semaphore's epoch: the script
// cache lives exactly as long as a process. The epoch key names a random marker, and the
// process that checked the epoch last ran the marker's script: a fixed text that names the
// marker and nothing else. A call that may admit runs, in one transaction with it, that
// script by EVALSHA: it runs only where the process has it cached, and leaves a one-time
// proof the call's script checks. The text is the same in every redsem release, so an
// upgrade (new script bodies) proves what the release before it proved. The rule, and what
// it does not see, is in lua/lib/server.lua and lua/lib/epoch.lua.

#include "redis/script.hpp"

#include <string>
#include <string_view>

namespace redsem {

// The marker script of `marker`: run with the epoch key as KEYS[1] and a nonce as ARGV[1], it
// writes the nonce to the epoch's field "proof", for the script run after it in the same
// transaction to check and remove. Built once per process for each marker; the reference
// stays valid for the life of the process.
const Script& epoch_marker_script(std::string_view marker);

// A fresh marker, or a proof's nonce: 128 random bits as 32 hex digits (unguessable, so that
// no other script in any cache names it by chance).
std::string new_epoch_marker();

} // namespace redsem

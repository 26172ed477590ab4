#pragma once

#include <string>

#include "semaphore/semaphore.hpp"

namespace redsem {

// This host and user (looked up here, in the layer that knows about processes), with
// `label` (cut to k_max_label_bytes), for the slot of process `pid`; `pid_of` says whose pid
// it is ("run", "caller", "while-pid"). Safe to call from several threads.
HolderMeta holder_meta(std::string label, long long pid, std::string pid_of);

} // namespace redsem

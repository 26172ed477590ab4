#pragma once

#include <string>
#include <vector>

#include "semaphore/semaphore.hpp"

namespace redsem {

// The environment for a command run under a lease: this process's environment without any
// Redis password (REDSEM_PASSWORD and REDISCLI_AUTH are dropped; a password in REDSEM_URL or
// REDIS_URL is removed from the URL), plus REDSEM_NAME, REDSEM_TOKEN, REDSEM_FENCE, REDSEM_SLOT,
// REDSEM_SLOTS (every slot, "0 3 4")
// and REDSEM_LIMIT describing the lease, plus `connection` ("VARIABLE=value" entries that
// replace inherited ones: how redsem reached Redis, so that a redsem inside the command reaches
// the same one; never a secret, only a password file's path).
std::vector<std::string> child_environment(const std::string& name, const Lease& lease,
                                           const std::vector<std::string>& connection);

} // namespace redsem

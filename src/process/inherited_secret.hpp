#pragma once

#include <optional>
#include <string>
#include <vector>

namespace redsem {

// A read-only, private memfd holding `secret` (and a newline) that a child inherits, named
// `name` (for /proc/PID/fd); its path as the child sees it ("/proc/self/fd/N"), or nullopt
// when it could not be made (then the secret does not reach the child at all). The descriptor
// stays open, without FD_CLOEXEC, for the rest of this process.
std::optional<std::string> inherited_secret(const std::string& secret, const char* name);

// The descriptors of the inherited secrets that environment `env` ("NAME=value" entries) names
// ("/proc/self/fd/N"), ascending.
std::vector<int> inherited_secret_fds(const std::vector<std::string>& env);

} // namespace redsem

#pragma once

#include <cstddef>
#include <string>

namespace redsem {
class Connection;
}

namespace redsem::cli {

// A token as given to release or renew: the whole token, or a unique start of it of at least
// k_min_short_token hex digits (`status` prints the first 8), looked up among NAME's holders
// and waiters. Throws UsageError for a malformed or ambiguous one (naming the candidates),
// NotHeldError when no holder or waiter has it.
inline constexpr std::size_t k_min_short_token = 4;
std::string resolve_token(Connection& connection, const std::string& prefix,
                          const std::string& name, const std::string& token);

} // namespace redsem::cli

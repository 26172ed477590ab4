#include "cli/token_lookup.hpp"

#include "semaphore/inspect.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/token.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <vector>

namespace redsem::cli {

std::string resolve_token(Connection& connection, const std::string& prefix,
                          const std::string& name, const std::string& token) {
    if (is_token(token)) {
        return token;
    }
    const bool hex = std::all_of(token.begin(), token.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
    if (!hex || token.size() < k_min_short_token || token.size() > 2 * k_token_bytes) {
        throw UsageError(fmt::format("'{}' is not a redsem token (32 hex digits as printed by "
                                     "'redsem acquire', or the first {} or more of them as "
                                     "'redsem status' shows)",
                                     printable(token, 40), k_min_short_token));
    }
    const std::vector<std::string> found = tokens_starting_with(connection, prefix, name, token);
    if (found.empty()) {
        throw NotHeldError(
            fmt::format("no holder or waiter of '{}' has a token starting with '{}' (its lease "
                        "expired, it was released, or it never held one)",
                        name, token));
    }
    if (found.size() > 1) {
        std::string candidates;
        for (std::size_t i = 0; i < found.size() && i < 5; ++i) {
            candidates += (i > 0 ? ", " : "") + found[i];
        }
        throw UsageError(fmt::format("'{}' is the start of {} tokens of '{}' ({}{}); give more "
                                     "of it",
                                     token, found.size(), name, candidates,
                                     found.size() > 5 ? ", ..." : ""));
    }
    return found.front();
}

} // namespace redsem::cli

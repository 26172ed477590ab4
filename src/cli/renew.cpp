#include "cli/command_args.hpp"
#include "cli/token_lookup.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"

#include <fmt/format.h>
#include <memory>

namespace redsem::cli {

int run_renew(const RenewArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    const long long replicas = resolve_replicas(args.replicas);
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    const std::string token = resolve_token(connection, prefix, args.name, args.token);
    Semaphore semaphore(connection, prefix, args.name);
    if (!semaphore.renew(token, args.ttl, replicas, /*claimed=*/true)) {
        throw NotHeldError(fmt::format("that token holds no slot of '{}' any more (its lease "
                                       "expired or it was released); the slot is lost",
                                       args.name));
    }
    return 0;
}

} // namespace redsem::cli

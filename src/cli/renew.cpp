#include "cli/command_args.hpp"
#include "cli/token_lookup.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"
#include "util/time_format.hpp"

#include <cstdio>
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
    const std::optional<Renewal> renewal = semaphore.renew(token, args.ttl, replicas,
                                                           /*claimed=*/true);
    if (!renewal) {
        throw NotHeldError(fmt::format("that token holds no slot of '{}' any more (its lease "
                                       "expired or it was released); the slot is lost",
                                       args.name));
    }
    if (renewal->capped) {
        std::fprintf(stderr,
                     "redsem: the lease of '%s' ends at %s, as acquire --max-hold bounds it; no "
                     "renewal moves it further\n",
                     printable(args.name).c_str(), local_time(renewal->deadline_ms).c_str());
    }
    return 0;
}

} // namespace redsem::cli

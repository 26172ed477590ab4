#include "cli/commands.hpp"
#include "cli/token_lookup.hpp"
#include "cli/typed_option.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>

namespace redsem::cli {

namespace {

struct RenewArgs {
    std::string name;
    std::string token;
    std::optional<Milliseconds> ttl; // nullopt: the lease's own
    std::optional<long long> replicas;
};

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

} // namespace

Runner setup_renew(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<RenewArgs>();
    command.description(
        "Extend the lease of the slot of NAME held by TOKEN to now + --ttl, by "
        "the Redis server's clock (default: by its own ttl again); never shortens it (release "
        "it to end it early). Exits 1 when the slot was lost, or when TOKEN is still waiting "
        "for one.");
    add_name_and_token(command, args->name, args->token);
    add_typed_option(command, "--ttl", args->ttl, parse_ttl,
                     "New lease length from now; a later deadline the lease has stays (default: "
                     "the ttl the lease was taken with)")
        ->type_name("DUR");
    add_typed_option(command, "--replicas", args->replicas, parse_replicas, k_replicas_help)
        ->type_name("N");
    return [args, &global] { return run_renew(*args, global); };
}

} // namespace redsem::cli

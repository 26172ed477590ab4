#include "cli/commands.hpp"
#include "cli/token_lookup.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>

namespace redsem::cli {

namespace {

struct ReleaseArgs {
    std::string name;
    std::string token;
};

int run_release(const ReleaseArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    const std::string token = resolve_token(connection, prefix, args.name, args.token);
    Semaphore semaphore(connection, prefix, args.name);
    switch (semaphore.release(token, Releaser::someone_else)) {
    case ReleaseOutcome::released:
        return 0;
    case ReleaseOutcome::left_queue:
        throw NotHeldError(fmt::format(
            "that token was waiting for '{}', not holding it; it has left the queue, and the "
            "acquire or run that waited with it ends (exit 1)",
            args.name));
    case ReleaseOutcome::not_found:
        break;
    }
    throw NotHeldError(fmt::format("that token holds no slot of '{}' (its lease expired, it was "
                                   "released already, or it never held one)",
                                   args.name));
}

} // namespace

Runner setup_release(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<ReleaseArgs>();
    command.description("Give back the slot of semaphore NAME held by TOKEN. Exits 1 when "
                        "TOKEN holds nothing.");
    add_name_and_token(command, args->name, args->token);
    return [args, &global] { return run_release(*args, global); };
}

} // namespace redsem::cli

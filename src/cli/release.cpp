#include "cli/command_args.hpp"
#include "cli/token_lookup.hpp"
#include "process/process_tree.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"

#include <fmt/format.h>
#include <memory>

namespace redsem::cli {

namespace {

// How long the successor of a `run` that died waits for the command's group to end (see
// GroupGuard): SIGKILL has been sent to all of it, so only a process stuck in the kernel
// (uninterruptible I/O) outlives it. Past that the slot is not given back: its lease ends it.
constexpr Milliseconds k_group_end_wait{60'000};

} // namespace

int run_release(const ReleaseArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    const std::string prefix = resolve_prefix(global);
    if (args.after_group && *args.after_group <= 1) {
        throw UsageError(fmt::format("--after-group: '{}' is not a process group of a command",
                                     *args.after_group));
    }
    if (args.after_group && !wait_for_group_end(*args.after_group, k_group_end_wait)) {
        throw UnavailableError(fmt::format("process group {} still runs; the slot of '{}' is "
                                           "left to its lease",
                                           *args.after_group, printable(args.name)));
    }
    Connection connection(resolve_connection(global));
    const std::string token = resolve_token(connection, prefix, args.name, args.token);
    Semaphore semaphore(connection, prefix, args.name);
    const std::optional<CommandEnd> end =
        args.exit_status ? std::optional<CommandEnd>(CommandEnd{.status = *args.exit_status})
                         : std::nullopt;
    switch (semaphore.release(token, Releaser::someone_else, end)) {
    case ReleaseOutcome::released:
        return 0;
    case ReleaseOutcome::left_queue:
        throw NotHeldError(fmt::format(
            "that token was waiting for '{}', not holding it; it has left the queue, and the "
            "acquire or run that waited with it ends (exit 1)",
            args.name));
    case ReleaseOutcome::not_found:
    case ReleaseOutcome::late_done: // (only for run's own release: see HeldSlot)
    case ReleaseOutcome::late_taken:
    case ReleaseOutcome::late_gone:
        break;
    }
    throw NotHeldError(fmt::format("that token holds no slot of '{}' (its lease expired, it was "
                                   "released already, or it never held one)",
                                   args.name));
}

} // namespace redsem::cli

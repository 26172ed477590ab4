#include "cli/commands.hpp"
#include "cli/slot_request.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/semaphore.hpp"
#include "util/time_format.hpp"

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

namespace redsem::cli {

namespace {

struct AcquireArgs {
    SlotRequest request;
    bool json = false;
};

void print_lease(const std::string& name, const Lease& lease, bool json) {
    if (!json) {
        std::cout << lease.token << "\n";
        return;
    }
    const nlohmann::json out{
        {"name", name},
        {"token", lease.token},
        {"fence", lease.fence},
        {"slot", lease.slot},
        {"limit", lease.limit},
        {"ttl_ms", lease.ttl.count()},
        {"deadline_ms", lease.deadline_ms},
        {"deadline", iso8601_utc(lease.deadline_ms)},
    };
    std::cout << out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int run_acquire(const AcquireArgs& args, const GlobalOptions& global) {
    const ParsedRequest parsed = parse_slot_request(args.request, "");
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    Semaphore semaphore(connection, prefix, args.request.name);
    const SignalWatch signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    const auto lease = wait_for_slot(semaphore, args.request, parsed.options, signals);
    if (!lease) {
        return parsed.busy_exit;
    }
    print_lease(args.request.name, *lease, args.json);
    return 0;
}

} // namespace

Runner setup_acquire(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<AcquireArgs>();
    command.description("Take a slot of semaphore NAME and print its token on stdout. Waits "
                        "for ever unless --wait says otherwise.");
    add_slot_options(command, args->request);
    command.add_flag(
        "--json", args->json,
        "Print name, token, fence, slot, limit, ttl_ms, deadline_ms and deadline as JSON");
    return [args, &global] { return run_acquire(*args, global); };
}

} // namespace redsem::cli

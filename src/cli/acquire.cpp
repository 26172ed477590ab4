#include "cli/commands.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/time_format.hpp"
#include "util/token.hpp"

#include <CLI/CLI.hpp>
#include <csignal>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

namespace redsem::cli {

namespace {

struct AcquireArgs {
    std::string name;
    std::string limit = "1";
    std::string ttl = "60s";
    std::optional<std::string> wait;
    std::optional<std::string> conflict_exit_code;
    std::string label;
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
    check_name(args.name);
    AcquireOptions options;
    options.limit = parse_limit(args.limit, "--limit");
    options.ttl = parse_ttl(args.ttl, "--ttl");
    if (args.wait) {
        options.wait = parse_duration(*args.wait, "--wait");
    }
    const int busy_exit = args.conflict_exit_code
                              ? parse_exit_code(*args.conflict_exit_code, "--conflict-exit-code")
                              : static_cast<int>(ExitCode::timeout);
    options.meta = HolderMeta::of_this_process(args.label);
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    Semaphore semaphore(connection, prefix, args.name);

    const SignalWatch signals{SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    options.interrupt_fd = signals.fd();
    const std::string token = generate_token();
    std::optional<Lease> lease;
    try {
        lease = semaphore.acquire(options, token);
    } catch (const WaitInterrupted&) {
        throw Interrupted(signals.received());
    }
    if (signals.received() != 0) {
        // A signal came while the last script ran: nobody will see the token, so give it back.
        if (lease) {
            semaphore.release(lease->token);
        }
        throw Interrupted(signals.received());
    }
    if (!lease) {
        std::cerr << fmt::format("redsem: '{}' is full ({}); no slot {}\n", args.name,
                                 options.limit == 1 ? "held" : "all slots held",
                                 options.wait && options.wait->count() > 0
                                     ? "within " + format_duration(*options.wait)
                                     : "free now");
        return busy_exit;
    }
    print_lease(args.name, *lease, args.json);
    return 0;
}

} // namespace

Runner setup_acquire(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<AcquireArgs>();
    command.description("Take a slot of semaphore NAME and print its token on stdout. Waits "
                        "for ever unless --wait says otherwise.");
    command.add_option("NAME", args->name, "Semaphore name")->required();
    command.add_option("-n,--limit", args->limit, "How many may hold NAME at once (1-100000)")
        ->type_name("N")
        ->capture_default_str();
    command.add_option("--ttl", args->ttl, "Lease length; renew before it runs out")
        ->type_name("DUR")
        ->capture_default_str();
    command.add_option("-w,--wait", args->wait,
                       "Give up after DUR without a slot (0: try once; default: wait for ever)")
        ->type_name("DUR");
    command.add_option("-E,--conflict-exit-code", args->conflict_exit_code,
                       "Exit status when no slot was had in time (default 75)")
        ->type_name("CODE");
    command.add_option("--label", args->label, "Text shown beside this holder in status")
        ->type_name("TEXT");
    command.add_flag("--json", args->json,
                     "Print token, fence, slot, limit, ttl_ms and deadline as JSON");
    return [args, &global] { return run_acquire(*args, global); };
}

} // namespace redsem::cli

#include "cli/admission.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "cli/typed_option.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

namespace redsem::cli {

namespace {

struct LimitArgs {
    std::string name;
    std::optional<long long> limit;
    std::optional<long long> history;
    bool unset = false;
    bool json = false;
};

int run_limit(const LimitArgs& args, const GlobalOptions& global) {
    check_name(args.name);
    const std::optional<long long>& new_limit = args.limit;
    // The history's length is stored here only, with the option (an operator's action):
    // reading the limit changes nothing.
    const std::optional<long long>& history = args.history;
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    Semaphore semaphore(connection, prefix, args.name);
    const LimitInfo info =
        args.unset ? semaphore.unset_limit() : semaphore.limit(new_limit, history);
    if (args.json) {
        const nlohmann::json out{
            {"name", args.name},
            {"limit", info.limit},
            {"stored", info.stored},
            {"held", info.held},
            {"queued", info.queued},
            {"history", info.history},
            {"set_by", info.set_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.set_by)},
            {"admission", admission_json(semaphore.admission())}};
        print_json(out);
    } else if (!new_limit && !history && !args.unset) {
        std::cout << info.limit << "\n";
    }
    return 0;
}

} // namespace

Runner setup_limit(CLI::App& command, const GlobalOptions& global) {
    auto args = std::make_shared<LimitArgs>();
    command.description(
        "Print the limit of semaphore NAME (1 for a new one), or set it to N at once, while in "
        "use: a higher limit hands the new slots to waiters in FIFO order; after a lower one, "
        "holders keep their slots and nobody new gets one until fewer than N hold. What is set "
        "here stays, also while nobody uses NAME (gc and key expiry keep it), until --unset.");
    command.add_option("NAME", args->name, "Semaphore name")->required();
    CLI::Option* limit =
        add_typed_option(command, "N", args->limit, parse_limit, "The new limit (1-100000)");
    CLI::Option* history =
        add_typed_option(command, "--history", args->history, parse_history,
                         "Keep N entries in NAME's history from now on (0-10000000; 0: none; "
                         "default 10000)")
            ->type_name("N");
    command
        .add_flag("--unset", args->unset,
                  "Give up the limit and history length set here: in use, the limit stays as "
                  "the callers'; idle, NAME is deleted and the next acquire's -n applies")
        ->excludes(limit)
        ->excludes(history);
    command.add_flag("--json", args->json,
                     "Print name, limit, stored (false: a new semaphore), held, queued, history "
                     "and admission (closed after a possible loss of data?) as JSON");
    return [args, &global] { return run_limit(*args, global); };
}

} // namespace redsem::cli

#include "cli/admission.hpp"
#include "cli/command_args.hpp"
#include "cli/output.hpp"
#include "semaphore/semaphore.hpp"
#include "util/name.hpp"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

namespace redsem::cli {

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

} // namespace redsem::cli

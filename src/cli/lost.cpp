#include "cli/command_args.hpp"
#include "cli/output.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/semaphore.hpp"
#include "util/time_format.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace redsem::cli {

namespace {

// Names the semaphore whose keys route the declaration on one server: the epoch key there is
// the prefix's, shared by every semaphore, and the script creates no key of this one.
constexpr std::string_view k_any_name = "-";

} // namespace

int run_lost(const LostArgs& args, const GlobalOptions& global) {
    Connection connection(resolve_connection(global));
    const std::string prefix = resolve_prefix(global);
    bool cluster = false;
    connection.for_each_primary([&](const Endpoint* node) { cluster = cluster || node; });
    // On a Redis Cluster each semaphore has an epoch key of its own, on its slot.
    const std::vector<std::string> names = cluster
                                               ? scan_names(connection, prefix)
                                               : std::vector<std::string>{std::string(k_any_name)};
    LossDeclared loss;
    for (const std::string& name : names) {
        Semaphore semaphore(connection, prefix, name);
        const LossDeclared declared = semaphore.declare_loss();
        loss.lost_at_ms = std::max(loss.lost_at_ms, declared.lost_at_ms);
        loss.opens_at_ms = std::max(loss.opens_at_ms, declared.opens_at_ms);
    }
    if (args.json) {
        nlohmann::json out = {{"prefix", prefix},
                              {"lost_at_ms", loss.lost_at_ms},
                              {"lost_at", local_time(loss.lost_at_ms)},
                              {"opens_at_ms", loss.opens_at_ms},
                              {"opens_at", local_time(loss.opens_at_ms)}};
        out["semaphores"] = cluster ? nlohmann::json(names) : nlohmann::json(nullptr);
        print_json(out);
    } else if (!args.quiet && names.empty()) {
        std::fprintf(stderr,
                     "redsem: no semaphore under prefix '%s' on this Redis Cluster: "
                     "nothing to close\n",
                     prefix.c_str());
    } else if (!args.quiet) {
        const std::string which =
            cluster ? fmt::format("the {} semaphore{} under prefix '{}'", names.size(),
                                  names.size() == 1 ? "" : "s", prefix)
                    : fmt::format("any semaphore under prefix '{}'", prefix);
        std::fprintf(stderr,
                     "redsem: loss of data declared: nobody new is admitted to %s until "
                     "%s (holders keep their slots)\n",
                     which.c_str(), local_time(loss.opens_at_ms).c_str());
    }
    return 0;
}

} // namespace redsem::cli

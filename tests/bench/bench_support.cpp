#include "bench_support.hpp"

#include "lua_scripts.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/wire.hpp"

#include <algorithm>
#include <numeric>
#include <sstream>
#include <stdexcept>

namespace redsem::bench {

namespace {

constexpr std::size_t k_batch = 1000;
const std::string k_meta = R"({"host":"bench","pid":1,"user":"bench","label":"bench"})";

} // namespace

ScriptCall acquire_call(const std::string& name, const std::string& token, long long limit,
                        long long ttl_ms, bool wait) {
    const Keys keys = Keys::make("redsem", name);
    return ScriptCall{scripts::k_acquire_script, keys.script_keys(),
                      keys.script_args(wire::acquire_args({.token = token,
                                                           .limit = limit,
                                                           .ttl = Milliseconds{ttl_ms},
                                                           .queue = wait,
                                                           .liveness = Milliseconds{k_long_ms},
                                                           .meta_json = k_meta,
                                                           .loss_grace = Milliseconds{0}}))};
}

void run_batched(Connection& connection, std::vector<ScriptCall>& calls) {
    for (std::size_t first = 0; first < calls.size(); first += k_batch) {
        const std::vector<ScriptCall> batch(
            calls.begin() + static_cast<long>(first),
            calls.begin() + static_cast<long>(std::min(calls.size(), first + k_batch)));
        for (const Reply& reply : connection.eval_pipeline(batch)) {
            if (reply.is_error()) {
                throw std::runtime_error("filling a semaphore failed: " + reply.text);
            }
        }
    }
    calls.clear();
}

CommandStats command_stats(Connection& admin) {
    // Lines as "cmdstat_zadd:calls=3,usec=12,...", or "cmdstat_config|resetstat:calls=1,...".
    std::istringstream lines(admin.call({"INFO", "commandstats"}).as_string());
    CommandStats stats;
    for (std::string line; std::getline(lines, line);) {
        const std::size_t calls = line.find(":calls=");
        const std::size_t usec = line.find(",usec=");
        if (!line.starts_with("cmdstat_") || calls == std::string::npos ||
            usec == std::string::npos || line.starts_with("cmdstat_config") ||
            line.starts_with("cmdstat_info")) {
            continue;
        }
        const long long count = std::stoll(line.substr(calls + 7));
        stats.commands += count;
        if (line.starts_with("cmdstat_fcall:") || line.starts_with("cmdstat_evalsha:") ||
            line.starts_with("cmdstat_eval:")) {
            stats.scripts += count;
            stats.script_us += std::stod(line.substr(usec + 6));
        }
    }
    return stats;
}

double percentile(std::vector<double> values, double p) {
    if (values.empty()) {
        return 0;
    }
    std::sort(values.begin(), values.end());
    const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
    return values[index];
}

double mean(const std::vector<double>& values) {
    return values.empty() ? 0
                          : std::accumulate(values.begin(), values.end(), 0.0) /
                                static_cast<double>(values.size());
}

} // namespace redsem::bench

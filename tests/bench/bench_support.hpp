#pragma once
// What the benchmark programs share: filling semaphores through the real acquire script, and
// summarising samples.
#include "redis/connection.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace redsem::bench {

using Clock = std::chrono::steady_clock;

// Lease ttl and waiter liveness for entries that must outlast a benchmark (10 minutes).
inline constexpr long long k_long_ms = 600'000;

// The acquire script for `token` on semaphore `name` (prefix "redsem"): `wait` queues when
// full. Waiters get a liveness of k_long_ms, so they stay queued without refreshing. Loss
// grace 0: a private server has lost no lease.
ScriptCall acquire_call(const std::string& name, const std::string& token, long long limit,
                        long long ttl_ms, bool wait);

// Runs `calls` pipelined in batches, throwing on an error reply; empties `calls`.
void run_batched(Connection& connection, std::vector<ScriptCall>& calls);

// What Redis ran since its statistics were last reset (CONFIG RESETSTAT): commands, scripts'
// inner calls included (less CONFIG and INFO), and the script calls (FCALL, EVALSHA, EVAL)
// and the microseconds they took.
struct CommandStats {
    long long commands = 0;
    long long scripts = 0;
    double script_us = 0;
};
CommandStats command_stats(Connection& admin);

double percentile(std::vector<double> values, double p);
double mean(const std::vector<double>& values);

} // namespace redsem::bench

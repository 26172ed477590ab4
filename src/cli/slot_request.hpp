#pragma once

#include <optional>
#include <string>

#include "cli/options.hpp"
#include "process/keeper.hpp"
#include "process/signal_watch.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"

namespace redsem::cli {

// The options `acquire` and `run` share: how to wait for which slot, each converted and
// checked as it is parsed (command_options.cpp).
struct SlotRequest {
    std::string name;
    std::optional<long long> limit; // nullopt: the stored limit
    std::optional<long long> slots; // --slots K
    bool exclusive = false;
    Milliseconds ttl = k_default_ttl;
    std::optional<Milliseconds> wait; // nullopt: for ever
    std::optional<int> conflict_exit_code;
    std::optional<std::string> label;
    std::optional<Milliseconds> loss_grace;
    std::optional<long long> replicas;
    bool through_loss = false; // with -w 0: wait for a closed admission to open, then try once
    bool supersede = false;
    std::optional<long long> max_waiting;
    bool quiet = false;
};

struct ParsedRequest {
    AcquireOptions options;
    int busy_exit = 0; // exit status when no slot came in time
};

// Checks what involves several options, and the name; throws UsageError. `default_label` applies
// without --label; `owner` is the holder's metadata without its label (see HolderMeta).
ParsedRequest parse_slot_request(const SlotRequest& request, const std::string& default_label,
                                 HolderMeta owner);

// What a caller of `run --once-per` that skipped is told: who claims the occurrence, since
// when, and when the window ends (without "redsem: ").
std::string skip_message(const std::string& name, const Skip& skip);

// Waits for a slot of `semaphore` (reached by `connection` under `prefix`) as the request
// says; while waiting longer than a second with stderr on a terminal (and no -q), shows the
// queue position on one line. Off a terminal (and no -q) it says in whole lines when it
// queued (position, and the holders: host, pid, label, for how long), how the wait goes on
// after 1m, 2m, 4m, 8m and then every 10m, and names the holders when giving up. When admission is
// closed after a possible loss of data at the server, says so once on stderr (unless -q). Returns
// nullopt when no slot came in time, after saying so on stderr (unless -q). A caller of
// `run --once-per` that skips is told why (unless -q), and Skipped is thrown. When a signal caught
// by `signals` arrives, leaves the queue and throws Interrupted. When `owner` (the --while-pid
// process) exits first, leaves the queue and throws UsageError: nobody is left to hold the slot
// for.
std::optional<Lease> wait_for_slot(Connection& connection, const std::string& prefix,
                                   Semaphore& semaphore, const SlotRequest& request,
                                   AcquireOptions options, const SignalWatch& signals,
                                   const WatchedProcess* owner = nullptr);

} // namespace redsem::cli

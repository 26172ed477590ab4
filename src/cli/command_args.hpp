#pragma once

// What each subcommand is given once its words are parsed, and the function that acts on it.
// Every value is already typed and checked on its own (the converters of
// command_options.cpp refused a bad one as it was parsed); a run_* function checks only what
// involves several options, and returns the exit status (throws Error for failures).
//
// The options are declared on CLI11 in command_options.cpp alone. CLI11 is header-only, and
// each file that includes it compiles for 10-15 s more (the validators it defines in every
// translation unit): the subcommands' own files leave it out (issue 52).
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "cli/options.hpp"
#include "cli/ping.hpp"
#include "cli/slot_request.hpp"
#include "process/supervise.hpp"
#include "util/duration.hpp"

namespace redsem::cli {

struct AcquireArgs {
    SlotRequest request;
    bool json = false;
    std::optional<long long> while_pid;
    std::optional<int> on_lost; // a signal, 0 for none
    std::optional<Milliseconds> kill_after;
    std::optional<Milliseconds> max_hold; // the lease cannot be renewed past grant + this
};
int run_acquire(const AcquireArgs& args, const GlobalOptions& global);

struct ReleaseArgs {
    std::string name;
    std::string token;
    // Internal, for the successor of a `run` that died (see GroupGuard and run.cpp): the
    // command's process group, which must have ended first, and the status to record.
    std::optional<pid_t> after_group;
    std::optional<int> exit_status;
};
int run_release(const ReleaseArgs& args, const GlobalOptions& global);

struct RenewArgs {
    std::string name;
    std::string token;
    std::optional<Milliseconds> ttl; // nullopt: the lease's own
    std::optional<long long> replicas;
};
int run_renew(const RenewArgs& args, const GlobalOptions& global);

// How many runs of one occurrence may fail (or leave without finishing) before the callers of
// that occurrence skip, without --attempts: a failure on one host is tried once more on
// another, not on every host of the fleet.
inline constexpr long long k_default_attempts = 2;

struct RunArgs {
    SlotRequest request;
    bool stop_on_lost = true; // --on-lost term (else ignore)
    Milliseconds kill_after = k_default_kill_after;
    std::optional<int> lost_exit_code;
    std::optional<Milliseconds> once_per;
    bool at_most_once = false;
    std::optional<long long> attempts;
    std::optional<Milliseconds> max_run;
    std::optional<std::string> ping;          // --ping URL (checked as parsed)
    std::optional<Milliseconds> ping_timeout; // nullopt: k_default_ping_timeout
    std::optional<std::string> shell_command;
    std::vector<std::string> command;
};
int run_run(const RunArgs& args, const GlobalOptions& global);

struct StatusArgs {
    std::vector<std::string> names;
    bool json = false;
    std::optional<std::string> format; // table, json or prometheus (checked as parsed)
    bool watch = false;
    bool names_only = false;
    std::optional<Milliseconds> overdue; // --overdue: the check, instead of the listing
};
int run_status(const StatusArgs& args, const GlobalOptions& global);

struct GcArgs {
    std::vector<std::string> names;
    bool dry_run = false;
    bool json = false;
};
int run_gc(const GcArgs& args, const GlobalOptions& global);

struct LimitArgs {
    std::string name;
    std::optional<long long> limit;
    std::optional<long long> history;
    bool unset = false;
    bool json = false;
};
int run_limit(const LimitArgs& args, const GlobalOptions& global);

// pause, resume and drain.
struct PauseArgs {
    std::string name;
    std::optional<std::string> reason;
    std::optional<Milliseconds> duration; // --for
    std::optional<Milliseconds> wait;     // drain's -w
    bool quiet = false;
    bool json = false;
};
int run_pause(const PauseArgs& args, const GlobalOptions& global);
int run_resume(const PauseArgs& args, const GlobalOptions& global);
int run_drain(const PauseArgs& args, const GlobalOptions& global);

struct LostArgs {
    bool quiet = false;
    bool json = false;
};
int run_lost(const LostArgs& args, const GlobalOptions& global);

struct LogArgs {
    std::vector<std::string> names;
    std::optional<std::string> since;
    std::optional<std::string> until;
    bool json = false;
    bool follow = false;
};
int run_log(const LogArgs& args, const GlobalOptions& global);

struct DoctorArgs {
    bool json = false;
};
int run_doctor(const DoctorArgs& args, const GlobalOptions& global);

} // namespace redsem::cli

#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/options.hpp"

namespace CLI {
class App;
}

namespace redsem::cli {

// Runs a parsed subcommand and returns the exit status; throws Error for failures.
using Runner = std::function<int()>;

// One subcommand: its name, its one-line summary, and the function that declares its options
// on `command` and returns the Runner that acts on them.
struct Command {
    std::string_view name;
    std::string_view summary;
    Runner (*setup)(CLI::App& command, const GlobalOptions& global);
};

// Every subcommand, in the order `redsem --help` lists them. (The setup_* functions, which
// declare each one's options, are in command_options.cpp.)
std::span<const Command> commands();

Runner setup_acquire(CLI::App& command, const GlobalOptions& global);
Runner setup_release(CLI::App& command, const GlobalOptions& global);
Runner setup_renew(CLI::App& command, const GlobalOptions& global);
Runner setup_run(CLI::App& command, const GlobalOptions& global);
Runner setup_status(CLI::App& command, const GlobalOptions& global);
Runner setup_gc(CLI::App& command, const GlobalOptions& global);
Runner setup_limit(CLI::App& command, const GlobalOptions& global);
Runner setup_pause(CLI::App& command, const GlobalOptions& global);
Runner setup_resume(CLI::App& command, const GlobalOptions& global);
Runner setup_drain(CLI::App& command, const GlobalOptions& global);
Runner setup_lost(CLI::App& command, const GlobalOptions& global);
Runner setup_log(CLI::App& command, const GlobalOptions& global);
Runner setup_doctor(CLI::App& command, const GlobalOptions& global);

// The values an option whose value has `type` (SIGNAL, ACTION, FORMAT) offers, from the lists
// its converter reads, and the schemes a URL starts with; empty for the other types.
std::vector<std::string> value_choices(std::string_view type);

// Adds the global options to `app` (the main app; subcommands fall through to it).
void add_global_options(CLI::App& app, GlobalOptions& options);

} // namespace redsem::cli

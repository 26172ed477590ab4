#include "cli/app.hpp"

#include "cli/commands.hpp"
#include "process/child.hpp"
#include "redis/connection.hpp"
#include "util/errors.hpp"

#include <CLI/CLI.hpp>
#include <array>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <iostream>
#include <map>

#ifndef REDSEM_VERSION
#error "REDSEM_VERSION must be defined by the build"
#endif

namespace redsem::cli {

namespace {

constexpr std::array k_commands{
    Command{"acquire", "Take a slot and print its token", setup_acquire},
    Command{"release", "Give a slot back", setup_release},
    Command{"renew", "Extend a slot's lease", setup_renew},
    Command{"run", "Run a command while holding a slot", setup_run},
    Command{"status", "Show who holds and who waits", setup_status},
    Command{"gc", "Clean up after dead holders and waiters", setup_gc},
};

std::string version_text() {
    return fmt::format("redsem {} (hiredis {}.{}.{})", REDSEM_VERSION, HIREDIS_MAJOR, HIREDIS_MINOR,
                       HIREDIS_PATCH);
}

// "redsem acquire" for the subcommand that was being parsed, else "redsem".
std::string command_path(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands()) {
        return "redsem " + sub->get_name();
    }
    return "redsem";
}

} // namespace

std::span<const Command> commands() {
    return k_commands;
}

int main(int argc, char** argv) {
    ignore_sigpipe();
    CLI::App app{"redsem: a counting semaphore on Redis for shell scripts, cron jobs and CI.",
                 "redsem"};
    app.set_version_flag("--version", version_text());
    app.require_subcommand(1);
    app.footer("Exit status: 0 ok, 1 token holds nothing, 64 usage, 65 conflict, 69 Redis "
               "unavailable, 70 internal error, 75 not acquired in time, 76 slot lost (run), 77 "
               "auth/permission denied; run exits with its command's status. See redsem(1).");
    GlobalOptions global;
    add_global_options(app, global);

    std::map<const CLI::App*, Runner> runners;
    for (const Command& command : commands()) {
        CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.summary));
        sub->fallthrough();
        runners[sub] = command.setup(*sub, global);
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) {
            return app.exit(error, std::cout, std::cerr); // --help, --version
        }
        std::cerr << "redsem: error: " << error.what() << "\n"
                  << "Try '" << command_path(app) << " --help'.\n";
        return static_cast<int>(ExitCode::usage);
    }

    try {
        return runners.at(app.get_subcommands().front())();
    } catch (const UsageError& error) {
        std::cerr << "redsem: error: " << error.what() << "\n"
                  << "Try '" << command_path(app) << " --help'.\n";
        return error.exit_code();
    } catch (const Error& error) {
        if (*error.what() != '\0') {
            std::cerr << "redsem: error: " << error.what() << "\n";
        }
        return error.exit_code();
    } catch (const std::exception& error) {
        std::cerr << "redsem: internal error: " << error.what() << "\n";
        return static_cast<int>(ExitCode::internal);
    }
}

} // namespace redsem::cli

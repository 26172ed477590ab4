#include "cli/app.hpp"

#include "cli/commands.hpp"
#include "cli/help_format.hpp"
#include "cli/options.hpp"
#include "cli/output.hpp"
#include "cli/pre_parse.hpp"
#include "process/child.hpp"
#include "process/secrecy.hpp"
#include "redis/connection.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/stops.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <string_view>
#include <vector>

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
    Command{"limit", "Show or change how many may hold a semaphore", setup_limit},
    Command{"pause", "Admit nobody new (a freeze)", setup_pause},
    Command{"resume", "End a pause", setup_resume},
    Command{"drain", "Pause, then wait until nobody holds", setup_drain},
    Command{"lost", "Declare that Redis may have lost data: admit nobody for a while", setup_lost},
    Command{"log", "Show who held and waited, when, and for how long", setup_log},
    Command{"gc", "Clean up after dead holders and waiters", setup_gc},
    Command{"doctor", "Check whether a Redis is safe for redsem", setup_doctor},
};

// Subcommand --help shows only the subcommand's own options; these are accepted too.
constexpr std::string_view k_global_footer =
    "Global options (before or after the command): -u,--url URL, --prefix PREFIX, "
    "--connect-timeout DUR, --password-file FILE, for redis-sentinel:// --sentinel-password-file "
    "FILE, and for rediss:// --cacert FILE, --cacertdir DIR, --cert FILE, --key FILE, --sni "
    "NAME, --insecure; see 'redsem --help'. Exit statuses "
    "and the JSON output are described in redsem(1).";

// "Exit status: 0 ok, 1 ..., 127 ...; ...", from the published table.
std::string exit_status_text() {
    std::string text = "Exit status:";
    for (const auto& [code, meaning] : k_exit_codes) {
        text += fmt::format(" {} {},", static_cast<int>(code), meaning);
    }
    text.back() = ';';
    return text + " run otherwise exits with its command's status. JSON output and more in "
                  "redsem(1).";
}

std::string version_text() {
    return fmt::format("redsem {} (hiredis {}, TLS: {})", REDSEM_VERSION, hiredis_version(),
                       openssl_version());
}

// "redsem acquire" for the subcommand that was being parsed, else "redsem".
std::string command_path(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands()) {
        return "redsem " + sub->get_name();
    }
    return "redsem";
}

// Edit distance, for suggestions.
std::size_t distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] =
                std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

// " (did you mean 'X'?)" for the candidate closest to `word`, or "" when none is close.
std::string suggestion(std::string_view word, const std::vector<std::string>& candidates) {
    std::string lower(word); // RUN, Status: a case slip is the closest miss of all
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    word = lower;
    const std::string* best = nullptr;
    std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
    for (const std::string& candidate : candidates) {
        std::size_t d = distance(word, candidate);
        if (candidate.size() > word.size() && candidate.starts_with(word) && word.size() > 3) {
            d = 1; // an abbreviation
        }
        if (d < best_distance) {
            best = &candidate;
            best_distance = d;
        }
    }
    return best != nullptr ? fmt::format(" (did you mean '{}'?)", *best) : std::string();
}

// Every option name `command` accepts, its own and the global ones.
std::vector<std::string> option_names(const CLI::App& command) {
    std::vector<std::string> names;
    for (const CLI::App* app = &command; app != nullptr; app = app->get_parent()) {
        for (const CLI::Option* option : app->get_options()) {
            for (const std::string& name : option->get_lnames()) {
                names.push_back("--" + name);
            }
        }
    }
    return names;
}

// The error for a command line CLI11 refused, in redsem's words.
std::string usage_message(const CLI::ParseError& error, const CLI::App& app) {
    const CLI::App* command = &app;
    for (const CLI::App* sub : app.get_subcommands()) {
        command = sub;
    }
    if (dynamic_cast<const CLI::ExtrasError*>(&error) != nullptr) {
        std::vector<std::string> extras = command->remaining();
        if (extras.empty()) {
            extras = app.remaining(true); // an option a subcommand passed up to the globals
        }
        if (!extras.empty() && extras.front().size() > 1 && extras.front()[0] == '-') {
            const std::string word = extras.front().substr(0, extras.front().find('='));
            return fmt::format("unknown option '{}'{}", printable(word, 100),
                               suggestion(word, option_names(*command)));
        }
        if (!extras.empty()) {
            return fmt::format("unexpected argument '{}'", printable(extras.front(), 100));
        }
    }
    std::string message = error.what();
    constexpr std::string_view required = " is required";
    if (message == "A subcommand is required") {
        return "missing command";
    }
    if (const std::size_t at = message.find(": At Most 1 required"); at != std::string::npos) {
        return message.substr(0, at) + " given more than once";
    }
    if (const std::size_t at = message.find(": 1 required "); at != std::string::npos) {
        return message.substr(0, at) + " needs a value"; // "--ttl: 1 required DUR missing"
    }
    if (message.ends_with(required)) {
        return "missing " + message.substr(0, message.size() - required.size());
    }
    if (message.size() > 1 && std::islower(static_cast<unsigned char>(message[1])) != 0) {
        message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
    }
    return message;
}

// The exit status of a command that ended with `status`, once its output is written: a
// failed write is an error (74) unless the command failed already, or the reader went away
// (a closed pipe ends a listing quietly, as SIGPIPE would have).
int finish_output(int status) {
    const int error = flush_stdout();
    if (error == 0 || error == EPIPE) {
        return status;
    }
    std::cerr << "redsem: error: cannot write to standard output (" << std::strerror(error)
              << ")\n";
    return status != 0 ? status : static_cast<int>(ExitCode::output);
}

} // namespace

std::span<const Command> commands() {
    return k_commands;
}

void declare_globals(CLI::App& app, GlobalOptions& global) {
    app.description("redsem: a counting semaphore on Redis for shell scripts, cron jobs and CI.");
    app.name("redsem");
    app.set_version_flag("--version", version_text());
    app.require_subcommand(1);
    app.footer(exit_status_text());
    app.formatter(std::make_shared<HelpFormatter>()); // the subcommands take it over
    add_global_options(app, global);
}

Runner declare_command(CLI::App& app, const Command& command, const GlobalOptions& global) {
    CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.summary));
    sub->fallthrough();
    sub->footer(std::string(k_global_footer));
    return command.setup(*sub, global);
}

int main(int argc, char** argv) {
    forbid_inspection();
    reserve_standard_descriptors();
    ignore_sigpipe();
    watch_stops(); // (RetryPolicy)
    CLI::App app;
    GlobalOptions global;
    declare_globals(app, global);

    // Only the invoked command is built (building them all was most of the work of starting
    // up); all of them when the command cannot be told before parsing (redsem --help).
    std::vector<std::string> words(argv + 1, argv + argc);
    hide_url_passwords(argc, argv); // ps shows argv: what is parsed is the copy
    const std::size_t invoked_at = find_command(app, words);
    std::map<const CLI::App*, Runner> runners;
    std::vector<std::string> names;
    for (const Command& command : commands()) {
        names.emplace_back(command.name);
        if (invoked_at < words.size() && words[invoked_at] != command.name) {
            continue;
        }
        Runner runner = declare_command(app, command, global);
        runners[app.get_subcommand(std::string(command.name))] = std::move(runner);
    }
    if (runners.empty()) {
        // CLI11 never sees the other commands' names: the unknown one is refused here.
        const std::string& word = words[invoked_at];
        std::cerr << fmt::format("redsem: error: unknown command '{}'{}\nTry 'redsem --help'.\n",
                                 printable(word, 100), suggestion(word, names));
        return static_cast<int>(ExitCode::usage);
    }

    std::vector<std::string> cli11_words = words_for_cli11(app, std::move(words));
    try {
        app.parse(cli11_words);
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) {
            return finish_output(app.exit(error, std::cout, std::cerr)); // --help, --version
        }
        std::cerr << "redsem: error: " << usage_message(error, app) << "\n"
                  << "Try '" << command_path(app) << " --help'.\n";
        return static_cast<int>(ExitCode::usage);
    } catch (const UsageError& error) { // an option's value, converted as it is parsed
        std::cerr << "redsem: error: " << error.what() << "\n"
                  << "Try '" << command_path(app) << " --help'.\n";
        return error.exit_code();
    }

    try {
        return finish_output(runners.at(app.get_subcommands().front())());
    } catch (const UsageError& error) {
        std::cerr << "redsem: error: " << error.what() << "\n"
                  << "Try '" << command_path(app) << " --help'.\n";
        return error.exit_code();
    } catch (const Error& error) {
        if (*error.what() != '\0' && !error.told()) {
            std::cerr << "redsem: error: " << error.what() << "\n";
        }
        return error.exit_code();
    } catch (const std::exception& error) {
        std::cerr << "redsem: internal error: " << error.what() << "\n";
        return static_cast<int>(ExitCode::internal);
    }
}

} // namespace redsem::cli

#include "cli/app.hpp"

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "process/child.hpp"
#include "redis/connection.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <optional>
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
    Command{"log", "Show who held and waited, when, and for how long", setup_log},
    Command{"gc", "Clean up after dead holders and waiters", setup_gc},
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

bool is_option(const std::string& word) {
    return word.size() > 1 && word[0] == '-';
}

// How many words option `word` takes from the command line, itself and a separate value,
// as `command` or an app above it (global options) declares it; 0 when none declares it.
std::size_t option_words(const CLI::App& command, const std::string& word) {
    auto takes_value = [&command](const std::string& name) -> std::optional<bool> {
        for (const CLI::App* app = &command; app != nullptr; app = app->get_parent()) {
            if (const CLI::Option* option = app->get_option_no_throw(name)) {
                return option->get_items_expected_max() > 0;
            }
        }
        return std::nullopt;
    };
    if (word.starts_with("--")) {
        const std::size_t equals = word.find('=');
        const auto value = takes_value(word.substr(0, equals));
        if (!value) {
            return 0;
        }
        return *value && equals == std::string::npos ? 2 : 1;
    }
    // Short options, maybe grouped: "-q", "-qn3", "-qn 3".
    for (std::size_t i = 1; i < word.size(); ++i) {
        const auto value = takes_value(std::string{'-', word[i]});
        if (!value) {
            return 0;
        }
        if (*value) {
            return i + 1 < word.size() ? 1 : 2;
        }
    }
    return 1;
}

// The index of the subcommand's name in `args` (after the global options), or args.size().
std::size_t subcommand_at(const CLI::App& app, const std::vector<std::string>& args) {
    std::size_t at = 0;
    while (at < args.size() && is_option(args[at])) {
        const std::size_t words = option_words(app, args[at]);
        if (words == 0 || args[at] == "--") {
            return args.size();
        }
        at += words;
    }
    return std::min(at, args.size());
}

// `run` takes its command as flock(1), env(1) and timeout(1) do: redsem's own options come
// first, and the first word after NAME that is not one of them starts the command, which
// gets every word from there on, options included. Marks that word with a "--" before it,
// so that CLI11 takes the rest as the command.
void mark_command_start(const CLI::App& app, std::vector<std::string>& args) {
    std::size_t at = subcommand_at(app, args);
    if (at == args.size() || args[at] != "run") {
        return;
    }
    const CLI::App& run = *app.get_subcommand("run");
    bool named = false;
    for (++at; at < args.size();) {
        if (args[at] == "--") {
            return;
        }
        const std::size_t words = is_option(args[at]) ? option_words(run, args[at]) : 0;
        // CLI11 takes an undeclared "-<digit>..." for a positional (a negative number).
        const bool positional =
            words == 0 &&
            (!is_option(args[at]) || std::isdigit(static_cast<unsigned char>(args[at][1])));
        if (!positional) {
            if (words == 0) {
                return; // unknown: CLI11 reports it
            }
            at += words;
        } else if (!named) {
            named = true;
            ++at;
        } else {
            args.insert(args.begin() + static_cast<std::ptrdiff_t>(at), "--");
            return;
        }
    }
}

// CLI11 takes "--label=" (an empty value) as "--label" and the next word as its value: give it
// the empty value as a word of its own ("--label" ""), as the shell's --label "" would. Only
// redsem's own options (those before a "--"), and only those that take a value.
void split_empty_values(const CLI::App& app, std::vector<std::string>& args) {
    const std::size_t command_at = subcommand_at(app, args);
    // (check_subcommand() has refused an unknown command.)
    const CLI::App* command = command_at < args.size() ? app.get_subcommand(args[command_at]) : nullptr;
    for (std::size_t at = 0; at < args.size() && args[at] != "--"; ++at) {
        const std::string& word = args[at];
        if (!word.starts_with("--") || !word.ends_with('=') || word.find('=') + 1 != word.size()) {
            continue;
        }
        const CLI::App& scope = command != nullptr && at > command_at ? *command : app;
        if (option_words(scope, word.substr(0, word.size() - 1)) == 2) {
            args[at].pop_back();
            args.insert(args.begin() + static_cast<std::ptrdiff_t>(at) + 1, "");
            ++at;
        }
    }
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
        if (!extras.empty() && is_option(extras.front())) {
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

// Refuses an unknown subcommand, suggesting the closest one.
void check_subcommand(const CLI::App& app, const std::vector<std::string>& args) {
    const std::size_t at = subcommand_at(app, args);
    if (at == args.size()) {
        return;
    }
    std::vector<std::string> names;
    for (const Command& command : commands()) {
        if (command.name == args[at]) {
            return;
        }
        names.emplace_back(command.name);
    }
    throw UsageError(fmt::format("unknown command '{}'{}", printable(args[at], 100),
                                 suggestion(args[at], names)));
}

// The exit status of a command that ended with `status`, once its output is written: a
// failed write is an error (74) unless the command failed already, or the reader went away
// (a closed pipe ends a listing quietly, as SIGPIPE would have).
int finish_output(int status) {
    const int error = flush_stdout();
    if (error == 0 || error == EPIPE) {
        return status;
    }
    std::cerr << "redsem: error: cannot write to standard output (" << std::strerror(error) << ")\n";
    return status != 0 ? status : static_cast<int>(ExitCode::output);
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
    app.footer(exit_status_text());
    GlobalOptions global;
    add_global_options(app, global);

    // Only the invoked command is built (building them all was most of the work of starting
    // up); all of them when the command cannot be told before parsing (redsem --help).
    std::vector<std::string> args(argv + 1, argv + argc);
    const std::size_t invoked_at = subcommand_at(app, args);
    std::map<const CLI::App*, Runner> runners;
    for (const Command& command : commands()) {
        if (invoked_at < args.size() && args[invoked_at] != command.name) {
            continue;
        }
        CLI::App* sub = app.add_subcommand(std::string(command.name), std::string(command.summary));
        sub->fallthrough();
        sub->footer(std::string(k_global_footer));
        runners[sub] = command.setup(*sub, global);
    }

    try {
        check_subcommand(app, args);
    } catch (const UsageError& error) {
        std::cerr << "redsem: error: " << error.what() << "\nTry 'redsem --help'.\n";
        return error.exit_code();
    }
    mark_command_start(app, args);
    split_empty_values(app, args);
    std::reverse(args.begin(), args.end()); // CLI11 takes the words last first
    try {
        app.parse(args);
    } catch (const CLI::ParseError& error) {
        if (error.get_exit_code() == 0) {
            return finish_output(app.exit(error, std::cout, std::cerr)); // --help, --version
        }
        std::cerr << "redsem: error: " << usage_message(error, app) << "\n"
                  << "Try '" << command_path(app) << " --help'.\n";
        return static_cast<int>(ExitCode::usage);
    }

    try {
        return finish_output(runners.at(app.get_subcommands().front())());
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

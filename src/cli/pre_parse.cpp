#include "cli/pre_parse.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <optional>

namespace redsem::cli {

namespace {

bool is_option(const std::string& word) {
    return word.size() > 1 && word[0] == '-';
}

// Whether option `name` ("--ttl", "-n") of `command`, or of an app above it (the global
// options, which every command falls through to), takes a value; nullopt when none declares
// it.
std::optional<bool> takes_value(const CLI::App& command, const std::string& name) {
    for (const CLI::App* app = &command; app != nullptr; app = app->get_parent()) {
        if (const CLI::Option* option = app->get_option_no_throw(name)) {
            return option->get_items_expected_max() > 0;
        }
    }
    return std::nullopt;
}

// How many words option `word` takes from the command line as `command` declares it: 1 for a
// flag or an option with its value attached ("--ttl=5s", "-n3", "-qn3"), 2 for one whose value
// is the next word; 0 when `word` is no option `command` knows.
std::size_t option_words(const CLI::App& command, const std::string& word) {
    if (word.starts_with("--")) {
        const std::size_t equals = word.find('=');
        const auto value = takes_value(command, word.substr(0, equals));
        if (!value) {
            return 0;
        }
        return *value && equals == std::string::npos ? 2 : 1;
    }
    // Short options, maybe grouped: "-q", "-qn3", "-qn 3".
    for (std::size_t i = 1; i < word.size(); ++i) {
        const auto value = takes_value(command, std::string{'-', word[i]});
        if (!value) {
            return 0;
        }
        if (*value) {
            return i + 1 < word.size() ? 1 : 2;
        }
    }
    return 1;
}

// "--opt=" for an option of `command` that takes a value.
bool is_empty_value(const CLI::App& command, const std::string& word) {
    return word.starts_with("--") && word.find('=') + 1 == word.size() &&
           takes_value(command, word.substr(0, word.size() - 1)).value_or(false);
}

} // namespace

std::size_t find_command(const CLI::App& app, const std::vector<std::string>& words) {
    std::size_t at = 0;
    while (at < words.size() && is_option(words[at])) {
        const std::size_t taken = option_words(app, words[at]);
        if (taken == 0) {
            return words.size();
        }
        at += taken;
    }
    return std::min(at, words.size());
}

std::vector<std::string> words_for_cli11(const CLI::App& app, std::vector<std::string> words) {
    const std::size_t command_at = find_command(app, words);
    const CLI::App* command = nullptr;
    if (command_at < words.size()) {
        const auto named = app.get_subcommands(
            [&](const CLI::App* sub) { return sub->get_name() == words[command_at]; });
        command = named.empty() ? nullptr : named.front();
    }
    // Until run's COMMAND starts; an unknown option ends the search (CLI11 reports it).
    bool finding_run_command = command != nullptr && command->get_name() == "run";
    bool run_named = false;
    std::vector<std::string> edited;
    edited.reserve(words.size() + 2);
    auto keep = [&](std::size_t from, std::size_t to) {
        edited.insert(edited.end(), words.begin() + static_cast<std::ptrdiff_t>(from),
                      words.begin() + static_cast<std::ptrdiff_t>(std::min(to, words.size())));
    };
    for (std::size_t at = 0; at < words.size(); ++at) {
        const std::string& word = words[at];
        const CLI::App& scope = command != nullptr && at > command_at ? *command : app;
        if (word == "--") {
            keep(at, words.size());
            break;
        }
        if (is_empty_value(scope, word)) {
            edited.push_back(word.substr(0, word.size() - 1));
            edited.emplace_back();
            continue;
        }
        const std::size_t taken = is_option(word) ? option_words(scope, word) : 0;
        if (taken > 0) {
            keep(at, at + taken); // its value, whatever it looks like, is its value
            at += taken - 1;
            continue;
        }
        // CLI11 takes an undeclared "-<digit>..." for a positional (a negative number).
        const bool positional =
            !is_option(word) || std::isdigit(static_cast<unsigned char>(word[1])) != 0;
        if (!positional) {
            finding_run_command = false;
        } else if (finding_run_command && at > command_at) {
            if (run_named) {
                edited.emplace_back("--");
                keep(at, words.size());
                break;
            }
            run_named = true;
        }
        edited.push_back(word);
    }
    std::reverse(edited.begin(), edited.end()); // the order App::parse(vector&) takes
    return edited;
}

} // namespace redsem::cli

#include "cli/option_table.hpp"

#include "cli/app.hpp"
#include "cli/commands.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string_view>

namespace redsem::cli {

namespace {

// What a value of `type` completes to. The types of values that are typed by hand (DUR, N,
// CODE, TEXT, WHEN...) complete to nothing.
ValueSpec value_spec(const std::string& type, bool positional) {
    ValueSpec spec{type, ValueKind::text, {}};
    if (positional) {
        spec.kind = type == "NAME"      ? ValueKind::names
                    : type == "COMMAND" ? ValueKind::command
                                        : ValueKind::text;
        return spec;
    }
    spec.choices = value_choices(type);
    if (type == "URL") {
        spec.kind = ValueKind::urls;
    } else if (!spec.choices.empty()) {
        spec.kind = ValueKind::choices;
    } else if (type == "FILE") {
        spec.kind = ValueKind::files;
    } else if (type == "DIR") {
        spec.kind = ValueKind::dirs;
    } else if (type == "PID") {
        spec.kind = ValueKind::pids;
    } else if (type == "NAME") {
        spec.kind = ValueKind::hosts; // --sni NAME: a server name
    }
    return spec;
}

std::vector<std::string> names_of(const CLI::Option& option) {
    std::vector<std::string> names;
    for (const std::string& name : option.get_snames()) {
        names.push_back("-" + name);
    }
    for (const std::string& name : option.get_lnames()) {
        names.push_back("--" + name);
    }
    return names;
}

CommandEntry entry_of(const CLI::App& app, const std::string& name, const std::string& summary) {
    CommandEntry entry{name, summary, {}, {}};
    for (const CLI::Option* option : app.get_options()) {
        if (option->get_group().empty()) {
            continue; // hidden
        }
        if (option->get_positional()) {
            // "COMMAND [ARGS...]" is the type --help shows; the positional is COMMAND.
            entry.positionals.push_back(PositionalEntry{
                option->get_name(), option->get_items_expected_max() > 1,
                value_spec(option->get_name(), true), summary_of(option->get_description())});
            continue;
        }
        OptionEntry row{names_of(*option), {}, {}, false, summary_of(option->get_description())};
        if (option->get_items_expected_max() > 0) {
            row.value = value_spec(option->get_type_name(), false);
        }
        for (const CLI::Option* other : option->get_excludes()) {
            for (std::string& excluded : names_of(*other)) {
                row.excludes.push_back(std::move(excluded));
            }
        }
        row.ends_parsing = option == app.get_help_ptr() || option == app.get_version_ptr();
        entry.options.push_back(std::move(row));
    }
    return entry;
}

} // namespace

std::string summary_of(const std::string& help) {
    // A leading condition ("rediss://: ", "With --while-pid: ") belongs to the clause after it.
    std::size_t from = 0;
    if (const std::size_t colon = help.find(": "); colon != std::string::npos) {
        const std::string_view condition(help.data(), colon);
        if (condition.starts_with("With ") || condition.ends_with("://")) {
            from = colon + 2;
        }
    }
    std::size_t end = help.size();
    for (const std::string_view stop : {". ", "; ", " (", ": "}) {
        end = std::min(end, help.find(stop, from));
    }
    std::string summary = help.substr(0, end);
    if (summary.ends_with('.')) {
        summary.pop_back();
    }
    return summary;
}

std::vector<CommandEntry> option_table() {
    CLI::App app;
    GlobalOptions global;
    declare_globals(app, global);
    std::vector<CommandEntry> table{entry_of(app, "", app.get_description())};
    for (const Command& command : commands()) {
        declare_command(app, command, global);
        const std::string name(command.name);
        table.push_back(entry_of(*app.get_subcommand(name), name, std::string(command.summary)));
    }
    return table;
}

} // namespace redsem::cli

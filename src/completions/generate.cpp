// redsem-completions TEMPLATE_DIR OUT_DIR: writes the bash, zsh and fish completions of redsem
// into OUT_DIR, each from its template in TEMPLATE_DIR (completions/*.in) with the line
// "@OPTION_TABLE@" replaced by redsem's option table (src/cli/option_table.cpp) in that
// shell's terms. The templates hold what is not in the table: how each shell walks a command
// line, reads the semaphore names from Redis, and hands run's COMMAND to its own completion.
#include "cli/option_table.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using redsem::cli::CommandEntry;
using redsem::cli::OptionEntry;
using redsem::cli::PositionalEntry;
using redsem::cli::ValueKind;
using redsem::cli::ValueSpec;

constexpr std::string_view k_placeholder = "@OPTION_TABLE@";
constexpr std::string_view k_header =
    "Generated from redsem's option table (src/cli/option_table.cpp) by "
    "src/completions/generate.cpp: a new option is declared in src/cli/command_options.cpp.";

std::string joined(const std::vector<std::string>& words, std::string_view separator = " ") {
    std::string text;
    for (const std::string& word : words) {
        text += (text.empty() ? "" : std::string(separator)) + word;
    }
    return text;
}

// `text` in single quotes, for bash and zsh.
std::string sh_quoted(std::string_view text) {
    std::string quoted = "'";
    for (const char c : text) {
        quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return quoted + "'";
}

// `text` in single quotes, for fish (which escapes inside them).
std::string fish_quoted(std::string_view text) {
    std::string quoted = "'";
    for (const char c : text) {
        if (c == '\'' || c == '\\') {
            quoted += '\\';
        }
        quoted += c;
    }
    return quoted + "'";
}

// The options of `command` beside the global ones: for redsem itself, --help and --version.
std::vector<const OptionEntry*> own_options(const std::vector<CommandEntry>& table,
                                            const CommandEntry& command) {
    std::vector<const OptionEntry*> options;
    for (const OptionEntry& option : command.options) {
        if (&command != &table.front() || option.ends_parsing) {
            options.push_back(&option);
        }
    }
    return options;
}

// The global options: they say where Redis is and how to reach it, before or after the
// subcommand.
std::vector<const OptionEntry*> global_options(const std::vector<CommandEntry>& table) {
    std::vector<const OptionEntry*> options;
    for (const OptionEntry& option : table.front().options) {
        if (!option.ends_parsing) {
            options.push_back(&option);
        }
    }
    return options;
}

std::vector<std::string> names_of(const std::vector<const OptionEntry*>& options,
                                  bool values_only) {
    std::vector<std::string> names;
    for (const OptionEntry* option : options) {
        if (!values_only || !option->value.type.empty()) {
            names.insert(names.end(), option->names.begin(), option->names.end());
        }
    }
    return names;
}

// Each option of `table` with the name of the command it belongs to ("" for a global one),
// the subcommands' first: they win over a global option of the same name.
std::vector<std::pair<std::string, const OptionEntry*>>
options_by_command(const std::vector<CommandEntry>& table) {
    std::vector<std::pair<std::string, const OptionEntry*>> options;
    for (const CommandEntry& command : table) {
        if (&command != &table.front()) {
            for (const OptionEntry* option : own_options(table, command)) {
                options.emplace_back(command.name, option);
            }
        }
    }
    for (const OptionEntry* option : global_options(table)) {
        options.emplace_back("", option);
    }
    return options;
}

// "name", "names" (any number), "command" or "text" for each positional, in order.
std::string positional_kinds(const CommandEntry& command) {
    std::vector<std::string> kinds;
    for (const PositionalEntry& positional : command.positionals) {
        switch (positional.value.kind) {
        case ValueKind::names:
            kinds.emplace_back(positional.repeats ? "names" : "name");
            break;
        case ValueKind::command:
            kinds.emplace_back("command");
            break;
        default:
            kinds.emplace_back("text");
        }
    }
    return joined(kinds);
}

// The kind word the bash and fish templates read: "choices WORD...", "urls SCHEME...", files,
// dirs, pids, hosts; "" for free text.
std::string kind_word(const ValueSpec& value) {
    switch (value.kind) {
    case ValueKind::choices:
        return "choices " + joined(value.choices);
    case ValueKind::urls:
        return "urls " + joined(value.choices);
    case ValueKind::files:
        return "files";
    case ValueKind::dirs:
        return "dirs";
    case ValueKind::pids:
        return "pids";
    case ValueKind::hosts:
        return "hosts";
    default:
        return "";
    }
}

// A case statement of bash (or zsh, same syntax) over the subcommand "$1", one branch per
// command with what `body` gives it; commands with an empty body are left out.
std::string sh_case(const std::vector<CommandEntry>& table,
                    const std::function<std::string(const CommandEntry&)>& body,
                    std::string_view indent) {
    std::string text = fmt::format("{}case $1 in\n", indent);
    for (const CommandEntry& command : table) {
        const std::string branch = body(command);
        if (!branch.empty()) {
            text += fmt::format("{}    {}) {} ;;\n", indent,
                                command.name.empty() ? "''" : command.name, branch);
        }
    }
    return text + fmt::format("{}esac\n", indent);
}

std::string bash_table(const std::vector<CommandEntry>& table) {
    std::string text = fmt::format("# {}\n\n", k_header);
    std::vector<std::string> commands;
    for (const CommandEntry& command : table) {
        if (!command.name.empty()) {
            commands.push_back(command.name);
        }
    }
    const std::vector<const OptionEntry*> globals = global_options(table);
    text += fmt::format("_redsem_commands={}\n\n", sh_quoted(joined(commands)));
    text += "# The global options (before or after the subcommand), and those of them that take "
            "a value.\n";
    text += fmt::format("_redsem_global_opts={}\n_redsem_global_value_opts={}\n\n",
                        sh_quoted(joined(names_of(globals, false))),
                        sh_quoted(joined(names_of(globals, true))));
    const auto list = [&](bool values_only) {
        return sh_case(
            table,
            [&](const CommandEntry& c) {
                const std::vector<std::string> names = names_of(own_options(table, c), values_only);
                return names.empty() ? std::string() : "opts+=" + sh_quoted(" " + joined(names));
            },
            "    ");
    };
    text += "# All options of subcommand $1 (\"\" before the subcommand), the global ones "
            "included.\n_redsem_all_opts() {\n    local opts=$_redsem_global_opts\n" +
            list(false) + "    printf '%s' \"$opts\"\n}\n\n";
    text += "# Those that take a value.\n_redsem_value_opts() {\n"
            "    local opts=$_redsem_global_value_opts\n" +
            list(true) + "    printf '%s' \"$opts\"\n}\n\n";
    text += "# How the value of option $2 of subcommand $1 completes: \"choices WORD...\", "
            "\"urls SCHEME...\",\n# files, dirs, pids or hosts; nothing for free text.\n"
            "_redsem_value_kind() {\n    case \"$1 $2\" in\n";
    for (const auto& [command, option] : options_by_command(table)) {
        const std::string kind = kind_word(option->value);
        if (kind.empty()) {
            continue;
        }
        std::vector<std::string> patterns;
        for (const std::string& name : option->names) {
            patterns.push_back(command.empty() ? "*' " + name + "'"
                                               : sh_quoted(command + " " + name));
        }
        text += fmt::format("        {}) printf '%s' {} ;;\n", joined(patterns, " | "),
                            sh_quoted(kind));
    }
    text += "    esac\n}\n\n# The positionals of subcommand $1, in order: name (a semaphore), "
            "names (any number of\n# them), command (a command and its arguments) or text.\n"
            "_redsem_positionals() {\n";
    text += sh_case(
        table,
        [](const CommandEntry& c) {
            const std::string kinds = positional_kinds(c);
            return kinds.empty() ? kinds : "printf '%s' " + sh_quoted(kinds);
        },
        "    ");
    return text + "}\n";
}

// fish's `complete` line for each option: a global one wherever redsem's options may come,
// --version before the subcommand, the others after the subcommands that have them (one line
// for an option several have alike).
std::string fish_option_lines(const std::vector<CommandEntry>& table) {
    struct Row {
        const OptionEntry* option;
        std::vector<std::string> commands; // "" for redsem itself
        bool everywhere;
    };
    std::vector<Row> rows;
    for (const OptionEntry* option : global_options(table)) {
        rows.push_back(Row{option, {}, true});
    }
    for (const CommandEntry& command : table) {
        for (const OptionEntry* option : own_options(table, command)) {
            const auto alike = [&](const Row& row) {
                return !row.everywhere && row.option->names == option->names &&
                       row.option->summary == option->summary &&
                       row.option->value.type == option->value.type &&
                       row.option->value.choices == option->value.choices;
            };
            auto row = std::find_if(rows.begin(), rows.end(), alike);
            if (row == rows.end()) {
                rows.push_back(Row{option, {}, false});
                row = rows.end() - 1;
            }
            row->commands.push_back(command.name);
        }
    }
    std::string text;
    for (const Row& row : rows) {
        std::string condition;
        if (row.everywhere || row.commands.size() == table.size()) {
            condition = "__redsem_options_ok";
        } else if (row.commands == std::vector<std::string>{""}) {
            condition = "__redsem_use_subcommand";
        } else {
            condition = fish_quoted("__redsem_seen_subcommand_from " + joined(row.commands));
        }
        std::string line = "complete -c redsem -n " + condition;
        for (const std::string& name : row.option->names) {
            line += (name.starts_with("--") ? " -l " + name.substr(2) : " -s " + name.substr(1));
        }
        const ValueSpec& value = row.option->value;
        if (value.kind == ValueKind::files) {
            line += " -r -F";
        } else if (!value.type.empty()) {
            line += " -x";
        }
        switch (value.kind) {
        case ValueKind::choices:
        case ValueKind::urls:
            line += " -a " + fish_quoted(joined(value.choices));
            break;
        case ValueKind::dirs:
            line += " -a '(__fish_complete_directories)'";
            break;
        case ValueKind::pids:
            line += " -a '(__fish_complete_pids)'";
            break;
        case ValueKind::hosts:
            line += " -a '(__fish_print_hostnames)'";
            break;
        default:
            break;
        }
        text += line + " -d " + fish_quoted(row.option->summary) + "\n";
    }
    return text;
}

std::string fish_table(const std::vector<CommandEntry>& table) {
    std::string text = fmt::format("# {}\n\n", k_header);
    const auto fish_switch = [&](const std::function<std::string(const CommandEntry&)>& body) {
        std::string cases = "    switch \"$argv[1]\"\n";
        for (const CommandEntry& command : table) {
            const std::string branch = body(command);
            if (!branch.empty()) {
                cases += fmt::format("        case {}\n            {}\n",
                                     command.name.empty() ? "''" : command.name, branch);
            }
        }
        return cases + "    end\n";
    };
    const auto lines = [](const std::vector<std::string>& words) {
        return words.empty() ? std::string() : "printf '%s\\n' " + joined(words);
    };
    const std::vector<const OptionEntry*> globals = global_options(table);
    text += "# The global options (before or after the subcommand), one per line.\n"
            "function __redsem_global_opts\n    " +
            lines(names_of(globals, false)) + "\nend\n\n";
    text += "# The options of subcommand $argv[1] (empty before the subcommand) that take a "
            "value, the\n# global ones included.\nfunction __redsem_value_opts\n    " +
            lines(names_of(globals, true)) + "\n";
    text += fish_switch(
        [&](const CommandEntry& c) { return lines(names_of(own_options(table, c), true)); });
    text += "end\n\n# How the value of option $argv[2] of subcommand $argv[1] completes (as "
            "the bash one).\nfunction __redsem_value_kind\n    switch \"$argv[1] $argv[2]\"\n";
    for (const auto& [command, option] : options_by_command(table)) {
        const std::string kind = kind_word(option->value);
        if (!kind.empty()) {
            std::vector<std::string> patterns;
            for (const std::string& name : option->names) {
                patterns.push_back(command.empty() ? fish_quoted("* " + name)
                                                   : fish_quoted(command + " " + name));
            }
            text += fmt::format("        case {}\n            echo {}\n", joined(patterns),
                                fish_quoted(kind));
        }
    }
    text += "    end\nend\n\n# The positionals of subcommand $argv[1] (as the bash one).\n"
            "function __redsem_positionals\n";
    text += fish_switch([](const CommandEntry& c) {
        const std::string kinds = positional_kinds(c);
        return kinds.empty() ? kinds : "echo " + kinds;
    });
    text += "end\n\ncomplete -c redsem -f\n\n";
    for (const CommandEntry& command : table) {
        if (!command.name.empty()) {
            text += fmt::format("complete -c redsem -n __redsem_use_subcommand -a {} -d {}\n",
                                command.name, fish_quoted(command.summary));
        }
    }
    return text + "\n" + fish_option_lines(table);
}

// `text` for a part of an _arguments spec: the characters it reads are quoted.
std::string zsh_spec_text(std::string_view text) {
    std::string escaped;
    for (const char c : text) {
        if (c == ':' || c == '[' || c == ']' || c == '\\') {
            escaped += '\\';
        }
        escaped += c;
    }
    return escaped;
}

// How _arguments completes a value.
std::string zsh_action(const ValueSpec& value) {
    std::string action;
    switch (value.kind) {
    case ValueKind::choices:
        action = "(" + joined(value.choices) + ")";
        break;
    case ValueKind::urls:
        action = "_redsem_urls";
        break;
    case ValueKind::files:
        action = "_files";
        break;
    case ValueKind::dirs:
        action = "_files -/";
        break;
    case ValueKind::pids:
        action = "_pids";
        break;
    case ValueKind::hosts:
        action = "_hosts";
        break;
    case ValueKind::names:
        action = "_redsem_names";
        break;
    default:
        action = " ";
    }
    return action;
}

std::string zsh_option_spec(const OptionEntry& option) {
    std::vector<std::string> excluded;
    if (option.ends_parsing) {
        excluded = {"-", "*"};
    } else if (option.names.size() > 1 || !option.excludes.empty()) {
        excluded = option.names;
        excluded.insert(excluded.end(), option.excludes.begin(), option.excludes.end());
    }
    std::vector<std::string> names;
    for (const std::string& name : option.names) {
        const bool value = !option.value.type.empty();
        names.push_back(name + (value ? (name.starts_with("--") ? "=" : "+") : ""));
    }
    std::string spec = excluded.empty() ? "" : sh_quoted("(" + joined(excluded) + ")");
    spec += names.size() > 1 ? "{" + joined(names, ",") + "}" : names.front();
    std::string rest = "[" + zsh_spec_text(option.summary) + "]";
    if (!option.value.type.empty()) {
        rest += ":" + zsh_spec_text(option.value.type) + ":" + zsh_action(option.value);
    }
    return spec + sh_quoted(rest);
}

// The schemes a --url starts with.
std::vector<std::string> url_schemes(const std::vector<CommandEntry>& table) {
    for (const OptionEntry& option : table.front().options) {
        if (option.value.kind == ValueKind::urls) {
            return option.value.choices;
        }
    }
    return {};
}

std::string zsh_table(const std::vector<CommandEntry>& table) {
    std::string text = fmt::format("# {}\n\n", k_header);
    text += "# The subcommands, for _describe.\n(( $+functions[_redsem_commands] )) ||\n"
            "_redsem_commands() {\n  reply=(\n";
    for (const CommandEntry& command : table) {
        if (!command.name.empty()) {
            text += "    " + sh_quoted(command.name + ":" + command.summary) + "\n";
        }
    }
    text += "  )\n}\n\n(( $+functions[_redsem_urls] )) ||\n_redsem_urls() {\n  local expl\n"
            "  _wanted urls expl 'Redis URL' compadd -S '' -- " +
            joined(url_schemes(table)) + "\n}\n\n";
    text += "# The global options' names, in $reply.\n(( $+functions[_redsem_global_opts] )) ||\n"
            "_redsem_global_opts() {\n  reply=(" +
            joined(names_of(global_options(table), false)) + ")\n}\n\n";
    text += "# The _arguments specs of subcommand $1 (\"\" for redsem itself) in $reply: its "
            "options, the\n# global ones included, and its positionals but COMMAND (run's, "
            "which the caller completes).\n# Fails for a name that is no subcommand.\n"
            "(( $+functions[_redsem_specs] )) ||\n_redsem_specs() {\n  local -a global=(\n";
    for (const OptionEntry& option : table.front().options) {
        if (!option.ends_parsing) {
            text += "    " + zsh_option_spec(option) + "\n";
        }
    }
    text += "  )\n  case $1 in\n";
    for (const CommandEntry& command : table) {
        text += fmt::format("    {})\n      reply=(\"${{global[@]}}\"\n",
                            command.name.empty() ? "''" : command.name);
        for (const OptionEntry& option : command.options) {
            if (&command != &table.front() || option.ends_parsing) {
                text += "        " + zsh_option_spec(option) + "\n";
            }
        }
        int position = 0;
        for (const PositionalEntry& positional : command.positionals) {
            ++position;
            if (positional.value.kind == ValueKind::command) {
                continue;
            }
            const std::string where = positional.repeats ? "*" : std::to_string(position);
            text += "        " +
                    sh_quoted(where + ":" + zsh_spec_text(positional.summary) + ":" +
                              zsh_action(positional.value)) +
                    "\n";
        }
        text += "      ) ;;\n";
    }
    text += "    *) return 1 ;;\n  esac\n}\n\n# The options of subcommand $1 that take a value, "
            "the global\n# ones included, in $reply.\n(( $+functions[_redsem_value_opts] )) ||\n"
            "_redsem_value_opts() {\n  reply=(" +
            joined(names_of(global_options(table), true)) + ")\n";
    text += sh_case(
        table,
        [&](const CommandEntry& c) {
            const std::vector<std::string> names = names_of(own_options(table, c), true);
            return names.empty() ? std::string() : "reply+=(" + joined(names) + ")";
        },
        "  ");
    return text + "}\n";
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        throw std::runtime_error("cannot read " + path);
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out.flush()) {
        throw std::runtime_error("cannot write " + path);
    }
}

// The template with its placeholder line replaced by `table`.
std::string filled(const std::string& template_path, const std::string& table) {
    std::string text = read_file(template_path);
    const std::size_t at = text.find(k_placeholder);
    if (at == std::string::npos || text.find(k_placeholder, at + 1) != std::string::npos) {
        throw std::runtime_error(
            fmt::format("{} must have the line {} once", template_path, k_placeholder));
    }
    return text.replace(at, k_placeholder.size() + 1, table);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: redsem-completions TEMPLATE_DIR OUT_DIR\n";
        return 64;
    }
    const std::string from = argv[1];
    const std::string to = argv[2];
    try {
        const std::vector<CommandEntry> table = redsem::cli::option_table();
        write_file(to + "/redsem.bash", filled(from + "/redsem.bash.in", bash_table(table)));
        write_file(to + "/_redsem", filled(from + "/_redsem.in", zsh_table(table)));
        write_file(to + "/redsem.fish", filled(from + "/redsem.fish.in", fish_table(table)));
    } catch (const std::exception& error) {
        std::cerr << "redsem-completions: " << error.what() << "\n";
        return 1;
    }
    return 0;
}

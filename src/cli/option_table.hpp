#pragma once

// redsem's command line as data: every subcommand, option and positional, read from the same
// CLI11 declarations that build --help. The shells' completions are generated from it at build
// time (src/completions/), so that a new option is one declaration and its man page entry.
#include <string>
#include <vector>

namespace redsem::cli {

// How a value completes in a shell.
enum class ValueKind {
    text,    // anything: nothing to offer (DUR, N, TEXT...)
    choices, // one of ValueSpec::choices
    files,
    dirs,
    pids,
    hosts,
    urls,    // a URL: ValueSpec::choices are the schemes it may start with
    names,   // semaphore names, read live from Redis
    command, // a command and its arguments (run's COMMAND)
};

struct ValueSpec {
    std::string type; // as --help shows it: "DUR", "FILE"; "" for a flag
    ValueKind kind = ValueKind::text;
    std::vector<std::string> choices;
};

struct OptionEntry {
    std::vector<std::string> names; // short ones first: "-n", "--limit"
    ValueSpec value;
    std::vector<std::string> excludes; // the names of the options it cannot go with
    bool ends_parsing = false;         // --help, --version: nothing else counts
    std::string summary;               // the first clause of its help
};

struct PositionalEntry {
    std::string name; // "NAME", "TOKEN", "COMMAND"
    bool repeats = false;
    ValueSpec value;
    std::string summary;
};

struct CommandEntry {
    std::string name;    // "" for redsem itself (the global options)
    std::string summary; // the first sentence of its description
    std::vector<OptionEntry> options;
    std::vector<PositionalEntry> positionals;
};

// redsem itself first, then each subcommand in the order --help lists them. Hidden options
// (flock's refused modes, release's internal ones) are left out; each subcommand's --help is in
// its own options.
std::vector<CommandEntry> option_table();

// The first clause of an option's help: up to the first ". ", "; ", " (" or ": " after the
// condition it may start with ("rediss://: ", "With --while-pid: ").
std::string summary_of(const std::string& help);

} // namespace redsem::cli

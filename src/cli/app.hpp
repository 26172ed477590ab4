#pragma once

#include "cli/commands.hpp"

namespace CLI {
class App;
}

namespace redsem::cli {

// Parses the command line, runs one subcommand and returns the process exit status. Every
// error is printed here, once, as "redsem: error: ..." on stderr.
int main(int argc, char** argv);

// Declares redsem's own part of the command line on `app`: its description, --help,
// --version, the global options (stored in `global`) and the help's footer.
void declare_globals(CLI::App& app, GlobalOptions& global);

// Declares `command` as a subcommand of `app`, with its options; returns what runs it once
// the command line is parsed.
Runner declare_command(CLI::App& app, const Command& command, const GlobalOptions& global);

} // namespace redsem::cli

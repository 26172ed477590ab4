#pragma once

namespace redsem::cli {

// Parses the command line, runs one subcommand and returns the process exit status. Every
// error is printed here, once, as "redsem: error: ..." on stderr.
int main(int argc, char** argv);

} // namespace redsem::cli

#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace redsem::cli {

// What redsem does to its command line before CLI11 parses it: only what CLI11 2.1 cannot be
// configured to do. CLI11 parses everything else. Both functions read which options take a
// value from the options `app` declares, so the two cannot disagree on that.

// Where the command's name is in `words` (the arguments after argv[0]): the first word that is
// not a global option of `app` or such an option's value. words.size() when there is none, or
// when a word that `app` does not declare as an option, or "--", comes first (CLI11 reports
// those). main() builds only the command named there (building them all was most of the work
// of starting up), and all of them when there is none (`redsem --help`).
std::size_t find_command(const CLI::App& app, const std::vector<std::string>& words);

// `words` as App::parse(std::vector<std::string>&) takes them (last first), once `app` has the
// command that find_command() names:
// - run: a "--" before COMMAND, the first word after NAME that is not one of redsem's options
//   or its value, so that COMMAND gets every word from there on, options included (as
//   flock(1) takes its command). CLI11 2.1 has no such rule: positionals_at_end() also takes
//   the options between NAME and COMMAND as COMMAND, and prefix_command() with fallthrough()
//   hands COMMAND's first word to the main app and parses the words after it as options.
// - "--opt=" (an empty value) becomes "--opt" "", for redsem's options that take a value:
//   CLI11 drops an empty value after '=' and takes the next word as the value instead (it took
//   `--label= -w 0` as the label '-w').
std::vector<std::string> words_for_cli11(const CLI::App& app, std::vector<std::string> words);

} // namespace redsem::cli

#pragma once

// Options that are typed values from the moment they are parsed. Each option's text is
// converted once, where the option is declared, by a converter that refuses a bad value with
// redsem's own message (UsageError, "--ttl: '5x' is not a duration ..."); a command receives
// its request already typed, and checks only what involves several options.
#include <CLI/CLI.hpp>

#include <string>

namespace redsem::cli {

// Declares the option `names` ("-n,--limit": the long name last) on `command`. Its text, as
// soon as it is parsed, is converted by `convert(text, option)` (option: the long name, for
// the message; throws UsageError) and stored in `target` (a value, or an std::optional of one,
// left alone when the option is not given).
template <class Target, class Convert>
CLI::Option* add_typed_option(CLI::App& command, const std::string& names, Target& target,
                              Convert convert, const std::string& help) {
    std::string option = names.substr(names.rfind(',') + 1);
    return command.add_option_function<std::string>(
        names,
        [&target, convert, option = std::move(option)](const std::string& text) {
            target = convert(text, option.c_str());
        },
        help);
}

} // namespace redsem::cli

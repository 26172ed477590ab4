#pragma once

#include <optional>
#include <string>

namespace redsem::cli {

// The environment variables that stand in for options.

// The value of variable `name`; nullopt when it is unset or empty.
std::optional<std::string> env(const char* name);

// An option's value, else its environment variable's; `source` names where it came from
// (`option_name`, or "$VARIABLE").
std::optional<std::string> option_or_env(const std::optional<std::string>& option,
                                         const char* variable, std::string& source,
                                         const char* option_name);

// A yes/no variable's value: 1, yes or true; 0, no or false; else UsageError naming `variable`.
bool parse_switch(const std::string& text, const char* variable);

} // namespace redsem::cli

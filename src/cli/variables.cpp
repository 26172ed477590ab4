#include "cli/variables.hpp"

#include "util/errors.hpp"
#include "util/name.hpp"

#include <cstdlib>
#include <fmt/format.h>

namespace redsem::cli {

std::optional<std::string> env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
        return std::nullopt;
    }
    return std::string(value);
}

std::optional<std::string> option_or_env(const std::optional<std::string>& option,
                                         const char* variable, std::string& source,
                                         const char* option_name) {
    if (option) {
        source = option_name;
        return option;
    }
    source = fmt::format("${}", variable);
    return env(variable);
}

bool parse_switch(const std::string& text, const char* variable) {
    if (text == "1" || text == "yes" || text == "true") {
        return true;
    }
    if (text == "0" || text == "no" || text == "false") {
        return false;
    }
    throw UsageError(fmt::format("{}: '{}' is neither 1 nor 0", variable, printable(text)));
}

} // namespace redsem::cli

#include "process/secrecy.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/prctl.h>

namespace redsem {

namespace {

constexpr std::string_view k_password_variables[] = {"REDSEM_PASSWORD", "REDISCLI_AUTH",
                                                     "REDSEM_SENTINEL_PASSWORD"};
constexpr std::string_view k_url_variables[] = {"REDSEM_URL", "REDIS_URL"};

// Removes [first, last) from the NUL-terminated `text` in place and pads its end with NULs.
void cut(char* text, std::pair<std::size_t, std::size_t> span) {
    const std::size_t length = std::strlen(text);
    const auto [first, last] = span;
    std::memmove(text + first, text + last, length - last);
    std::memset(text + length - (last - first), 0, last - first);
}

} // namespace

void forbid_inspection() {
    // Fails only on a kernel without prctl: then nothing else would help either.
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

std::optional<std::pair<std::size_t, std::size_t>> url_password_span(std::string_view text) {
    const std::size_t scheme_end = text.find("://");
    if (scheme_end == std::string_view::npos || scheme_end == 0) {
        return std::nullopt;
    }
    const std::string_view scheme = text.substr(0, scheme_end);
    const std::size_t start = scheme_end + 3;
    const std::string_view rest = text.substr(start);
    // As the URL parser splits them: a socket path may hold '@', a sentinel's master name too.
    std::size_t at = std::string_view::npos;
    const bool unix_socket = scheme.size() >= 4 && scheme.substr(scheme.size() - 4) == "unix";
    if (unix_socket) {
        const std::size_t slash = rest.find('/');
        if (slash != std::string_view::npos && slash > 0 && rest[slash - 1] == '@') {
            at = slash - 1;
        }
    } else {
        // Only a sentinel URL ends its hosts at '#' (the master's name follows); elsewhere a
        // '#' may be part of the password.
        const bool sentinel = scheme.size() >= 8 && scheme.substr(scheme.size() - 8) == "sentinel";
        at = (sentinel ? rest.substr(0, rest.find('#')) : rest).rfind('@');
    }
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    const std::size_t colon = rest.substr(0, at).find(':');
    if (colon == std::string_view::npos) {
        return std::nullopt;
    }
    // "user:password@" keeps "user@"; ":password@" goes whole.
    return colon == 0 ? std::pair{start, start + at + 1} : std::pair{start + colon, start + at};
}

void hide_url_passwords(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        // "--url=redis://..." and "-uredis://..." hold the URL after the option.
        if (auto span = url_password_span(argv[i])) {
            cut(argv[i], *span);
        }
    }
}

void hide_environment_passwords() {
    for (const std::string_view name : k_password_variables) {
        const std::string variable(name);
        if (char* value = std::getenv(variable.c_str())) {
            std::memset(value, 0, std::strlen(value));
            unsetenv(variable.c_str());
        }
    }
    for (const std::string_view name : k_url_variables) {
        const std::string variable(name);
        if (char* value = std::getenv(variable.c_str())) {
            if (auto span = url_password_span(value)) {
                cut(value, *span);
            }
        }
    }
}

} // namespace redsem

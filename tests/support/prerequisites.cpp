#include "support/prerequisites.hpp"

#include <cstdlib>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace redsem::test {

bool in_ci() {
    const char* ci = std::getenv("CI");
    if (ci == nullptr) {
        return false;
    }
    const std::string value = ci;
    return !value.empty() && value != "false" && value != "0";
}

std::optional<std::string> find_program(const std::string& program) {
    const char* path = std::getenv("PATH");
    std::istringstream dirs(path != nullptr ? path : "");
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
        if (access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    return std::nullopt;
}

std::optional<std::string> find_libfaketime() {
    if (const char* chosen = std::getenv("REDSEM_TEST_LIBFAKETIME")) {
        if (*chosen != '\0' && access(chosen, R_OK) == 0) {
            return std::string(chosen);
        }
        return std::nullopt;
    }
    std::vector<std::string> dirs;
    const std::string triplet = REDSEM_LIBRARY_ARCHITECTURE;
    if (!triplet.empty()) {
        dirs.push_back("/usr/lib/" + triplet);
    }
    dirs.insert(dirs.end(), {"/usr/lib64", "/usr/lib", "/usr/local/lib"});
    for (const std::string& dir : dirs) {
        for (const char* file : {"/faketime/libfaketime.so.1", "/libfaketime.so.1"}) {
            const std::string candidate = dir + file;
            if (access(candidate.c_str(), R_OK) == 0) {
                return candidate;
            }
        }
    }
    return std::nullopt;
}

bool have_ipv6_loopback() {
    const int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_loopback;
    const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    close(fd);
    return bound;
}

} // namespace redsem::test

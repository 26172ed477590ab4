#include "process/inherited_secret.hpp"

#include "util/number.hpp"

#include <algorithm>
#include <limits>
#include <string_view>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace redsem {

std::optional<std::string> inherited_secret(const std::string& secret, const char* name) {
    const int fd = memfd_create(name, MFD_ALLOW_SEALING);
    if (fd < 0) {
        return std::nullopt;
    }
    const std::string content = secret + "\n";
    const bool written =
        fchmod(fd, 0600) == 0 &&
        write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) == 0;
    if (!written) {
        close(fd);
        return std::nullopt;
    }
    return "/proc/self/fd/" + std::to_string(fd);
}

std::vector<int> inherited_secret_fds(const std::vector<std::string>& env) {
    constexpr std::string_view k_path = "=/proc/self/fd/";
    std::vector<int> fds;
    for (const std::string& entry : env) {
        const std::size_t at = entry.find(k_path);
        if (at == std::string::npos) {
            continue;
        }
        if (const auto fd = parse_integer(std::string_view(entry).substr(at + k_path.size()), 0,
                                          std::numeric_limits<int>::max())) {
            fds.push_back(static_cast<int>(*fd));
        }
    }
    std::sort(fds.begin(), fds.end());
    return fds;
}

} // namespace redsem

#include "process/holder_meta.hpp"

#include <array>
#include <cstdlib>
#include <pwd.h>
#include <unistd.h>

namespace redsem {

namespace {

std::string this_user() {
    // getpwuid_r: several threads may build holder metadata at once.
    passwd entry{};
    passwd* found = nullptr;
    std::array<char, 4096> buffer{};
    if (getpwuid_r(geteuid(), &entry, buffer.data(), buffer.size(), &found) == 0 &&
        found != nullptr && found->pw_name != nullptr) {
        return found->pw_name;
    }
    if (const char* user = std::getenv("USER"); user != nullptr) {
        return user;
    }
    return std::to_string(geteuid());
}

std::string this_host() {
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) != 0) {
        return "unknown";
    }
    return name;
}

} // namespace

HolderMeta holder_meta(std::string label, long long pid, std::string pid_of) {
    if (label.size() > k_max_label_bytes) {
        label.resize(k_max_label_bytes);
    }
    return HolderMeta{.host = this_host(),
                      .pid = pid,
                      .pid_of = std::move(pid_of),
                      .user = this_user(),
                      .label = std::move(label)};
}

} // namespace redsem

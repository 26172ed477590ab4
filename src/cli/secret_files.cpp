#include "cli/secret_files.hpp"

#include "util/errors.hpp"
#include "util/name.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <iostream>
#include <optional>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

namespace redsem::cli {

namespace {

// A password file holds a password, and nothing that could block or fill memory.
constexpr off_t k_max_password_file = 64 * 1024;

// Closes a descriptor when it goes out of scope.
struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
};

// Why redsem refuses the file `fd` was opened on, as ssh refuses a key file: one that is not
// a regular file (a FIFO would block, a device may never end), is owned by another user than
// this one or root, or that others may write (they could have put their own password there).
std::optional<std::string> refusal(const struct stat& file) {
    if (S_ISDIR(file.st_mode)) {
        return "is a directory";
    }
    if (!S_ISREG(file.st_mode)) {
        return "is not a regular file (a FIFO, a device or a socket)";
    }
    if (file.st_uid != geteuid() && file.st_uid != 0) {
        // The way out: be that user, or read a copy of one's own (root reading a job user's).
        const struct passwd* owner = getpwuid(file.st_uid);
        const std::string who = owner != nullptr ? printable(owner->pw_name) : "that user";
        return fmt::format("is owned by another user ({}, uid {}), who could change it: run "
                           "redsem as {}, or give it a copy of your own (install -m 600 FILE "
                           "COPY)",
                           who, file.st_uid, who);
    }
    if ((file.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        return "can be written by other users: chmod 600 it";
    }
    if (file.st_size > k_max_password_file) {
        return fmt::format("is larger than {} KiB: not a password file",
                           k_max_password_file / 1024);
    }
    return std::nullopt;
}

} // namespace

// Opened once, then what was opened is checked and read (so a file swapped in between is never
// read unchecked).
std::string read_password_file(const std::string& path, std::string_view source) {
    const auto fail = [&](std::string_view why) {
        return UsageError(
            fmt::format("the password file '{}' ({}) {}", printable(path), source, why));
    };
    // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        throw UsageError(fmt::format("cannot read the password file '{}' ({}): {}", printable(path),
                                     source, std::strerror(errno)));
    }
    const FdCloser closer{fd};
    struct stat file {};
    if (::fstat(fd, &file) != 0) {
        throw fail(fmt::format("cannot be examined: {}", std::strerror(errno)));
    }
    if (auto why = refusal(file)) {
        throw fail(*why);
    }
    std::string content;
    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof(buffer));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            throw fail(fmt::format("cannot be read: {}", std::strerror(errno)));
        }
        if (got == 0) {
            break;
        }
        content.append(buffer, static_cast<std::size_t>(got));
        if (content.size() > static_cast<std::size_t>(k_max_password_file)) {
            throw fail(fmt::format("is larger than {} KiB: not a password file",
                                   k_max_password_file / 1024));
        }
    }
    std::string password = content.substr(0, content.find('\n'));
    if (!password.empty() && password.back() == '\r') {
        password.pop_back();
    }
    if (password.empty()) {
        throw fail("has an empty first line");
    }
    if ((file.st_mode & (S_IRGRP | S_IROTH)) != 0) {
        std::cerr << fmt::format("redsem: warning: the password file '{}' can be read by other "
                                 "users; chmod 600 it\n",
                                 printable(path));
    }
    return password;
}

void check_key_file(const std::string& path) {
    struct stat file {};
    if (::stat(path.c_str(), &file) == 0 && S_ISREG(file.st_mode) &&
        (file.st_mode & (S_IRGRP | S_IROTH)) != 0) {
        std::cerr << fmt::format("redsem: warning: the TLS client key '{}' can be read by other "
                                 "users; chmod 600 it\n",
                                 printable(path));
    }
}

} // namespace redsem::cli

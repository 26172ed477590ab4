#include "cli/output.hpp"

#include "semaphore/inspect.hpp"
#include "semaphore/semaphore.hpp"

#include <cerrno>
#include <cstdio>
#include <fmt/format.h>
#include <iostream>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <unistd.h>

namespace redsem::cli {

void warn_unlisted(const std::vector<UnlistedNode>& unlisted) {
    for (const UnlistedNode& node : unlisted) {
        std::cerr << fmt::format("redsem: warning: the semaphores of the cluster primary {} are "
                                 "not listed: {}\n",
                                 node.node, node.why);
    }
}

void print_json(const nlohmann::json& value) {
    std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

nlohmann::json ci_json(const std::optional<CiJob>& ci) {
    if (!ci) {
        return nullptr;
    }
    const auto text = [](const std::string& field) {
        return field.empty() ? nlohmann::json(nullptr) : nlohmann::json(field);
    };
    return {{"system", ci->system},
            {"url", text(ci->url)},
            {"pipeline", text(ci->pipeline)},
            {"job", text(ci->job)}};
}

int flush_stdout() {
    // std::cout writes through C's stdout (synchronised with stdio): the bytes wait in its
    // buffer, and a write that failed earlier (the buffer filled up) leaves its error flag set,
    // but not its errno: the first error found is kept.
    static int first_error = 0;
    errno = 0;
    std::cout.flush();
    const bool written = std::fflush(stdout) == 0 && std::ferror(stdout) == 0 && std::cout.good();
    if (written || first_error != 0) {
        return first_error;
    }
    first_error = errno;
    if (first_error == 0) {
        // Failed before: a pipe or socket whose reader went away reports an error when polled.
        pollfd out{.fd = STDOUT_FILENO, .events = POLLOUT, .revents = 0};
        first_error = poll(&out, 1, 0) == 1 && (out.revents & POLLERR) != 0 ? EPIPE : EIO;
    }
    return first_error;
}

} // namespace redsem::cli

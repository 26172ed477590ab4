#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace redsem {

// Keeping the Redis password from the user's other processes, run's command and the script
// under a keeper among them. Root can still read everything (README, "Security").

// No core dumps and no ptrace by processes of the same user; /proc/PID/{environ,mem,fd,...}
// become root's. Inherited by forked processes (the keeper, the guard) until they exec.
void forbid_inspection();

// Where a URL's password is written, [first, last): the ':' before the password up to the
// '@' after it, or from just after "://" when there is no user name. Nothing when `text` is
// not a URL or names no password.
std::optional<std::pair<std::size_t, std::size_t>> url_password_span(std::string_view text);

// Cuts the password out of every argument that is a URL with one, in place (the command line
// keeps its length; the end is padded with NULs), so that ps and /proc/PID/cmdline no longer
// show it. What redsem parsed was copied before.
void hide_url_passwords(int argc, char** argv);

// After the connection options were read: the password variables (REDSEM_PASSWORD, ...)
// overwritten with NULs and unset, and the password cut out of REDSEM_URL and REDIS_URL in
// place, so that /proc/PID/environ no longer shows them.
void hide_environment_passwords();

} // namespace redsem

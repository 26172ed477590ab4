#pragma once

#include <optional>
#include <string>

namespace redsem::test {

// Where the tests look for what they need from the machine. None of these fail: a test that
// finds something missing skips (support/skip.hpp), or fails under CI (in_ci()).

// Whether this is a CI run ($CI set, and not "false" or "0"): CI installs every prerequisite,
// so there a missing one fails the test instead of skipping it.
bool in_ci();

// The full path of `program` found on $PATH, if it is there and executable.
std::optional<std::string> find_program(const std::string& program);

// libfaketime.so.1 (Debian package faketime), for LD_PRELOAD. $REDSEM_TEST_LIBFAKETIME, when
// set, is the only place looked at (empty: "not installed"); otherwise the faketime directory
// under the multiarch library directory (/usr/lib/<triplet>, the triplet of the build's
// compiler, as `dpkg-architecture -qDEB_HOST_MULTIARCH` prints it), then /usr/lib64,
// /usr/lib and /usr/local/lib.
std::optional<std::string> find_libfaketime();

// Whether this machine has an IPv6 loopback ([::1] can be bound).
bool have_ipv6_loopback();

} // namespace redsem::test

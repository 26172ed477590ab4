#pragma once

#include <string>

namespace redsem::test {

// Paths the build knows. They are compiled into this one small file (build_paths.cpp) rather
// than into every test file, so that a checkout in another directory shares the compiler cache
// for all the rest.

// The redsem binary under test.
const std::string& redsem_binary();

// The same redsem with every Lua script another text: a newer release, for upgrade tests.
const std::string& redsem_next_binary();

// The `redsem` of the previous release, 0.1.0, built from this repository's history
// (tests/CMakeLists.txt, target redsem-0.1.0), for tests that run an older release beside this
// one. The file is missing where the source tree has no git history (a tarball): a test that
// needs it then skips (support/skip.hpp).
const std::string& redsem_previous_binary();

// The top of the source tree (for the man page and other files the tests read).
const std::string& source_dir();

} // namespace redsem::test

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

// The top of the source tree (for the man page and other files the tests read).
const std::string& source_dir();

} // namespace redsem::test

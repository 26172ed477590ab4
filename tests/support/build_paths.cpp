#include "support/build_paths.hpp"

namespace redsem::test {

const std::string& redsem_binary() {
    static const std::string path = REDSEM_BINARY;
    return path;
}

const std::string& redsem_next_binary() {
    static const std::string path = REDSEM_NEXT_BINARY;
    return path;
}

const std::string& redsem_previous_binary() {
    static const std::string path = REDSEM_PREVIOUS_BINARY;
    return path;
}

const std::string& source_dir() {
    static const std::string path = REDSEM_SOURCE_DIR;
    return path;
}

} // namespace redsem::test

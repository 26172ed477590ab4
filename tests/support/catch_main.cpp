// Catch2's main, but a run whose tests passed with something skipped for want of a
// prerequisite exits with k_skip_exit_code, which ctest reports as skipped (support/skip.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/skip.hpp"

int main(int argc, char* argv[]) {
    const int failed = Catch::Session().run(argc, argv);
    return redsem::test::exit_code_after(failed);
}

#pragma once

// Skipping a test honestly. Catch2 2.13 has no SKIP: a test that cannot run here for want of
// a prerequisite says so with REDSEM_SKIP (ends the test) or skip_part (the test goes on with
// what it can check). The test program's main (integration/main.cpp) then exits with
// k_skip_exit_code if nothing failed, and ctest (SKIP_RETURN_CODE, tests/CMakeLists.txt)
// reports the test as skipped, not passed. A failed check still fails the test. Under CI
// (in_ci()) nothing may skip: a missing prerequisite fails the test there.

#include <catch2/catch.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "support/prerequisites.hpp"

namespace redsem::test {

// The exit code ctest reads as "skipped" (automake's convention).
constexpr int k_skip_exit_code = 77;

// Why the tests run in this process skipped something, in order.
inline std::vector<std::string>& skipped_reasons() {
    static std::vector<std::string> reasons;
    return reasons;
}

// Notes that the running test could not check everything because `missing` is missing; under
// CI fails the test at once instead.
inline void skip_part(const std::string& missing) {
    if (in_ci()) {
        FAIL("CI is set, and " << missing << " is missing: CI must install every prerequisite");
    }
    std::cout << "SKIPPED (" << Catch::getResultCapture().getCurrentTestName() << "): " << missing
              << " is missing" << std::endl;
    skipped_reasons().push_back(missing);
}

// The exit code of a test program whose tests ended with `failed` failures.
inline int exit_code_after(int failed) {
    return failed == 0 && !skipped_reasons().empty() ? k_skip_exit_code : failed;
}

} // namespace redsem::test

// Ends the running test as skipped because `missing` is missing (fails it under CI).
#define REDSEM_SKIP(missing)                                                                       \
    do {                                                                                           \
        ::redsem::test::skip_part(missing);                                                        \
        return;                                                                                    \
    } while (false)

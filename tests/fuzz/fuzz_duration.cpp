// Fuzzes redsem::parse_duration() and format_duration().
//
// Contract checked: parse_duration() returns a value in [0, k_max_duration] or throws
// UsageError (anything else crashes the fuzzer); format_duration() of that value does not
// throw, and what it prints parses back to about the same duration.
#include "util/duration.hpp"
#include "util/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void violated(const char* what, std::string_view input, long long value) {
    std::fprintf(stderr, "fuzz_duration: invariant violated: %s\ninput: '%.*s' value: %lld ms\n",
                 what, static_cast<int>(input.size()), input.data(), value);
    std::abort();
}

// How far format_duration() may round: it keeps the two largest units above one minute and
// rounds to whole seconds (or tenths below ten seconds).
long long format_tolerance_ms(long long ms) {
    if (ms >= 86'400'000 - 500) {
        return 3'600'000 + 500;
    }
    if (ms >= 3'600'000 - 500) {
        return 60'000 + 500;
    }
    return 500;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    redsem::Milliseconds parsed{};
    try {
        parsed = redsem::parse_duration(input, "--ttl");
    } catch (const redsem::UsageError&) {
        return 0;
    }
    const long long ms = parsed.count();
    if (ms < 0 || parsed > redsem::k_max_duration) {
        violated("result outside [0, k_max_duration]", input, ms);
    }

    std::string formatted;
    try {
        formatted = redsem::format_duration(parsed);
    } catch (...) {
        violated("format_duration() threw", input, ms);
    }
    if (formatted.empty()) {
        violated("format_duration() returned nothing", input, ms);
    }

    // The formatted form is meant for people, but it uses the same units: it must parse back.
    redsem::Milliseconds again{};
    try {
        again = redsem::parse_duration(formatted, "--ttl");
    } catch (const redsem::UsageError&) {
        violated("format_duration() output does not parse", input, ms);
    }
    const long long diff = again.count() > ms ? again.count() - ms : ms - again.count();
    if (diff > format_tolerance_ms(ms)) {
        violated("format_duration() output parses to a different duration", input, ms);
    }
    return 0;
}

// Fuzzes the name rules in util/name.hpp: name_problem(), prefix_problem(), check_name(),
// printable() and is_valid_utf8().
//
// Contract checked: an accepted name or prefix is 1..200 bytes of valid UTF-8 without braces,
// whitespace (ASCII's or Unicode's), invisible characters, control bytes, C1 controls or
// bidirectional formatting characters; is_valid_utf8()
// agrees with an independent decoder written from the Unicode standard (Table 3-7); check_name()
// throws exactly when name_problem() complains; printable() output is printable ASCII and bounded
// in length.
#include "util/errors.hpp"
#include "util/name.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void violated(const char* what, std::string_view input) {
    std::fprintf(stderr, "fuzz_name: invariant violated: %s\ninput (%zu bytes):", what,
                 input.size());
    for (const char c : input) {
        std::fprintf(stderr, " %02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
    }
    std::fprintf(stderr, "\n");
    std::abort();
}

// Well-formed UTF-8 byte sequences, as listed in Unicode Table 3-7.
bool reference_utf8(std::string_view text) {
    std::size_t i = 0;
    const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const auto in = [](unsigned char b, unsigned lo, unsigned hi) { return b >= lo && b <= hi; };
    while (i < text.size()) {
        const unsigned char b0 = at(i);
        std::size_t len = 0;
        unsigned lo = 0x80;
        unsigned hi = 0xBF;
        if (b0 <= 0x7F) {
            len = 1;
        } else if (in(b0, 0xC2, 0xDF)) {
            len = 2;
        } else if (b0 == 0xE0) {
            len = 3;
            lo = 0xA0;
        } else if (in(b0, 0xE1, 0xEC) || in(b0, 0xEE, 0xEF)) {
            len = 3;
        } else if (b0 == 0xED) {
            len = 3;
            hi = 0x9F;
        } else if (b0 == 0xF0) {
            len = 4;
            lo = 0x90;
        } else if (in(b0, 0xF1, 0xF3)) {
            len = 4;
        } else if (b0 == 0xF4) {
            len = 4;
            hi = 0x8F;
        } else {
            return false;
        }
        if (text.size() - i < len) {
            return false;
        }
        if (len > 1 && !in(at(i + 1), lo, hi)) {
            return false;
        }
        for (std::size_t k = 2; k < len; ++k) {
            if (!in(at(i + k), 0x80, 0xBF)) {
                return false;
            }
        }
        i += len;
    }
    return true;
}

bool forbidden_byte(char c) {
    const auto byte = static_cast<unsigned char>(c);
    return c == '{' || c == '}' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f' || byte < 0x20 || byte == 0x7F;
}

// Whether valid UTF-8 `text` holds a C1 control (U+0080..U+009F), a bidirectional
// formatting character (U+061C, U+200E, U+200F, U+202A..U+202E, U+2066..U+2069), a space
// beyond ASCII's (Unicode's White_Space: U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000) or an invisible character (U+200B..U+200D, U+2060, U+FEFF):
// written from the code points, apart from the code under test.
bool forbidden_code_point(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto b0 = static_cast<unsigned char>(text[i]);
        const std::size_t len = b0 < 0x80 ? 1 : b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
        char32_t cp = len == 1 ? b0 : b0 & (0xFF >> (len + 1));
        for (std::size_t k = 1; k < len && i + k < text.size(); ++k) {
            cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        }
        const bool control = (cp >= 0x80 && cp <= 0x9F);
        const bool bidi = cp == 0x061C || cp == 0x200E || cp == 0x200F ||
                          (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069);
        const bool space = cp == 0x00A0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
                           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
                           cp == 0x3000;
        const bool invisible = (cp >= 0x200B && cp <= 0x200D) || cp == 0x2060 || cp == 0xFEFF;
        if (control || bidi || space || invisible) {
            return true;
        }
        i += len;
    }
    return false;
}

void check_accepted(std::string_view text, std::string_view input) {
    if (text.empty() || text.size() > redsem::k_max_name_bytes) {
        violated("accepted a name that is empty or longer than 200 bytes", input);
    }
    if (!redsem::is_valid_utf8(text)) {
        violated("accepted a name that is_valid_utf8() rejects", input);
    }
    for (const char c : text) {
        if (forbidden_byte(c)) {
            violated("accepted a name with a brace, whitespace or control byte", input);
        }
    }
    if (forbidden_code_point(text)) {
        violated("accepted a name with a C1 control, bidirectional formatting, Unicode space or "
                 "invisible character",
                 input);
    }
}

void check_printable(std::string_view text, std::size_t max_bytes, std::string_view input) {
    const std::string out = redsem::printable(text, max_bytes);
    for (const char c : out) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte > 0x7E) {
            violated("printable() output is not printable ASCII", input);
        }
    }
    const std::size_t shown = text.size() < max_bytes ? text.size() : max_bytes;
    if (out.size() > 4 * shown + 3) {
        violated("printable() output is longer than 4 bytes per input byte plus '...'", input);
    }
    bool plain = true;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        plain = plain && byte >= 0x20 && byte <= 0x7E;
    }
    if (plain && text.size() <= max_bytes && out != text) {
        std::fprintf(stderr, "printable: '%s'\n", out.c_str());
        violated("printable() changed printable ASCII that fits", input);
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);

    if (redsem::is_valid_utf8(input) != reference_utf8(input)) {
        violated("is_valid_utf8() disagrees with the Unicode table", input);
    }

    const auto name = redsem::name_problem(input);
    if (!name) {
        check_accepted(input, input);
    } else if (name->empty()) {
        violated("name_problem() gave an empty reason", input);
    }
    bool threw = false;
    try {
        redsem::check_name(input);
    } catch (const redsem::UsageError&) {
        threw = true;
    }
    if (threw != name.has_value()) {
        violated("check_name() and name_problem() disagree", input);
    }

    const auto prefix = redsem::prefix_problem(input);
    if (!prefix) {
        check_accepted(input, input);
    }
    // A name and a prefix follow the same rules.
    if (prefix.has_value() != name.has_value()) {
        violated("prefix_problem() and name_problem() disagree", input);
    }
    // Anything accepted is exactly: 1..200 bytes, valid UTF-8, no forbidden byte or code point.
    bool expected_ok =
        !input.empty() && input.size() <= redsem::k_max_name_bytes && reference_utf8(input);
    for (const char c : input) {
        expected_ok = expected_ok && !forbidden_byte(c);
    }
    expected_ok = expected_ok && !forbidden_code_point(input);
    if (expected_ok != !name.has_value()) {
        violated("name_problem() disagrees with the rules", input);
    }

    check_printable(input, 60, input);
    check_printable(input, 20, input);
    check_printable(input, 200, input);
    if (size > 0) {
        check_printable(input, data[0] % 16, input);
    }
    return 0;
}

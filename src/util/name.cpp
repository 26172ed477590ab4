#include "util/name.hpp"

#include "util/errors.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace redsem {

bool is_valid_utf8(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        std::size_t extra = 0;
        char32_t code = 0;
        if (byte < 0x80) {
            ++i;
            continue;
        } else if ((byte & 0xE0) == 0xC0) {
            extra = 1;
            code = byte & 0x1F;
        } else if ((byte & 0xF0) == 0xE0) {
            extra = 2;
            code = byte & 0x0F;
        } else if ((byte & 0xF8) == 0xF0) {
            extra = 3;
            code = byte & 0x07;
        } else {
            return false;
        }
        if (i + extra >= text.size()) {
            return false;
        }
        for (std::size_t k = 1; k <= extra; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xC0) != 0x80) {
                return false;
            }
            code = (code << 6) | (next & 0x3F);
        }
        constexpr char32_t k_min_for_length[] = {0, 0x80, 0x800, 0x10000};
        if (code < k_min_for_length[extra] || code > 0x10FFFF ||
            (code >= 0xD800 && code <= 0xDFFF)) {
            return false;
        }
        i += extra + 1;
    }
    return true;
}

namespace {

// Whether valid UTF-8 `text` holds a space character beyond ASCII's (Unicode's White_Space:
// U+00A0 no-break space, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), or
// an invisible one that looks like nothing (U+200B-U+200D, U+2060, U+FEFF).
bool has_unicode_space(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        const std::size_t length = byte < 0x80 ? 1 : byte < 0xE0 ? 2 : byte < 0xF0 ? 3 : 4;
        char32_t code = length == 1 ? byte : byte & (0x7F >> length);
        for (std::size_t k = 1; k < length && i + k < text.size(); ++k) {
            code = (code << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        }
        i += length;
        if (code == 0xA0 || code == 0x1680 || (code >= 0x2000 && code <= 0x200D) ||
            code == 0x2028 || code == 0x2029 || code == 0x202F || code == 0x205F ||
            code == 0x2060 || code == 0x3000 || code == 0xFEFF) {
            return true;
        }
    }
    return false;
}

std::optional<std::string> key_part_problem(std::string_view text, std::string_view what) {
    if (text.size() > k_max_name_bytes) {
        return fmt::format("{} is {} bytes long; the limit is {}", what, text.size(),
                           k_max_name_bytes);
    }
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (c == '{' || c == '}') {
            return fmt::format("{} may not contain braces", what);
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            return fmt::format("{} may not contain whitespace", what);
        }
        if (byte < 0x20 || byte == 0x7F) {
            return fmt::format("{} may not contain control characters", what);
        }
    }
    if (!is_valid_utf8(text)) {
        return fmt::format("{} is not valid UTF-8", what);
    }
    if (has_unicode_space(text)) {
        return fmt::format("{} may not contain whitespace (U+00A0, U+2028, ...) or invisible "
                           "characters",
                           what);
    }
    if (terminal_safe(text) != text) {
        // C1 controls and bidirectional formatting: invisible, and they reorder a terminal.
        return fmt::format("{} may not contain control or bidirectional formatting characters",
                           what);
    }
    return std::nullopt;
}

} // namespace

std::optional<std::string> name_problem(std::string_view name) {
    if (name.empty()) {
        return "the semaphore name is empty";
    }
    return key_part_problem(name, "the semaphore name");
}

std::optional<std::string> prefix_problem(std::string_view prefix) {
    if (prefix.empty()) {
        return "the key prefix is empty";
    }
    return key_part_problem(prefix, "the key prefix");
}

void check_name(std::string_view name) {
    if (auto problem = name_problem(name)) {
        throw UsageError(fmt::format("invalid name '{}': {}", printable(name), *problem));
    }
}

std::string terminal_safe(std::string_view text, std::size_t max_bytes) {
    std::string out;
    out.reserve(std::min(text.size(), max_bytes));
    std::size_t i = 0;
    while (i < text.size()) {
        if (i >= max_bytes) {
            out += "...";
            break;
        }
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x80) {
            if (byte < 0x20 || byte == 0x7F) {
                out += fmt::format("\\x{:02x}", byte);
            } else {
                out += static_cast<char>(byte);
            }
            ++i;
            continue;
        }
        const std::size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
        const std::string_view sequence = text.substr(i, length);
        if (length == 1 || sequence.size() < length || !is_valid_utf8(sequence)) {
            out += fmt::format("\\x{:02x}", byte);
            ++i;
            continue;
        }
        char32_t code = byte & (0x7F >> length);
        for (std::size_t k = 1; k < length; ++k) {
            code = (code << 6) | (static_cast<unsigned char>(sequence[k]) & 0x3F);
        }
        const bool hidden = code <= 0x9F || (code >= 0x202A && code <= 0x202E) ||
                            (code >= 0x2066 && code <= 0x2069) || code == 0x200E ||
                            code == 0x200F || code == 0x061C;
        if (hidden) {
            out += fmt::format("\\u{{{:04x}}}", static_cast<unsigned>(code));
        } else {
            out += sequence;
        }
        i += length;
    }
    return out;
}

std::string printable(std::string_view text, std::size_t max_bytes) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (i == max_bytes) {
            out += "...";
            break;
        }
        const auto byte = static_cast<unsigned char>(text[i]);
        if (byte < 0x20 || byte >= 0x7F) {
            out += fmt::format("\\x{:02x}", byte);
        } else {
            out += text[i];
        }
    }
    return out;
}

std::string glob_escape(std::string_view text) {
    std::string out;
    for (const char c : text) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') {
            out += '\\';
        }
        out += c;
    }
    return out;
}

} // namespace redsem

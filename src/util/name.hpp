#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace redsem {

inline constexpr std::size_t k_max_name_bytes = 200;

// Why `name` cannot name a semaphore, or nullopt when it can: 1..200 bytes of valid UTF-8,
// with no braces (they would break the Redis Cluster hash tag), whitespace or control
// characters.
std::optional<std::string> name_problem(std::string_view name);

// Same rules for the key prefix, which may not be empty either.
std::optional<std::string> prefix_problem(std::string_view prefix);

// `text` with the glob characters of SCAN MATCH escaped, so that it matches literally.
std::string glob_escape(std::string_view text);

// Throws UsageError when name_problem() finds one.
void check_name(std::string_view name);

// Renders untrusted bytes printable for one-line messages: control bytes and bytes
// outside ASCII become \xNN, and anything past `max_bytes` becomes "...".
std::string printable(std::string_view text, std::size_t max_bytes = 60);

// Renders text that came from another user (a label, a host, a command line) safe for a
// terminal, for tables: control characters (C0, DEL, C1), bidirectional overrides and bytes
// that are not valid UTF-8 become \xNN (or \u{NNNN}); every other character, non-ASCII
// included, is kept. A backslash stays a backslash. Characters that start at or past
// `max_bytes` of `text` become "..." (for one-line messages; a character is never cut).
std::string terminal_safe(std::string_view text, std::size_t max_bytes = std::string_view::npos);

// Whether `text` is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).
bool is_valid_utf8(std::string_view text);

} // namespace redsem

#pragma once

#include <string>
#include <string_view>

namespace redsem {

inline constexpr std::size_t k_token_bytes = 16; // 128 bits

// A fresh holder token: 128 bits from the kernel's random source (getrandom), as 32 lowercase
// hex digits. Throws InternalError if the kernel cannot supply them.
std::string generate_token();

// Whether `text` has the shape generate_token() produces.
bool is_token(std::string_view text);

// How tables show a token: its first 8 hex digits (release and renew accept them).
inline std::string short_token(std::string_view token) {
    return std::string(token.substr(0, 8));
}

} // namespace redsem

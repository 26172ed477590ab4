#include "util/token.hpp"

#include "util/errors.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <sys/random.h>

namespace redsem {

std::string generate_token() {
    std::array<unsigned char, k_token_bytes> bytes{};
    std::size_t filled = 0;
    while (filled < bytes.size()) {
        const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw InternalError(std::string("cannot read random bytes: ") + std::strerror(errno));
        }
        filled += static_cast<std::size_t>(got);
    }
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string token;
    token.reserve(2 * bytes.size());
    for (const unsigned char byte : bytes) {
        token += k_hex[byte >> 4];
        token += k_hex[byte & 0x0F];
    }
    return token;
}

bool is_token(std::string_view text) {
    if (text.size() != 2 * k_token_bytes) {
        return false;
    }
    for (const char c : text) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
    }
    return true;
}

} // namespace redsem

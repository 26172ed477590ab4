// SHA-1 (FIPS 180-4), as Redis names scripts. Small and slow enough: it names a few epoch
// marker scripts per process (see src/semaphore/epoch_proof.cpp), never data.
#include "util/sha1.hpp"

#include <array>
#include <cstdint>

namespace redsem {

namespace {

std::uint32_t rotate_left(std::uint32_t value, int bits) {
    return (value << bits) | (value >> (32 - bits));
}

void process_block(std::array<std::uint32_t, 5>& hash, const unsigned char* block) {
    std::array<std::uint32_t, 80> words{};
    for (int i = 0; i < 16; ++i) {
        words[i] = static_cast<std::uint32_t>(block[4 * i]) << 24 |
                   static_cast<std::uint32_t>(block[4 * i + 1]) << 16 |
                   static_cast<std::uint32_t>(block[4 * i + 2]) << 8 |
                   static_cast<std::uint32_t>(block[4 * i + 3]);
    }
    for (int i = 16; i < 80; ++i) {
        words[i] = rotate_left(words[i - 3] ^ words[i - 8] ^ words[i - 14] ^ words[i - 16], 1);
    }
    auto [a, b, c, d, e] = hash;
    for (int i = 0; i < 80; ++i) {
        std::uint32_t f = 0;
        std::uint32_t k = 0;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdc;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6;
        }
        const std::uint32_t next = rotate_left(a, 5) + f + e + k + words[i];
        e = d;
        d = c;
        c = rotate_left(b, 30);
        b = a;
        a = next;
    }
    hash[0] += a;
    hash[1] += b;
    hash[2] += c;
    hash[3] += d;
    hash[4] += e;
}

} // namespace

std::string sha1_hex(std::string_view data) {
    std::array<std::uint32_t, 5> hash{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    const std::size_t whole = data.size() / 64 * 64;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
    for (std::size_t at = 0; at < whole; at += 64) {
        process_block(hash, bytes + at);
    }
    // The tail, a 1 bit, zeros, and the length in bits: one or two blocks.
    std::array<unsigned char, 128> tail{};
    const std::size_t left = data.size() - whole;
    std::copy(bytes + whole, bytes + data.size(), tail.begin());
    tail[left] = 0x80;
    const std::size_t tail_size = left < 56 ? 64 : 128;
    const std::uint64_t bits = static_cast<std::uint64_t>(data.size()) * 8;
    for (int i = 0; i < 8; ++i) {
        tail[tail_size - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
    }
    for (std::size_t at = 0; at < tail_size; at += 64) {
        process_block(hash, tail.data() + at);
    }
    static constexpr char k_digits[] = "0123456789abcdef";
    std::string hex;
    hex.reserve(40);
    for (const std::uint32_t word : hash) {
        for (int shift = 28; shift >= 0; shift -= 4) {
            hex.push_back(k_digits[(word >> shift) & 0xf]);
        }
    }
    return hex;
}

} // namespace redsem

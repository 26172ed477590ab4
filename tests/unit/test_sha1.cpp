// sha1_hex() names script texts as Redis does: the FIPS 180 test vectors, the lengths around
// a block's padding, and every embedded script against the SHA1 CMake computed for it.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "semaphore/epoch_proof.hpp"
#include "util/sha1.hpp"

#include <string>

using namespace redsem;

TEST_CASE("sha1_hex gives the standard digests") {
    CHECK(sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    CHECK(sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    CHECK(sha1_hex(std::string(1000000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    // 55, 56 and 64 bytes: the length field fits in the last block, just not, and a whole block.
    CHECK(sha1_hex(std::string(55, 'a')) == "c1c8bbdc22796e28c0e15163d20899b65621d65a");
    CHECK(sha1_hex(std::string(56, 'a')) == "c2db330f6083854c99d4b5bfb6e8f29f201be699");
    CHECK(sha1_hex(std::string(64, 'a')) == "0098ba824b5c16427bd7a1122a5a442a25ec644d");
}

TEST_CASE("sha1_hex names every script as CMake did, and each epoch variant apart") {
    for (const Script* script : {&scripts::k_acquire_script, &scripts::k_release_script, &scripts::k_admit_script,
                                 &scripts::k_renew_script, &scripts::k_limit_script,
                                 &scripts::k_gc_script, &scripts::k_admission_script}) {
        INFO(script->name);
        CHECK(sha1_hex(script->body) == script->sha1);
        const Script& variant = epoch_variant(*script, "0123456789abcdef0123456789abcdef");
        CHECK(sha1_hex(variant.body) == variant.sha1);
        CHECK(std::string(variant.sha1) != script->sha1);
        CHECK(&epoch_variant(*script, "0123456789abcdef0123456789abcdef") == &variant);
        CHECK(std::string(epoch_variant(*script, "other").sha1) != variant.sha1);
    }
}

// sha1_hex() names script texts as Redis does: the FIPS 180 test vectors, the lengths around
// a block's padding, every embedded script against the SHA1 CMake computed for it, and the
// epoch marker scripts against the one text every release sends.
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

TEST_CASE("sha1_hex names every script as CMake did") {
    for (const Script* script :
         {&scripts::k_acquire_script, &scripts::k_release_script, &scripts::k_renew_script,
          &scripts::k_limit_script, &scripts::k_gc_script, &scripts::k_view_script,
          &scripts::k_pause_script, &scripts::k_lost_script}) {
        INFO(script->name);
        CHECK(sha1_hex(script->body) == script->sha1);
    }
}

TEST_CASE("an epoch marker's script is one text per marker, the same in every release") {
    const std::string marker = "0123456789abcdef0123456789abcdef";
    const Script& script = epoch_marker_script(marker);
    CHECK(std::string(script.body).find(marker) != std::string::npos);
    CHECK(sha1_hex(script.body) == script.sha1);
    // The digest of the text every release sends (computed apart, with Python's hashlib): a
    // change of the text would close admission at the upgrade for every user without INFO.
    CHECK(std::string(script.sha1) == "4782f83b6d6154f81c2d84fe9a4af3a5c5f7f67d");
    CHECK(&epoch_marker_script(marker) == &script);
    CHECK(std::string(epoch_marker_script("other").sha1) != script.sha1);
}

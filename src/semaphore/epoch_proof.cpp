#include "semaphore/epoch_proof.hpp"

#include "util/sha1.hpp"
#include "util/token.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace redsem {

namespace {

// The marker script's text, with MARKER where the marker goes. Never change it: every redsem
// release sends this exact text, so that each can prove what another proved (a changed text
// is a new script, which no Redis process has cached: it would close admission at the upgrade
// for every user without INFO).
constexpr std::string_view k_marker_text =
    "-- redsem epoch marker MARKER: the Redis process that has this script cached has\n"
    "-- checked the epoch key (KEYS[1]) that names it. Writes the nonce (ARGV[1]) for the\n"
    "-- script after it in the same transaction.\n"
    "redis.call('HSET', KEYS[1], 'proof', ARGV[1])\n"
    "return 1\n";

struct MarkerScript {
    std::string body;
    std::string sha1;
    Script script{};
};

} // namespace

const Script& epoch_marker_script(std::string_view marker) {
    static std::mutex mutex;
    static std::map<std::string, std::unique_ptr<MarkerScript>, std::less<>> scripts;
    std::lock_guard lock(mutex);
    std::unique_ptr<MarkerScript>& slot = scripts[std::string(marker)];
    if (!slot) {
        slot = std::make_unique<MarkerScript>();
        slot->body = std::string(k_marker_text);
        slot->body.replace(slot->body.find("MARKER"), 6, marker);
        slot->sha1 = sha1_hex(slot->body);
        slot->script = Script{"epoch marker", slot->sha1.c_str(), slot->body.c_str()};
    }
    return slot->script;
}

std::string new_epoch_marker() {
    return generate_token();
}

} // namespace redsem

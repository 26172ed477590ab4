#include "semaphore/epoch_proof.hpp"

#include "util/sha1.hpp"
#include "util/token.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace redsem {

namespace {

struct Variant {
    std::string name;
    std::string body;
    std::string sha1;
    Script script{};
};

} // namespace

const Script& epoch_variant(const Script& script, std::string_view marker) {
    static std::mutex mutex;
    static std::map<std::pair<std::string, std::string>, std::unique_ptr<Variant>, std::less<>>
        variants;
    std::lock_guard lock(mutex);
    std::unique_ptr<Variant>& slot = variants[{script.name, std::string(marker)}];
    if (!slot) {
        slot = std::make_unique<Variant>();
        slot->name = script.name;
        slot->body = std::string(script.body) + "\n-- epoch marker " + std::string(marker) + "\n";
        slot->sha1 = sha1_hex(slot->body);
        slot->script = Script{slot->name.c_str(), slot->sha1.c_str(), slot->body.c_str()};
    }
    return slot->script;
}

std::string new_epoch_marker() {
    return generate_token();
}

} // namespace redsem

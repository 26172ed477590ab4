// The facts C++ and the scripts share (src/semaphore/protocol.hpp) reach the scripts as the
// build wrote them, the scripts call no command that the ACL check and `doctor` leave out,
// and the key names both languages use are the same.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/protocol.hpp"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <string>

using namespace redsem;

namespace {

std::string lower(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// The commands the library's text runs with redis.call or redis.pcall (`pcall` true), by name.
std::set<std::string> called(bool pcall) {
    const std::string code = scripts::k_library.code;
    const std::regex call(pcall ? R"(redis\.pcall\('([A-Za-z]+)')"
                                : R"(redis\.call\('([A-Za-z]+)')");
    std::set<std::string> commands;
    for (auto it = std::sregex_iterator(code.begin(), code.end(), call);
         it != std::sregex_iterator(); ++it) {
        commands.insert(lower((*it)[1]));
    }
    return commands;
}

} // namespace

TEST_CASE("the protocol's facts are Lua constants of every script") {
    for (const Script* script :
         {&scripts::k_acquire_script, &scripts::k_release_script, &scripts::k_pause_script}) {
        const std::string body = script->body;
        CHECK(body.find("local MAX_LIMIT = " + std::to_string(k_max_limit) + "\n") !=
              std::string::npos);
        CHECK(body.find("local LOSS_GRACE_MS = " + std::to_string(k_loss_grace_ms) + "\n") !=
              std::string::npos);
        CHECK(body.find("local PAUSE_MARK = \"" + std::string(k_pause_mark) + "\"\n") !=
              std::string::npos);
        CHECK(body.find("local TOO_LARGE_SUFFIX = \"" + std::string(k_too_large_suffix) + "\"\n") !=
              std::string::npos);
    }
    const std::string library = scripts::k_library.code;
    CHECK(library.find("local DEFAULT_HISTORY = " + std::to_string(k_default_history) + "\n") !=
          std::string::npos);
    CHECK(library.find("local SCRIPT_COMMANDS = { \"bitpos\", \"del\",") != std::string::npos);
}

TEST_CASE("the scripts run only the commands their ACL check and doctor know") {
    const std::set<std::string> listed(std::begin(k_script_commands), std::end(k_script_commands));
    // Run by pcall (a refusal turns off only what they give), or only on a Redis Cluster
    // (checked apart: lua/lib/main.lua): not in the list on purpose.
    const std::set<std::string> apart{"info", "xadd", "xtrim", "cluster"};
    std::set<std::string> used = called(false);
    for (const std::string& command : called(true)) {
        used.insert(command);
    }
    for (const std::string& command : used) {
        INFO(command);
        CHECK((listed.contains(command) || apart.contains(command)));
    }
    // And nothing listed that no script runs (a stale entry asks users for a permission).
    for (const std::string& command : listed) {
        INFO(command);
        CHECK(used.contains(command));
    }
    for (const std::string& command : apart) {
        INFO(command);
        CHECK(!listed.contains(command));
    }
    // The scripts write their own names of the per-token lists nowhere: only the protocol's.
    const std::string code = scripts::k_library.code;
    for (const char* literal : {"':nudge'", "':left'", "':toolarge'", "':released'", "'drained'"}) {
        INFO(literal);
        CHECK(code.find(literal) == std::string::npos);
    }
}

TEST_CASE("a semaphore's keys: the lists named by token, and every key a user must reach") {
    const Keys keys = Keys::make("redsem", "deploy");
    CHECK(keys.wake("T") == "redsem:{deploy}:wake:T");
    CHECK(keys.nudge("T") == "redsem:{deploy}:wake:T:nudge");
    CHECK(keys.left("T") == "redsem:{deploy}:wake:T:left");
    CHECK(keys.too_large("T") == "redsem:{deploy}:wake:T:toolarge");
    CHECK(keys.released("T") == "redsem:{deploy}:wake:T:released");
    CHECK(keys.drained() == "redsem:{deploy}:wake:drained");
    const std::vector<std::string> every = keys.every_key("T");
    const std::set<std::string> distinct(every.begin(), every.end());
    CHECK(distinct.size() == every.size());
    for (const std::string& key : keys.script_keys()) {
        if (key != keys.epoch) { // shared by every semaphore of the prefix: probed apart
            CHECK(distinct.contains(key));
        }
    }
    for (const std::string& key : {keys.nudge("T"), keys.left("T"), keys.too_large("T"),
                                   keys.released("T"), keys.drained()}) {
        CHECK(distinct.contains(key));
    }
}

// The format number of a semaphore's stored state (k_state_format, the state hash's field
// `format`): written whenever the limit is stored, and a semaphore that a newer release stored
// in a format this one does not read is refused by every command, and left as it is.
#include <catch2/catch.hpp>

#include "semaphore/protocol.hpp"
#include "support/helpers.hpp"

#include <map>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

constexpr int k_conflict = 65;

// Every key of the database with its type, its content and whether it expires: what "left
// as it is" means.
std::map<std::string, std::string> snapshot(Connection& admin) {
    std::map<std::string, std::string> keys;
    const Reply all = admin.call({"KEYS", "*"});
    for (const Reply& key : all.as_array()) {
        const std::string& name = key.as_string();
        const std::string type = admin.call({"TYPE", name}).as_string();
        std::vector<std::string> read{"GET", name};
        if (type == "hash") {
            read = {"HGETALL", name};
        } else if (type == "zset") {
            read = {"ZRANGE", name, "0", "-1", "WITHSCORES"};
        } else if (type == "list") {
            read = {"LRANGE", name, "0", "-1"};
        } else if (type == "stream") {
            read = {"XRANGE", name, "-", "+"};
        }
        std::string content = type;
        const Reply value = admin.call(read);
        for (const Reply& item :
             value.type == Reply::Type::array ? value.as_array() : std::vector<Reply>{value}) {
            content += " " + (item.type == Reply::Type::array ? std::to_string(item.elements.size())
                                                              : item.text);
        }
        keys[name] =
            content + " expires " + std::to_string(admin.call({"PTTL", name}).as_integer() > 0);
    }
    return keys;
}

} // namespace

TEST_CASE("a semaphore stored by a newer release is refused by every command and left as it is") {
    RedisServer server;
    Connection admin = server.admin();
    const EnvChanges env = env_for(server);
    const ProcessResult held = run_redsem({"acquire", "fmt", "-n", "2", "--ttl", "10m"}, env);
    REQUIRE(held.exit_code == 0);
    const std::string token = first_line(held.out);
    CHECK(admin.call({"HGET", "redsem:{fmt}:state", "format"}).as_string() ==
          std::to_string(k_state_format));

    admin.call({"HSET", "redsem:{fmt}:state", "format", std::to_string(k_state_format + 1)});
    const auto before = snapshot(admin);
    const std::string refused = "semaphore 'fmt' was stored by a newer redsem (state format " +
                                std::to_string(k_state_format + 1) + "; this one reads up to " +
                                std::to_string(k_state_format) + ")";
    const std::vector<std::vector<std::string>> commands{
        {"acquire", "fmt", "-n", "2", "-w", "0"},
        {"acquire", "fmt", "-n", "2", "-w", "1s"},
        {"run", "fmt", "-n", "2", "-w", "0", "--", "true"},
        {"release", "fmt", token},
        {"renew", "fmt", token},
        {"limit", "fmt"},
        {"limit", "fmt", "3"},
        {"pause", "fmt"},
        {"resume", "fmt"},
        {"gc", "fmt"},
        {"status", "fmt"}};
    for (const auto& command : commands) {
        const ProcessResult result = run_redsem(command, env);
        INFO(command[0] << " " << command.back() << ": " << result.err);
        CHECK(result.exit_code == k_conflict);
        CHECK(result.err.find(refused) != std::string::npos);
        CHECK(result.out.empty());
        CHECK(snapshot(admin) == before);
    }
    // The overview names it, and goes on with the others.
    REQUIRE(run_redsem({"acquire", "other"}, env).exit_code == 0);
    const ProcessResult overview = run_redsem({"status"}, env);
    INFO(overview.err);
    CHECK(overview.out.find("other") != std::string::npos);
    CHECK((overview.out + overview.err).find("stored by a newer redsem (state format") !=
          std::string::npos);

    // A format this release reads (none: 0.1.0's) is served as before, and the next limit
    // stored (here a caller's on the idle semaphore) writes this release's format.
    admin.call({"HDEL", "redsem:{fmt}:state", "format"});
    CHECK(run_redsem({"release", "fmt", token}, env).exit_code == 0);
    CHECK(run_redsem({"acquire", "fmt", "-n", "3", "-w", "0"}, env).exit_code == 0);
    CHECK(admin.call({"HGET", "redsem:{fmt}:state", "format"}).as_string() ==
          std::to_string(k_state_format));
}

#include <catch2/catch.hpp>

#include "fake_redis.hpp"
#include "redis/cluster.hpp"
#include "redis/connection.hpp"
#include "redis/topology.hpp"
#include "redis/url.hpp"

#include <algorithm>

using namespace redsem;
using namespace redsem::test;

namespace {

ConnectOptions options_for(const std::string& url, FakeNetwork& network) {
    ConnectOptions options{.url = parse_redis_url(url)};
    options.open_transport = network.opener();
    return options;
}

std::string get(Connection& connection, const std::string& key) {
    return connection.command(Command{key, {"GET", key}}).as_string();
}

// A CLUSTER SLOTS reply: the first half of the slots on :7000, the second on :7001.
std::string two_primaries() {
    auto range = [](long long from, long long to, int port) {
        return array(
            {integer(from), integer(to),
             array({bulk("127.0.0.1"), integer(port), bulk("id" + std::to_string(port))})});
    };
    return array({range(0, 8191, 7000), range(8192, 16383, 7001)});
}

const std::string k_key = "redsem:{x}:state"; // slot 16287, on :7001 in two_primaries()

} // namespace

TEST_CASE("topology: one server gets every command and no command of redsem's own") {
    FakeNetwork network;
    FakeServer& server = network.add("127.0.0.1:7000", [](const Words&) { return bulk("v"); });
    Connection connection(options_for("redis://127.0.0.1:7000", network));
    CHECK(get(connection, k_key) == "v");
    CHECK(get(connection, "other") == "v");
    CHECK(server.received == std::vector<Words>{{"GET", k_key}, {"GET", "other"}});
    CHECK(network.opened() == std::vector<std::string>{"127.0.0.1:7000"});
    CHECK(connection.describe() == "Redis at redis://127.0.0.1:7000");
    CHECK(connection.outage_window() == k_reconnect_window);
    CHECK_FALSE(connection.primary_changed());
}

TEST_CASE(
    "topology: a server that answers MOVED is a cluster node, and the slot's commands follow") {
    FakeNetwork network;
    FakeServer& seed = network.add("127.0.0.1:7000", [](const Words&) {
        return error("MOVED " + std::to_string(key_slot(k_key)) + " 127.0.0.1:7001");
    });
    FakeServer& owner = network.add("127.0.0.1:7001", [](const Words&) { return bulk("v"); });
    Connection connection(options_for("redis://127.0.0.1:7000", network));
    CHECK(get(connection, k_key) == "v");
    CHECK(get(connection, k_key) == "v"); // straight to the owner now
    CHECK(seed.received.size() == 1);
    CHECK(owner.received.size() == 2);
    CHECK(connection.describe().find("Redis Cluster") != std::string::npos);
    CHECK(connection.outage_window() == k_failover_window);
}

TEST_CASE("topology: ASK resends one command after ASKING, and the slot map stays") {
    FakeNetwork network;
    int asked = 0;
    FakeServer& seed = network.add("127.0.0.1:7000", [&](const Words& command) {
        if (command[0] == "HELLO") {
            return array({bulk("mode"), bulk("cluster")});
        }
        if (command[0] == "CLUSTER") { // every slot here
            return array({array({integer(0), integer(16383),
                                 array({bulk("127.0.0.1"), integer(7000), bulk("id")})})});
        }
        return asked++ == 0 ? error("ASK 16287 127.0.0.1:7001") : bulk("from the seed");
    });
    FakeServer& target = network.add("127.0.0.1:7001", [](const Words& command) {
        return command[0] == "ASKING" ? simple("OK") : bulk("from the target");
    });
    Connection connection(options_for("redis://127.0.0.1:7000", network));
    connection.for_each_primary([] {}); // learns the slot map
    CHECK(get(connection, k_key) == "from the target");
    CHECK(target.received == std::vector<Words>{{"ASKING"}, {"GET", k_key}});
    CHECK(get(connection, k_key) == "from the seed");
    CHECK(seed.received.size() == 4); // HELLO, CLUSTER SLOTS, GET (ASK), GET
}

TEST_CASE(
    "topology: TRYAGAIN is resent after a pause, and stands once the command timeout ran out") {
    FakeNetwork network;
    int tries = 0;
    FakeServer& node = network.add("127.0.0.1:7000", [&](const Words&) {
        return ++tries <= 2 ? error("TRYAGAIN Multiple keys request during rehashing of slot")
                            : bulk("v");
    });
    ConnectOptions options = options_for("redis://127.0.0.1:7000", network);
    options.command_timeout = Milliseconds{2000};
    Connection connection(options);
    CHECK(get(connection, "a") == "v");
    CHECK(node.received.size() == 3);
    CHECK(connection.describe().find("Redis Cluster") != std::string::npos);

    tries = -1'000'000; // TRYAGAIN from now on
    connection.set_command_timeout(Milliseconds{50});
    const Reply stands = connection.command(Command{"a", {"GET", "a"}});
    CHECK(is_error_code(stands, "TRYAGAIN"));
}

TEST_CASE("topology: a node the cluster names that cannot be reached is a failover under way") {
    FakeNetwork network;
    network.add("127.0.0.1:7000", [](const Words&) {
        return error("MOVED " + std::to_string(key_slot(k_key)) + " 127.0.0.1:7001");
    });
    Connection connection(options_for("redis://127.0.0.1:7000", network));
    try {
        get(connection, k_key);
        FAIL("no error");
    } catch (const Error& failure) {
        CHECK(failure.transience() == Transience::transient);
        CHECK(failure.exit_code() == 69);
        CHECK(std::string(failure.what()).find("failover under way") != std::string::npos);
    }
}

TEST_CASE("topology: for_each_primary visits every primary of a cluster, one server once") {
    FakeNetwork network;
    auto node = [](const Words& command) {
        return command[0] == "CLUSTER" ? two_primaries() : integer(1);
    };
    FakeServer& first = network.add("127.0.0.1:7000", node);
    FakeServer& second = network.add("127.0.0.1:7001", node);
    Connection cluster(options_for("redis://127.0.0.1:7000", network));
    int visits = 0;
    cluster.for_each_primary([&] {
        ++visits;
        cluster.call(std::vector<std::string>{"DBSIZE"});
    });
    CHECK(visits == 2);
    CHECK(first.received.back() == Words{"DBSIZE"});
    CHECK(second.received == std::vector<Words>{{"DBSIZE"}});

    FakeServer& single = network.add("127.0.0.1:7002", [](const Words& command) {
        return command[0] == "CLUSTER" ? error("ERR This instance has cluster support disabled")
                                       : integer(1);
    });
    Connection one(options_for("redis://127.0.0.1:7002", network));
    visits = 0;
    one.for_each_primary([&] {
        ++visits;
        one.call(std::vector<std::string>{"DBSIZE"});
    });
    CHECK(visits == 1);
    CHECK(single.received.back() == Words{"DBSIZE"});
    CHECK(one.describe() == "Redis at redis://127.0.0.1:7002");
}

namespace {

// A sentinel that names the master on :7000 first, then on :7001.
std::string sentinel_answer(int& asked, const Words& command) {
    if (command[0] != "SENTINEL") {
        return error("ERR unexpected");
    }
    return array({bulk("127.0.0.1"), bulk(asked++ == 0 ? "7000" : "7001")});
}

std::string master_answer(const Words& command, const std::string& get_reply) {
    if (command[0] == "HELLO") {
        return array({bulk("server"), bulk("redis"), bulk("mode"), bulk("standalone"), bulk("role"),
                      bulk("master")});
    }
    return get_reply;
}

} // namespace

TEST_CASE("topology: through sentinels, the master they name after HELLO confirms it") {
    FakeNetwork network;
    int asked = 0;
    network.add("127.0.0.1:26379",
                [&](const Words& command) { return sentinel_answer(asked, command); });
    FakeServer& master = network.add(
        "127.0.0.1:7000", [](const Words& command) { return master_answer(command, bulk("v")); });
    Connection connection(options_for("redis-sentinel://127.0.0.1:26379#mymaster", network));
    CHECK(get(connection, k_key) == "v");
    CHECK(master.received == std::vector<Words>{{"HELLO"}, {"GET", k_key}});
    CHECK(connection.server() == "redis://127.0.0.1:7000");
    CHECK(connection.outage_window() == k_failover_window);
    CHECK(connection.describe().find("'mymaster'") != std::string::npos);
    // Asked anew, the sentinel names :7001: the primary changed, and commands go there.
    network.add("127.0.0.1:7001",
                [](const Words& command) { return master_answer(command, bulk("w")); });
    CHECK(connection.primary_changed());
    CHECK(get(connection, k_key) == "w");
}

TEST_CASE("topology: through sentinels, a named master whose HELLO says replica is a failover, "
          "where HELLO is renamed, ROLE tells, and where neither answers, nothing does") {
    FakeNetwork network;
    int asked = 0;
    network.add("127.0.0.1:26379",
                [&](const Words& command) { return sentinel_answer(asked, command); });
    std::string role = "replica";
    bool hello = true;
    bool role_allowed = true;
    FakeServer& named = network.add("127.0.0.1:7000", [&](const Words& command) {
        if (command[0] == "HELLO") {
            return hello ? array({bulk("role"), bulk(role)})
                         : error("ERR unknown command 'HELLO', with args beginning with: ");
        }
        if (command[0] == "ROLE") {
            return role_allowed
                       ? array({bulk(role == "replica" ? "slave" : role), integer(0), array({})})
                       : error("NOPERM this user has no permissions to run the 'role' command");
        }
        return bulk("v");
    });
    Connection connection(options_for("redis-sentinel://127.0.0.1:26379#mymaster", network));
    try {
        get(connection, k_key);
        FAIL("no error");
    } catch (const Error& failure) {
        CHECK(failure.transience() == Transience::transient);
        CHECK(std::string(failure.what()).find("its role is 'replica'") != std::string::npos);
    }
    hello = false;
    role = "master";
    asked = 0; // the sentinel names :7000 again
    Connection renamed(options_for("redis-sentinel://127.0.0.1:26379#mymaster", network));
    CHECK(get(renamed, k_key) == "v");
    CHECK(std::find(named.received.begin(), named.received.end(), Words{"ROLE"}) !=
          named.received.end());
    role_allowed = false;
    asked = 0;
    Connection neither(options_for("redis-sentinel://127.0.0.1:26379#mymaster", network));
    CHECK(get(neither, k_key) == "v");
}

TEST_CASE("topology: through sentinels, READONLY is resent once to the master named anew") {
    FakeNetwork network;
    int asked = 0;
    network.add("127.0.0.1:26379",
                [&](const Words& command) { return sentinel_answer(asked, command); });
    network.add("127.0.0.1:7000", [](const Words& command) {
        return master_answer(command,
                             error("READONLY You can't write against a read only replica."));
    });
    FakeServer& promoted = network.add(
        "127.0.0.1:7001", [](const Words& command) { return master_answer(command, bulk("v")); });
    Connection connection(options_for("redis-sentinel://127.0.0.1:26379#mymaster", network));
    CHECK(get(connection, k_key) == "v");
    CHECK(promoted.received.back() == Words{"GET", k_key});
}

TEST_CASE("topology: through sentinels, a master named anew that is read-only too is a failover") {
    FakeNetwork network;
    int asked = 0;
    network.add("127.0.0.1:26379",
                [&](const Words& command) { return sentinel_answer(asked, command); });
    for (const char* address : {"127.0.0.1:7000", "127.0.0.1:7001"}) {
        network.add(address, [](const Words& command) {
            return master_answer(command,
                                 error("READONLY You can't write against a read only replica."));
        });
    }
    Connection connection(options_for("redis-sentinel://127.0.0.1:26379#mymaster", network));
    try {
        get(connection, k_key);
        FAIL("no error");
    } catch (const Error& failure) {
        CHECK(failure.transience() == Transience::transient);
        CHECK(std::string(failure.what()).find("failover under way") != std::string::npos);
    }
}

TEST_CASE("scripts: FCALL first, the library loaded where missing, EVALSHA where FCALL is "
          "refused, and FCALL never tried again on that connection") {
    static const FunctionLibrary library{"redsem_test", "#!lua name=redsem_test\n"};
    static const Script script{"test", "0123456789012345678901234567890123456789", "return 1",
                               "redsem_test_test", &library};
    const ScriptCall call{script, {k_key}, {"arg"}};

    SECTION("a Redis 6.2 knows no FCALL: EVALSHA from then on") {
        FakeNetwork network;
        FakeServer& server = network.add("127.0.0.1:7000", [](const Words& words) {
            if (words.front() == "FCALL") {
                return error("ERR unknown command `FCALL`, with args beginning with: ");
            }
            return integer(1);
        });
        Connection connection(options_for("redis://127.0.0.1:7000", network));
        CHECK(connection.eval(call).as_integer() == 1);
        CHECK(connection.eval(call).as_integer() == 1);
        std::vector<std::string> sent;
        for (const Words& words : server.received) {
            if (words.front() != "HELLO") { // (what the unknown command says of the server)
                sent.push_back(words.front());
            }
        }
        CHECK(sent == std::vector<std::string>{"FCALL", "EVALSHA", "EVALSHA"});
    }
    SECTION("a server without the library: FUNCTION LOAD, then FCALL again") {
        FakeNetwork network;
        bool loaded = false;
        FakeServer& server = network.add("127.0.0.1:7000", [&](const Words& words) {
            if (words.front() == "FUNCTION") {
                loaded = true;
                return bulk("redsem_test");
            }
            return loaded ? integer(1) : error("ERR Function not found");
        });
        Connection connection(options_for("redis://127.0.0.1:7000", network));
        CHECK(connection.eval(call).as_integer() == 1);
        REQUIRE(server.received.size() == 3);
        CHECK(server.received[1] == Words{"FUNCTION", "LOAD", library.code});
        CHECK(server.received[2].at(0) == "FCALL");
        CHECK(server.received[2].at(1) == "redsem_test_test");
    }
    SECTION("a user who may not load it: EVALSHA, then EVAL on NOSCRIPT") {
        FakeNetwork network;
        FakeServer& server = network.add("127.0.0.1:7000", [](const Words& words) {
            if (words.front() == "FUNCTION") {
                return error("NOPERM this user has no permissions to run the 'function|load' "
                             "command");
            }
            if (words.front() == "FCALL") {
                return error("ERR Function not found");
            }
            return words.front() == "EVALSHA" ? error("NOSCRIPT No matching script.") : integer(1);
        });
        Connection connection(options_for("redis://127.0.0.1:7000", network));
        CHECK(connection.eval(call).as_integer() == 1);
        std::vector<std::string> sent;
        for (const Words& words : server.received) {
            sent.push_back(words.front());
        }
        CHECK(sent == std::vector<std::string>{"FCALL", "FUNCTION", "EVALSHA", "EVAL"});
        CHECK(connection.eval(call).as_integer() == 1); // no FCALL nor FUNCTION any more
        CHECK(std::count_if(server.received.begin(), server.received.end(), [](const Words& w) {
                  return w.front() == "FCALL" || w.front() == "FUNCTION";
              }) == 2);
    }
}

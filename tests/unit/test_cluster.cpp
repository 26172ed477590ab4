#include <catch2/catch.hpp>

#include "redis/cluster.hpp"
#include "replies.hpp"
#include "util/errors.hpp"

using namespace redsem;
using redsem::replies::array;
using redsem::replies::bulk;
using redsem::replies::integer;

TEST_CASE("key_slot: CRC16 modulo 16384 of the hash tag, as the Redis Cluster spec defines it") {
    // The spec's check value: CRC16/XMODEM("123456789") = 0x31C3.
    CHECK(key_slot("123456789") == 0x31C3 % 16384);
    CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
    CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
    CHECK(key_slot("foo{}{bar}") == key_slot("foo{}{bar}")); // an empty tag: the whole key
    CHECK(key_slot("foo{}{bar}") != key_slot("bar"));
    CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar")); // the first '{' to the next '}'
    CHECK(key_slot("foo{bar}{zap}") == key_slot("bar"));
    // Values redis-cli CLUSTER KEYSLOT gives.
    CHECK(key_slot("redsem:{x}:state") == 16287);
    CHECK(key_slot("") == 0);
}

TEST_CASE("parse_redirect: MOVED and ASK with their slot and node") {
    const Endpoint from{"10.0.0.1", 7000};
    auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381", from);
    REQUIRE(moved);
    CHECK(moved->kind == Redirect::Kind::moved);
    CHECK(moved->slot == 3999);
    CHECK(moved->to.host == "127.0.0.1");
    CHECK(moved->to.port == 6381);

    auto ask = parse_redirect("ASK 16383 ::1:7001", from);
    REQUIRE(ask);
    CHECK(ask->kind == Redirect::Kind::ask);
    CHECK(ask->to.host == "::1"); // the port follows the last ':'
    CHECK(ask->to.port == 7001);

    // A node that does not know its address: the one that answered.
    auto unknown = parse_redirect("MOVED 1 :7002", from);
    REQUIRE(unknown);
    CHECK(unknown->to.host == "10.0.0.1");
    CHECK(parse_redirect("MOVED 1 ?:7002", from)->to.host == "10.0.0.1");

    CHECK_FALSE(parse_redirect("TRYAGAIN Multiple keys request during rehashing of slot", from));
    CHECK_FALSE(parse_redirect("MOVED 16384 127.0.0.1:6381", from));
    CHECK_FALSE(parse_redirect("MOVED x 127.0.0.1:6381", from));
    CHECK_FALSE(parse_redirect("MOVED 5 127.0.0.1", from));
    CHECK_FALSE(parse_redirect("MOVED 5 127.0.0.1:0", from));
    CHECK_FALSE(parse_redirect("MOVED", from));
}

namespace {

Reply node(const std::string& host, long long port) {
    return array({bulk(host), integer(port), bulk("0123456789abcdef")});
}

} // namespace

TEST_CASE("SlotMap: CLUSTER SLOTS ranges, primaries and replicas, and MOVED updating one slot") {
    const Endpoint asked{"10.0.0.9", 7000};
    const Reply reply = array({
        array({integer(0), integer(5460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)}),
        array({integer(5461), integer(10922), node("", 7001)}),
        array({integer(10923), integer(16383), node("10.0.0.3", 7002)}),
    });
    SlotMap map = SlotMap::from_cluster_slots(reply, asked);
    CHECK(map.owner(0)->port == 7000);
    CHECK(map.owner(5460)->host == "10.0.0.1");
    CHECK(map.owner(5461)->host == "10.0.0.9"); // an empty host: the node asked
    CHECK(map.owner(16383)->port == 7002);
    CHECK(map.primaries().size() == 3);
    CHECK(map.nodes().size() == 4); // the replica too, for asking later

    map.assign(100, Endpoint{"10.0.0.3", 7002});
    CHECK(map.owner(100)->port == 7002);
    CHECK(map.owner(101)->port == 7000);

    SlotMap sparse; // learned from MOVED replies only
    CHECK(sparse.owner(42) == nullptr);
    sparse.assign(42, Endpoint{"h", 1});
    CHECK(sparse.owner(42)->host == "h");
    CHECK(sparse.primaries().size() == 1);

    // A reply that is not a slot map is the server's fault (69), not a bug of redsem's.
    const auto refused = [&](const Reply& slots) {
        try {
            SlotMap::from_cluster_slots(slots, asked);
        } catch (const Error& error) {
            return error.exit_code() == static_cast<int>(ExitCode::unavailable);
        }
        return false;
    };
    CHECK(refused(bulk("nope")));
    CHECK(refused(array({array({integer(5), integer(2), node("h", 1)})})));
    CHECK(refused(array({array({integer(0), integer(16384), node("h", 1)})})));
    CHECK(refused(array({array({integer(0), integer(1), node("h", 70000)})})));
    CHECK(refused(array({array({integer(0), integer(1), node("h\x1b[31m", 7000)})})));
}

#include <catch2/catch.hpp>

#include "redis/server_info.hpp"

using redsem::ServerInfo;

TEST_CASE("ServerInfo reads INFO's fields, skipping section headers and blank lines") {
    const ServerInfo info("# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n\r\n# Memory\r\n"
                          "maxmemory:3145728\r\nmaxmemory_policy:volatile-lru\r\n"
                          "slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n");
    CHECK(info.get("redis_version") == "7.0.15");
    CHECK(info.get("maxmemory_policy") == "volatile-lru");
    CHECK(info.number("maxmemory") == 3145728);
    // A value may hold colons and equals signs of its own.
    CHECK(info.get("slave0") == "ip=127.0.0.1,port=7001,state=online,offset=42,lag=0");
    CHECK_FALSE(info.get("# Server"));
    CHECK_FALSE(info.get("missing"));
    CHECK_FALSE(info.number("run_id")); // not a number
    CHECK_FALSE(info.empty());
}

TEST_CASE("ServerInfo of an empty or field-less text is empty") {
    CHECK(ServerInfo("").empty());
    CHECK(ServerInfo("# Server\n\nno colon here\n").empty());
    CHECK(ServerInfo("cluster_state:ok\ncluster_slots_ok:16384").number("cluster_slots_ok") ==
          16384);
}

#include <catch2/catch.hpp>

#include "process/secrecy.hpp"
#include "redis/url.hpp"
#include "util/errors.hpp"

using redsem::parse_redis_url;
using redsem::RedisUrl;

TEST_CASE("redis:// URLs with host, port, db and credentials") {
    RedisUrl url = parse_redis_url("redis://127.0.0.1");
    CHECK(url.kind == RedisUrl::Kind::tcp);
    CHECK(url.host == "127.0.0.1");
    CHECK(url.port == 6379);
    CHECK(url.db == 0);
    CHECK_FALSE(url.password);

    url = parse_redis_url("redis://cache.internal:6380/3");
    CHECK(url.host == "cache.internal");
    CHECK(url.port == 6380);
    CHECK(url.db == 3);

    url = parse_redis_url("redis://:s3cret@host");
    CHECK_FALSE(url.user);
    CHECK(url.password == "s3cret");

    url = parse_redis_url("redis://alice:pa%40ss%3Aword@host:1/");
    CHECK(url.user == "alice");
    CHECK(url.password == "pa@ss:word");
    CHECK(url.db == 0);

    url = parse_redis_url("redis://alice@host");
    CHECK(url.user == "alice");
    CHECK_FALSE(url.password);
}

TEST_CASE("IPv6 addresses in brackets") {
    RedisUrl url = parse_redis_url("redis://[::1]:6380");
    CHECK(url.host == "::1");
    CHECK(url.port == 6380);
    url = parse_redis_url("redis://[fe80::1]");
    CHECK(url.host == "fe80::1");
    CHECK(url.port == 6379);
    CHECK(url.describe() == "redis://[fe80::1]:6379");
}

TEST_CASE("unix:// and redis+unix:// sockets") {
    RedisUrl url = parse_redis_url("unix:///run/redis/redis.sock");
    CHECK(url.kind == RedisUrl::Kind::unix_socket);
    CHECK(url.socket_path == "/run/redis/redis.sock");
    CHECK(url.db == 0);

    url = parse_redis_url("redis+unix:///tmp/r.sock?db=5");
    CHECK(url.socket_path == "/tmp/r.sock");
    CHECK(url.db == 5);

    url = parse_redis_url("unix://bob:pw@/tmp/r.sock");
    CHECK(url.user == "bob");
    CHECK(url.password == "pw");
    CHECK(url.socket_path == "/tmp/r.sock");

    // A '?' or '%' in the path is written percent-encoded, so the description parses back.
    url = parse_redis_url("unix:///tmp/a%3Fb%25c.sock?db=2");
    CHECK(url.socket_path == "/tmp/a?b%c.sock");
    CHECK(url.describe() == "unix:///tmp/a%3Fb%25c.sock?db=2");
    CHECK(parse_redis_url(url.describe()).socket_path == "/tmp/a?b%c.sock");
}

TEST_CASE("rediss:// is TCP with TLS, and says so when described") {
    const RedisUrl url = parse_redis_url("rediss://alice:hunter2@db.example:7000/2");
    CHECK(url.tls);
    CHECK(url.kind == RedisUrl::Kind::tcp);
    CHECK(url.host == "db.example");
    CHECK(url.port == 7000);
    CHECK(url.db == 2);
    CHECK(url.password == "hunter2");
    CHECK(url.describe() == "rediss://alice@db.example:7000/2");
    CHECK(parse_redis_url("rediss://[::1]").describe() == "rediss://[::1]:6379");
    CHECK_FALSE(parse_redis_url("redis://host").tls);
}

TEST_CASE("redis-sentinel:// URLs: sentinels, default port, db, credentials, master name") {
    RedisUrl url = parse_redis_url("redis-sentinel://alice:s3cret@s1,s2:26380,[::1]/2#my%23master");
    CHECK(url.kind == RedisUrl::Kind::sentinel);
    CHECK_FALSE(url.tls);
    REQUIRE(url.sentinels.size() == 3);
    CHECK(url.sentinels[0].host == "s1");
    CHECK(url.sentinels[0].port == 26379);
    CHECK(url.sentinels[1].host == "s2");
    CHECK(url.sentinels[1].port == 26380);
    CHECK(url.sentinels[2].host == "::1");
    CHECK(url.sentinels[2].port == 26379);
    CHECK(url.db == 2);
    CHECK(url.user == "alice");
    CHECK(url.password == "s3cret");
    CHECK(url.master_name == "my#master");
    CHECK(url.describe() == "redis-sentinel://alice@s1:26379,s2:26380,[::1]:26379/2#my%23master");
    // What describe() prints parses back to the same sentinels and master.
    const RedisUrl again = parse_redis_url(url.describe());
    CHECK(again.master_name == "my#master");
    CHECK(again.sentinels.size() == 3);

    url = parse_redis_url("rediss-sentinel://h#m@aster%25");
    CHECK(url.tls);
    CHECK(url.master_name == "m@aster%");
    CHECK(parse_redis_url(url.describe()).master_name == "m@aster%");

    // A user name with the URL's own delimiters is written percent-encoded, so it does not end
    // the userinfo or start the master's name (found by fuzz_url: "al#ce" became the fragment).
    url = parse_redis_url("redis-sentinel://al%23ce%40x:pw@h#m");
    CHECK(url.user == "al#ce@x");
    CHECK(url.describe() == "redis-sentinel://al%23ce%40x@h:26379#m");
    CHECK(parse_redis_url(url.describe()).user == "al#ce@x");
    CHECK(parse_redis_url(url.describe()).master_name == "m");

    // The master's address from a sentinel: a tcp URL with the same TLS, db and credentials.
    const RedisUrl master = parse_redis_url("rediss-sentinel://:pw@h/3#m").at({"10.0.0.5", 6380});
    CHECK(master.kind == RedisUrl::Kind::tcp);
    CHECK(master.tls);
    CHECK(master.describe() == "rediss://10.0.0.5:6380/3");
    CHECK(master.password == "pw");
}

TEST_CASE("redis:// URLs with several hosts: the seeds of one Redis Cluster, in order") {
    const RedisUrl url = parse_redis_url("redis://alice:pw@h1:7000,h2,[::1]:7002/0");
    CHECK(url.kind == RedisUrl::Kind::tcp);
    REQUIRE(url.seeds.size() == 3);
    CHECK(url.seeds[0].describe() == "h1:7000");
    CHECK(url.seeds[1].describe() == "h2:6379");
    CHECK(url.seeds[2].describe() == "[::1]:7002");
    CHECK(url.host == "h1");
    CHECK(url.port == 7000);
    CHECK(url.describe() == "redis://alice@h1:7000,h2:6379,[::1]:7002");
    CHECK(parse_redis_url(url.describe()).seeds.size() == 3);
    const RedisUrl one = url.at(url.seeds[1]);
    CHECK(one.seeds.empty());
    CHECK(one.describe() == "redis://alice@h2:6379");
    CHECK(parse_redis_url("redis://h1:7000").seeds.empty());
}

TEST_CASE("describe() never shows the password") {
    const RedisUrl url = parse_redis_url("redis://alice:hunter2@db.example:7000/2");
    CHECK(url.describe() == "redis://alice@db.example:7000/2");
    const RedisUrl socket = parse_redis_url("unix://:hunter2@/tmp/r.sock?db=1");
    CHECK(socket.describe() == "unix:///tmp/r.sock?db=1");
}

TEST_CASE("malformed URLs are usage errors that do not echo the password") {
    const std::vector<std::string> bad{
        "",
        "127.0.0.1:6379",
        "http://host",
        "rediss://",
        "rediss://:hunter2@host:0",
        "rediss+unix:///tmp/r.sock",
        "redis://",
        "redis://:hunter2@",
        "redis://host:",
        "redis://host:0",
        "redis://host:65536",
        "redis://host:abc",
        "redis://:hunter2@host:port",
        "redis://host/abc",
        "redis://host/-1",
        "redis://[::1",
        "redis://[::1]6380",
        "redis://[[]", // found by fuzz_url: a host "[" that described itself unparseably
        "redis://[a]b]:1",
        // found by fuzz_url: a host longer than a DNS name described itself cut short
        "redis://" + std::string(254, 'a') + ":1",
        "redis-sentinel://s1,[" + std::string(300, ':') + "1]#m",
        "redis://h[x]:1",
        "redis://host?db=1",
        "redis://ho st",
        "unix://",
        "unix://host/tmp/r.sock",
        "unix:///tmp/r.sock?db=x",
        "unix:///tmp/r.sock?timeout=1",
        "unix:///",
        "redis://:hunter2%zz@host",
        "redis://h1,,h2:6380",
        "redis://h1,",
        "redis://:hunter2@h1,h2:0",
        "redis-sentinel://h1,h2",
        "redis-sentinel://h1#",
        "redis-sentinel://#mymaster",
        "redis-sentinel://h1,,h2#m",
        "redis-sentinel://h1,#m",
        "redis-sentinel://:hunter2@h1:0#m",
        "redis-sentinel://:hunter2@h1:26379/x#m",
        "redis-sentinel://h1?x=1#m",
        "redis-sentinel://h1#my master",
        "redis-sentinel://h1#a%zz",
        "redis://alice:hunter2",
        "redis-sentinel://alice:hunter2#m",
    };
    for (const auto& text : bad) {
        INFO(text);
        try {
            parse_redis_url(text);
            FAIL("accepted: " + text);
        } catch (const redsem::UsageError& error) {
            const std::string message = error.what();
            CHECK(message.rfind("invalid Redis URL", 0) == 0);
            CHECK(message.find("hunter2") == std::string::npos);
        }
    }
}

TEST_CASE("url_password_span: where a URL's password is written, to cut it out of argv") {
    // What is left once the span is cut must parse to the same URL without its password.
    auto cut = [](std::string text) {
        if (auto span = redsem::url_password_span(text)) {
            text.erase(span->first, span->second - span->first);
        }
        return text;
    };
    CHECK(cut("redis://:pw@host:6380/2") == "redis://host:6380/2");
    CHECK(cut("redis://alice:pw@host") == "redis://alice@host");
    CHECK(cut("--url=rediss://alice:p%40w@h1,h2") == "--url=rediss://alice@h1,h2");
    CHECK(cut("-uredis://:a:b@c@host") == "-uredis://host"); // the last '@' ends it, as parsed
    CHECK(cut("redis-sentinel://:pw@s1,s2/0#master@x") == "redis-sentinel://s1,s2/0#master@x");
    CHECK(cut("redis://:S3#cret@host:6380") == "redis://host:6380"); // '#' in a password
    CHECK(cut("unix://:pw@/run/redis@1.sock") == "unix:///run/redis@1.sock");
    CHECK(cut("unix://u:pw@/run/redis.sock?db=2") == "unix://u@/run/redis.sock?db=2");
    // No password: nothing to cut.
    CHECK_FALSE(redsem::url_password_span("redis://alice@host"));
    CHECK_FALSE(redsem::url_password_span("redis://host:6379"));
    CHECK_FALSE(redsem::url_password_span("user:pw@host"));
    CHECK_FALSE(redsem::url_password_span("unix:///tmp/a:b@c.sock"));
    for (const std::string url : {"redis://:pw@host:6380/2", "redis://alice:pw@host",
                                  "redis://:a#b@h", "unix://u:pw@/run/redis.sock?db=2"}) {
        const RedisUrl whole = parse_redis_url(url);
        const RedisUrl cut_url = parse_redis_url(cut(url));
        CHECK_FALSE(cut_url.password);
        CHECK(cut_url.describe() == whole.describe());
    }
}

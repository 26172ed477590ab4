#include <catch2/catch.hpp>

#include "redis/reply.hpp"
#include "replies.hpp"
#include "util/errors.hpp"

using namespace redsem;

TEST_CASE("Redis error replies map to the documented exit codes") {
    const std::vector<std::pair<std::string, ExitCode>> cases{
        {"NOAUTH Authentication required.", ExitCode::denied},
        {"WRONGPASS invalid username-password pair or user is disabled.", ExitCode::denied},
        {"NOPERM this user has no permissions to access one of the keys used as arguments",
         ExitCode::denied},
        {"ERR invalid password", ExitCode::denied},
        {"ERR Protocol error: unauthenticated multibulk length", ExitCode::denied},
        {"ERR AUTH <password> called without any password configured for the default user.",
         ExitCode::denied},
        {"WRONGTYPE Operation against a key holding the wrong kind of value", ExitCode::conflict},
        {"LOADING Redis is loading the dataset in memory", ExitCode::unavailable},
        {"READONLY You can't write against a read only replica.", ExitCode::unavailable},
        {"OOM command not allowed when used memory > 'maxmemory'.", ExitCode::unavailable},
        {"MASTERDOWN Link with MASTER is down", ExitCode::unavailable},
        {"DENIED Redis is running in protected mode because protected mode is enabled",
         ExitCode::unavailable},
        {"MISCONF Redis is configured to save RDB snapshots", ExitCode::unavailable},
        {"BUSY Redis is busy running a script.", ExitCode::unavailable},
        {"CLUSTERDOWN The cluster is down", ExitCode::unavailable},
        {"MOVED 3999 127.0.0.1:6381", ExitCode::unavailable},
        {"ERR unknown command 'EVALSHA'", ExitCode::unavailable},
        {"ERR max number of clients reached", ExitCode::unavailable},
        {"NOREPLICAS Not enough good replicas to write. script: 234a, on @user_script:1068.",
         ExitCode::unavailable},
        {"ERR The user executing the script can't run this command or subcommand script: 12ab, "
         "on @user_script:258.",
         ExitCode::denied},
        {"EVICTING Redis may evict any key (maxmemory-policy allkeys-lru with a maxmemory)",
         ExitCode::unavailable},
        {"EVICTING", ExitCode::unavailable},
        {"NOPERM this user has no permissions to run the 'setbit' command", ExitCode::denied},
        {"ERR something nobody expected", ExitCode::internal},
        // Redis 6.2 wraps errors from inside a script
        {"ERR Error running script (call to f_0123): @user_script:12: WRONGTYPE Operation against "
         "a key holding the wrong kind of value",
         ExitCode::conflict},
        {"ERR Error running script (call to f_0123): @user_script:7: OOM command not allowed when "
         "used memory > 'maxmemory'.",
         ExitCode::unavailable},
        {"ERR Error running script (call to f_0123): @user_script:3: NOPERM this user has no "
         "permissions to access one of the keys",
         ExitCode::denied},
    };
    for (const auto& [reply, code] : cases) {
        INFO(reply);
        const auto meaning = classify_reply_error(reply);
        CHECK(meaning.code == code);
        CHECK_FALSE(meaning.message.empty());
        CHECK(meaning.message.find('\n') == std::string::npos);
    }
}

TEST_CASE("a refused command is named with the ACL rule to add, and redsem's own refusal of an "
          "evicting Redis reads as one sentence") {
    const auto denied =
        classify_reply_error("NOPERM this user has no permissions to run the 'setbit' command");
    CHECK(denied.message.find("add +setbit to the user's ACL rules") != std::string::npos);
    const auto evicting = classify_reply_error(
        "EVICTING Redis may evict any key (maxmemory-policy allkeys-lru with a maxmemory)");
    CHECK(evicting.message.rfind("redsem admits nobody on this Redis: Redis may evict", 0) == 0);
    CHECK(evicting.message.find("EVICTING") == std::string::npos);
}

TEST_CASE("throw_reply_error carries the exit code") {
    try {
        throw_reply_error("NOPERM no permissions");
        FAIL("no exception");
    } catch (const Error& error) {
        CHECK(error.exit_code() == 77);
    }
}

TEST_CASE("each error class has its documented exit code") {
    CHECK(UsageError("x").exit_code() == 64);
    CHECK(ConflictError("x").exit_code() == 65);
    CHECK(UnavailableError("x").exit_code() == 69);
    CHECK(ConnectionLost("x").exit_code() == 69);
    CHECK(InternalError("x").exit_code() == 70);
    CHECK(DeniedError("x").exit_code() == 77);
    CHECK(NotHeldError("x").exit_code() == 1);
    CHECK(Interrupted(15).exit_code() == 143);
    CHECK(Interrupted(2).exit_code() == 130);
}

TEST_CASE("Reply accessors refuse the wrong shape") {
    const Reply integer = replies::integer(7);
    CHECK(integer.as_integer() == 7);
    CHECK_THROWS_AS(integer.as_string(), InternalError);
    CHECK_THROWS_AS(integer.as_array(), InternalError);
    const Reply array = replies::array({integer});
    CHECK(array.at(0).as_integer() == 7);
    CHECK_THROWS_AS(array.at(1), InternalError);
}

TEST_CASE("whether an error is worth retrying is a property of the error") {
    const std::vector<std::pair<std::string, Transience>> cases{
        {"LOADING Redis is loading the dataset in memory", Transience::transient},
        {"BUSY Redis is busy running a script.", Transience::transient},
        {"TRYAGAIN Multiple keys request during rehashing of slot", Transience::transient},
        {"CLUSTERDOWN The cluster is down", Transience::transient},
        {"MASTERDOWN Link with MASTER is down", Transience::transient},
        {"ERR Error running script (call to f_0123): @user_script:7: BUSY Redis is busy",
         Transience::transient},
        {"READONLY You can't write against a read only replica.", Transience::permanent},
        {"OOM command not allowed when used memory > 'maxmemory'.", Transience::permanent},
        {"NOPERM this user has no permissions", Transience::permanent},
        {"WRONGTYPE Operation against a key holding the wrong kind of value",
         Transience::permanent},
        {"ERR something nobody expected", Transience::permanent},
    };
    for (const auto& [reply, transience] : cases) {
        INFO(reply);
        CHECK(classify_reply_error(reply).transience == transience);
        try {
            throw_reply_error(reply);
        } catch (const Error& error) {
            CHECK(error.transience() == transience);
        }
    }
    CHECK(ConnectionLost("broke").transience() == Transience::broken);
    CHECK(UnavailableError("refused").transience() == Transience::unreachable);
    CHECK(UsageError("bad").transience() == Transience::permanent);
}

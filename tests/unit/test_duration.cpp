#include <catch2/catch.hpp>

#include "util/duration.hpp"
#include "util/errors.hpp"

using redsem::format_duration;
using redsem::Milliseconds;
using redsem::parse_duration;

TEST_CASE("parse_duration accepts units, combinations and bare seconds") {
    const std::vector<std::pair<std::string, long long>> cases{
        {"250ms", 250},     {"30s", 30'000},         {"5m", 300'000},   {"2h", 7'200'000},
        {"1d", 86'400'000}, {"1h30m", 5'400'000},    {"1m30s", 90'000}, {"45", 45'000},
        {"0", 0},           {"1.5s", 1'500},         {"0.25", 250},     {"2h3m4s5ms", 7'384'005},
        {"0ms", 0},         {"366d", 31'622'400'000}};
    for (const auto& [text, ms] : cases) {
        INFO(text);
        CHECK(parse_duration(text, "--ttl") == Milliseconds{ms});
    }
}

TEST_CASE("parse_duration rejects malformed, negative and overflowing input") {
    const std::vector<std::string> bad{"",
                                       "-1s",
                                       "-5",
                                       "abc",
                                       "5x",
                                       "1.s",
                                       ".5s",
                                       "s",
                                       "1h1h",
                                       "30s1m",
                                       "1 s",
                                       " 1s",
                                       "1s ",
                                       "5ms3s",
                                       "1e3",
                                       "367d",
                                       "99999999999999999999",
                                       "1..5s",
                                       "ms",
                                       "10Y",
                                       "0x10",
                                       "1h30"};
    for (const auto& text : bad) {
        INFO(text);
        CHECK_THROWS_AS(parse_duration(text, "--ttl"), redsem::UsageError);
    }
}

TEST_CASE("parse_duration names the option in its error") {
    try {
        parse_duration("soon", "--wait");
        FAIL("no exception");
    } catch (const redsem::UsageError& error) {
        CHECK(std::string(error.what()).find("--wait") != std::string::npos);
        CHECK(error.exit_code() == 64);
    }
}

TEST_CASE("parse_duration's error shows control bytes and invalid UTF-8 escaped, never raw") {
    for (const std::string& text : {std::string("5\x1b]0;T\a"), std::string("1.5\xff")}) {
        try {
            parse_duration(text, "--ttl");
            FAIL("no exception");
        } catch (const redsem::UsageError& error) {
            const std::string message = error.what();
            INFO(message);
            CHECK(message.find('\x1b') == std::string::npos);
            CHECK(message.find('\a') == std::string::npos);
            CHECK(message.find('\xff') == std::string::npos);
            CHECK(message.find("--ttl: invalid duration '") == 0);
        }
    }
}

TEST_CASE("format_duration is short and human") {
    CHECK(format_duration(Milliseconds{250}) == "250ms");
    CHECK(format_duration(Milliseconds{1500}) == "1.5s");
    CHECK(format_duration(Milliseconds{42'000}) == "42s");
    CHECK(format_duration(Milliseconds{133'000}) == "2m13s");
    CHECK(format_duration(Milliseconds{5'400'000}) == "1h30m");
    CHECK(format_duration(Milliseconds{7'200'000}) == "2h");
    CHECK(format_duration(Milliseconds{273'600'000}) == "3d4h");
    CHECK(format_duration(Milliseconds{-2000}) == "-2s");
}

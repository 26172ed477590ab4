#include <catch2/catch.hpp>

#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/time_format.hpp"
#include "util/token.hpp"

#include <set>

using namespace redsem;

TEST_CASE("valid semaphore names") {
    for (const std::string& name :
         std::vector<std::string>{"deploy", "nightly-backup", "gpu:0", "a", "über", "x.y_z/1",
                                  "日本語", "\xf0\x9f\x9a\x80", std::string(200, 'n')}) {
        INFO(name);
        CHECK_FALSE(name_problem(name));
    }
}

TEST_CASE("invalid semaphore names say why") {
    const std::vector<std::pair<std::string, std::string>> bad{
        {"", "empty"},
        {std::string(201, 'n'), "201 bytes"},
        {"a{b", "braces"},
        {"a}b", "braces"},
        {"a b", "whitespace"},
        {"a\tb", "whitespace"},
        {"a\nb", "whitespace"},
        {std::string("a\x01", 2), "control"},
        {"a\x7f", "control"},
        {"\xff\xfe", "UTF-8"},
        {"\xc0\xaf", "UTF-8"},     // overlong '/'
        {"\xed\xa0\x80", "UTF-8"}, // surrogate
        {"abc\xe2\x82", "UTF-8"},  // truncated
        {"a\xc2\xa0"
         "b",
         "whitespace"}, // U+00A0 no-break space
        {"a\xe2\x80\xa8"
         "b",
         "whitespace"}, // U+2028 line separator
        {"a\xe3\x80\x80"
         "b",
         "whitespace"}, // U+3000 ideographic space
        {"a\xe2\x80\x8b"
         "b",
         "invisible"}, // U+200B zero-width space
        {"\xef\xbb\xbf"
         "a",
         "invisible"}, // U+FEFF byte order mark
    };
    for (const auto& [name, why] : bad) {
        INFO(printable(name));
        const auto problem = name_problem(name);
        REQUIRE(problem);
        CHECK(problem->find(why) != std::string::npos);
        CHECK_THROWS_AS(check_name(name), UsageError);
    }
}

TEST_CASE("prefix rules match name rules, and empty is refused") {
    CHECK_FALSE(prefix_problem("redsem"));
    CHECK_FALSE(prefix_problem("team:a"));
    CHECK(prefix_problem(""));
    CHECK(prefix_problem("a{"));
}

TEST_CASE("printable escapes control and non-ASCII bytes and cuts long text") {
    CHECK(printable("ok") == "ok");
    CHECK(printable("a\nb") == "a\\x0ab");
    CHECK(printable("\xff") == "\\xff");
    CHECK(printable(std::string(100, 'x'), 10) == std::string(10, 'x') + "...");
}

TEST_CASE("tokens are 128-bit hex and do not repeat") {
    std::set<std::string> seen;
    for (int i = 0; i < 1000; ++i) {
        const std::string token = generate_token();
        CHECK(token.size() == 32);
        CHECK(is_token(token));
        seen.insert(token);
    }
    CHECK(seen.size() == 1000);
    CHECK_FALSE(is_token("deploy"));
    CHECK_FALSE(is_token(std::string(32, 'g')));
    CHECK_FALSE(is_token(std::string(31, 'a')));
    CHECK_FALSE(is_token(std::string(32, 'A')));
}

TEST_CASE("iso8601_utc renders epoch milliseconds") {
    CHECK(iso8601_utc(0) == "1970-01-01T00:00:00.000Z");
    CHECK(iso8601_utc(1795245772042) == "2026-11-21T07:22:52.042Z");
    // Hand-edited records: negative and far times still give valid ISO 8601.
    CHECK(iso8601_utc(-5) == "1969-12-31T23:59:59.995Z");
    CHECK(iso8601_utc(-86'400'000) == "1969-12-31T00:00:00.000Z");
    CHECK(iso8601_utc(-100'000'000'000'000'000) == "0000-01-01T00:00:00.000Z");
    CHECK(iso8601_utc(1'000'000'000'000'000'000) == "9999-12-31T23:59:59.999Z");
}

TEST_CASE("terminal_safe keeps characters, escapes what a terminal would obey, and cuts whole "
          "characters at a bound") {
    CHECK(redsem::terminal_safe("déploiement – étape 2") == "déploiement – étape 2");
    CHECK(redsem::terminal_safe("a\x1b[2Jb\x7f") == "a\\x1b[2Jb\\x7f");
    CHECK(redsem::terminal_safe("\xc3(") == "\\xc3(");               // invalid UTF-8
    CHECK(redsem::terminal_safe("x\xe2\x80\xaey") == "x\\u{202e}y"); // a right-to-left override
    CHECK(redsem::terminal_safe("\xc2\x9b") == "\\u{009b}");         // C1: CSI
    // A bound: characters that start at or past it become "...", never half a character.
    CHECK(redsem::terminal_safe("abcdef", 3) == "abc...");
    CHECK(redsem::terminal_safe("abc", 3) == "abc");
    CHECK(redsem::terminal_safe("aé", 2) == "aé"); // é starts at byte 1: kept whole
    CHECK(redsem::terminal_safe("aéb", 2) == "aé...");
    CHECK(redsem::terminal_safe("\x1b\x1b", 1) == "\\x1b...");
}

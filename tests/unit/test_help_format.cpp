#include <catch2/catch.hpp>

#include "cli/help_format.hpp"

using redsem::cli::wrap;

TEST_CASE("wrap breaks at spaces, and keeps the text's own line breaks") {
    CHECK(wrap("one two three four", 9) == "one two\nthree\nfour");
    CHECK(wrap("a b\nc", 80) == "a b\nc");
}

TEST_CASE(
    "wrap cuts a word longer than a line before a bracket, its pieces on lines of their own") {
    const std::string url =
        "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#MASTER";
    const std::string wrapped = wrap("or " + url + " (for TLS: rediss-sentinel://)", 50);
    CHECK(wrapped == "or redis-sentinel://[[user]:password@]host[:port]\n"
                     "[,host[:port]...][/db]#MASTER (for TLS:\n"
                     "rediss-sentinel://)");
    // Nothing lost, nothing added but line breaks.
    std::string joined = wrapped;
    std::erase(joined, '\n');
    CHECK(joined == "or " + url + " (for TLS:rediss-sentinel://)");
}

TEST_CASE("wrap leaves a long word with no bracket whole, on a line of its own") {
    CHECK(wrap("see https://example.org/a/very/long/path/indeed ok", 20) ==
          "see\nhttps://example.org/a/very/long/path/indeed\nok");
}

#include <catch2/catch.hpp>

#include "semaphore/record.hpp"
#include "util/table.hpp"

using namespace redsem;

TEST_CASE("render_table aligns columns on two spaces") {
    const std::string table =
        render_table({{"SLOT", "HOST", "LABEL"}, {"0", "ci-runner-7", "x"}, {"10", "a", "deploy"}});
    CHECK(table == "SLOT  HOST         LABEL\n"
                   "0     ci-runner-7  x\n"
                   "10    a            deploy\n");
}

TEST_CASE("render_table ends no line with spaces, whichever cells are empty") {
    const std::string table =
        render_table({{"TIME", "DETAIL", "LABEL"}, {"12:00", "held 1s", ""}, {"12:01", "", ""}});
    CHECK(table == "TIME   DETAIL   LABEL\n12:00  held 1s\n12:01\n");
}

TEST_CASE("render_table cuts the chosen column with an ellipsis to fit a width") {
    const std::string label(60, 'L');
    const std::string table = render_table({{"A", "LABEL"}, {"1", label}}, 30, 1);
    CHECK(table == "A  LABEL\n1  " + std::string(26, 'L') + "\xe2\x80\xa6\n");
    for (std::size_t start = 0, end = 0; (end = table.find('\n', start)) != std::string::npos;
         start = end + 1) {
        CHECK(display_width(table.substr(start, end - start)) <= 30);
    }
    // Without a width, nothing is cut.
    CHECK(render_table({{"A", "LABEL"}, {"1", label}}).find(label) != std::string::npos);
}

TEST_CASE("display_width counts UTF-8 code points") {
    CHECK(display_width("abc") == 3);
    CHECK(display_width("\xc3\xbc"
                        "ber") == 4);
    CHECK(display_width("") == 0);
}

TEST_CASE("parse_record reads holder and waiter entries") {
    const auto holder = parse_record(
        R"(h 3 1795245712042058 1795245712042 60000 {"host":"vm","pid":42,"user":"root","label":"a b"})");
    REQUIRE(holder);
    CHECK(holder->kind == Record::Kind::holder);
    CHECK(holder->slot == 3);
    CHECK(holder->fence == 1795245712042058);
    CHECK(holder->since_ms == 1795245712042);
    CHECK(holder->ttl_ms == 60000);
    CHECK(holder->meta.host == "vm");
    CHECK(holder->meta.pid == 42);
    CHECK(holder->meta.user == "root");
    CHECK(holder->meta.label == "a b");

    const auto waiter =
        parse_record(R"(w - - 1795245712042 5000 {"host":"h","pid":1,"user":"u","label":""})");
    REQUIRE(waiter);
    CHECK(waiter->kind == Record::Kind::waiter);
    CHECK(waiter->since_ms == 1795245712042);
    CHECK(waiter->ttl_ms == 5000);
}

TEST_CASE("parse_record refuses malformed entries and tolerates bad JSON") {
    for (const std::string bad :
         {"", "h", "x 0 1 2 3 {}", "h a 1 2 3 {}", "h 0 1 2 {}", "w - - x 3 {}", "h 0 1 2 3"}) {
        INFO(bad);
        CHECK_FALSE(parse_record(bad));
    }
    const auto no_json = parse_record("h 0 1 2 3 not json");
    REQUIRE(no_json);
    CHECK(no_json->meta.host.empty());
}

TEST_CASE("parse_record survives metadata of the wrong types (found by fuzz_reply)") {
    for (const std::string odd :
         {R"(h 0 1795245712042058 1795245712042 60000 {"host":"vm","pid":"x"})",
          R"(w - - 2 2 {"label":-1})", R"(w - - 2 2 {"host":null})", R"(w - - 2 2 {"pid":1e300})",
          R"(w - - 2 2 {"pid":1.5,"user":[]})"}) {
        INFO(odd);
        const auto record = parse_record(odd);
        REQUIRE(record);
        CHECK(record->meta.pid == 0);
    }
    const auto mixed = parse_record(R"(h 0 1 2 3 {"host":"vm","pid":"x","label":7})");
    REQUIRE(mixed);
    CHECK(mixed->meta.host == "vm");
    CHECK(mixed->meta.label.empty());
}

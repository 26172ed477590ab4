// The stored formats written down once (tests/fixtures): the records of records.txt, the
// formats the scripts store (lua/lib/call.lua), as src/semaphore/record.cpp reads them, the
// same fixture that tests/lua/check_records.lua holds lua/lib/records.lua to, so that the two
// readers cannot drift apart; the history events of events.txt as src/semaphore/history.cpp
// reads them; and the payloads of a waiter's lists, wakes.txt, as src/semaphore/wire.cpp
// decodes them (tests/lua/check_wakes.lua holds lua/lib/queue.lua's writers to the same file).
#include <catch2/catch.hpp>

#include "semaphore/history.hpp"
#include "semaphore/protocol.hpp"
#include "semaphore/record.hpp"
#include "semaphore/wire.hpp"

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

using namespace redsem;

namespace {

// The keys of an expect line that this reader checks, and those only the scripts read.
const std::set<std::string> k_reads = {"kind", "slots", "fence",  "wants", "since", "ttl",
                                       "host", "pid",   "pid_of", "user",  "label", "keeper"};
const std::set<std::string> k_read_by_lua = {"grace",    "once_per", "at_most_once",
                                             "attempts", "collects", "max_hold"};

// The keys and values of an "expect key=value ..." line of a fixture; fails the test on a
// word that is not key=value.
std::vector<std::pair<std::string, std::string>> expected(const std::string& line) {
    std::vector<std::pair<std::string, std::string>> pairs;
    std::istringstream words(line.substr(std::string("expect ").size()));
    std::string word;
    while (words >> word) {
        const std::size_t equals = word.find('=');
        REQUIRE(equals != std::string::npos);
        pairs.emplace_back(word.substr(0, equals), word.substr(equals + 1));
    }
    return pairs;
}

std::string joined(const std::vector<long long>& slots) {
    std::string text;
    for (const long long slot : slots) {
        text += (text.empty() ? "" : ",") + std::to_string(slot);
    }
    return text;
}

// What parse_record() makes of `raw`, as the fixture's keys name it.
std::map<std::string, std::string> read(const std::string& raw) {
    const std::optional<Record> record = parse_record(raw);
    if (!record) {
        return {{"kind", "malformed"}};
    }
    std::map<std::string, std::string> seen{{"since", std::to_string(record->since_ms)},
                                            {"ttl", std::to_string(record->ttl_ms)},
                                            {"host", record->meta.host},
                                            {"pid", std::to_string(record->meta.pid)},
                                            {"pid_of", record->meta.pid_of},
                                            {"user", record->meta.user},
                                            {"label", record->meta.label},
                                            {"keeper", record->meta.keeper ? "true" : "false"}};
    if (record->kind == Record::Kind::holder) {
        seen["kind"] = "h";
        seen["slots"] = joined(record->slots);
        seen["fence"] = std::to_string(record->fence);
    } else {
        seen["kind"] = "w";
        seen["wants"] = record->wants == 0 ? "x" : std::to_string(record->wants);
    }
    return seen;
}

} // namespace

TEST_CASE("every stored record of the fixture reads as it expects, this release's and 0.1.0's") {
    std::ifstream fixture(REDSEM_FIXTURES "/records.txt");
    REQUIRE(fixture);
    std::string line;
    std::string raw;
    int records = 0;
    while (std::getline(fixture, line)) {
        if (line.starts_with("record ")) {
            raw = line.substr(7);
            continue;
        }
        if (!line.starts_with("expect ")) {
            continue;
        }
        ++records;
        const auto seen = read(raw);
        for (const auto& [key, value] : expected(line)) {
            INFO(raw << "\n  key " << key);
            CHECK((k_reads.contains(key) || k_read_by_lua.contains(key)));
            if (k_reads.contains(key)) {
                CHECK(seen.at(key) == value);
            }
        }
    }
    CHECK(records >= 10);
}

namespace {

std::string number(const std::optional<long long>& value) {
    return value ? std::to_string(*value) : "-";
}

// What parse_event() makes of `kind` and `value`, as the fixture's keys name it.
std::map<std::string, std::string> read_event(const std::string& kind, const std::string& value) {
    const Event event = parse_event("e", "1796314802950-0", kind, value);
    return {{"raw", event.raw.empty() ? "false" : "true"},
            {"token", event.token},
            {"slots", event.slots.empty() ? "-" : joined(event.slots)},
            {"fence", number(event.fence)},
            {"duration", number(event.duration_ms)},
            {"label", event.meta ? event.meta->label : "-"},
            {"exit", number(event.exit_status)},
            {"signal", number(event.signal)},
            {"timed_out", number(event.timed_out_ms)},
            {"late", event.late.empty() ? "-" : event.late},
            {"skipped", event.skipped},
            {"by", std::to_string(event.skipped_for.size())},
            {"by_token", event.skipped_for.empty() ? "-" : event.skipped_for.front().token},
            {"until", number(event.kind == "skipped" && !event.skipped_for.empty()
                                 ? event.skipped_for.front().until_ms
                                 : event.until_ms)},
            {"from", number(event.limit_from)},
            {"to", number(event.limit_to)},
            {"cause", event.cause},
            {"lost_at", number(event.lost_at_ms)},
            {"opens_at", number(event.opens_at_ms)}};
}

} // namespace

TEST_CASE("every history event of the fixture reads as it expects, and each kind has one") {
    std::ifstream fixture(REDSEM_FIXTURES "/events.txt");
    REQUIRE(fixture);
    std::set<std::string> kinds;
    std::string line;
    std::string kind;
    std::string value;
    while (std::getline(fixture, line)) {
        if (line.starts_with("event ")) {
            const std::size_t space = line.find(' ', 6);
            REQUIRE(space != std::string::npos);
            kind = line.substr(6, space - 6);
            value = line.substr(space + 1);
            continue;
        }
        if (!line.starts_with("expect ")) {
            continue;
        }
        const auto seen = read_event(kind, value);
        if (seen.at("raw") == "false") {
            kinds.insert(kind);
        }
        for (const auto& [key, wanted] : expected(line)) {
            INFO(kind << " " << value << "\n  key " << key);
            REQUIRE(seen.contains(key));
            CHECK(seen.at(key) == wanted);
        }
        // Every example of a known shape is read, not kept as stored, unless it says so.
        if (line.find("raw=true") == std::string::npos) {
            INFO(kind << " " << value);
            CHECK(seen.at("raw") == "false");
        }
    }
    for (const std::string_view known : k_event_kinds) {
        INFO(known);
        CHECK(kinds.contains(std::string(known)));
    }
    CHECK(kinds.size() == std::size(k_event_kinds));
}

namespace {

// What wire.cpp decodes the payload of `list` to, as wakes.txt's keys name it.
std::map<std::string, std::string> read_wake(const std::string& list, const std::string& payload) {
    if (list == "grant") {
        const wire::HandOver grant = wire::decode_hand_over(payload);
        return {{"fence", std::to_string(grant.fence)},
                {"slot", std::to_string(grant.slot)},
                {"deadline", std::to_string(grant.deadline_ms)},
                {"limit", number(grant.limit)},
                {"slots", joined(grant.slots)}};
    }
    if (list == "left") {
        const std::optional<Skip> skip = wire::decode_left_note(payload);
        if (!skip) {
            return {{"released", "true"}};
        }
        return {{"released", "false"},
                {"skipped", skip->why},
                {"since", std::to_string(skip->since_ms)},
                {"until", std::to_string(skip->until_ms)},
                {"token", skip->token},
                {"host", skip->by.host}};
    }
    if (list == "nudge") {
        const std::optional<Milliseconds> due = wire::decode_nudge(payload);
        return {{"due", due ? std::to_string(due->count()) : "-"}};
    }
    REQUIRE(list == "toolarge");
    return {{"limit", std::to_string(wire::decode_too_large(payload))}};
}

} // namespace

TEST_CASE("every payload of a waiter's lists in the fixture decodes as it expects") {
    std::ifstream fixture(REDSEM_FIXTURES "/wakes.txt");
    REQUIRE(fixture);
    std::set<std::string> lists;
    std::string line;
    std::string list;
    std::string payload;
    while (std::getline(fixture, line)) {
        if (line.starts_with("wake ")) {
            const std::size_t space = line.find(' ', 5);
            REQUIRE(space != std::string::npos);
            list = line.substr(5, space - 5);
            payload = line.substr(space + 1);
            continue;
        }
        if (!line.starts_with("expect ")) {
            continue;
        }
        lists.insert(list);
        const auto seen = read_wake(list, payload);
        for (const auto& [key, wanted] : expected(line)) {
            INFO(list << " " << payload << "\n  key " << key);
            if (key == "now" || key == "written") {
                continue; // the grant's time is read by nobody; older: who writes it
            }
            REQUIRE(seen.contains(key));
            CHECK(seen.at(key) == wanted);
        }
    }
    CHECK(lists == std::set<std::string>{"grant", "left", "nudge", "toolarge"});
}

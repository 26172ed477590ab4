// The records of tests/fixtures/records.txt, the formats the scripts store (lua/lib/call.lua),
// as src/semaphore/record.cpp reads them: the same fixture that tests/lua/check_records.lua
// holds lua/lib/records.lua to, so that the two readers cannot drift apart.
#include <catch2/catch.hpp>

#include "semaphore/record.hpp"

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
const std::set<std::string> k_read_by_lua = {"grace", "once_per", "at_most_once", "attempts",
                                             "collects"};

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
        std::istringstream expected(line.substr(7));
        std::string pair;
        while (expected >> pair) {
            const std::size_t equals = pair.find('=');
            REQUIRE(equals != std::string::npos);
            const std::string key = pair.substr(0, equals);
            INFO(raw << "\n  key " << key);
            CHECK((k_reads.contains(key) || k_read_by_lua.contains(key)));
            if (k_reads.contains(key)) {
                CHECK(seen.at(key) == pair.substr(equals + 1));
            }
        }
    }
    CHECK(records >= 10);
}

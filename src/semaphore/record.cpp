#include "semaphore/record.hpp"

#include <charconv>
#include <nlohmann/json.hpp>
#include <vector>

namespace redsem {

namespace {

std::optional<long long> number(std::string_view text) {
    long long value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

} // namespace

std::optional<Record> parse_record(std::string_view raw) {
    std::vector<std::string_view> fields;
    std::size_t pos = 0;
    while (fields.size() < 5) {
        const std::size_t space = raw.find(' ', pos);
        if (space == std::string_view::npos) {
            return std::nullopt;
        }
        fields.push_back(raw.substr(pos, space - pos));
        pos = space + 1;
    }
    const std::string_view json = raw.substr(pos);

    Record record;
    if (fields[0] == "h") {
        auto slot = number(fields[1]);
        auto fence = number(fields[2]);
        if (!slot || !fence) {
            return std::nullopt;
        }
        record.slot = *slot;
        record.fence = *fence;
    } else if (fields[0] == "w") {
        record.kind = Record::Kind::waiter;
    } else {
        return std::nullopt;
    }
    auto since = number(fields[3]);
    auto ttl = number(fields[4]);
    if (!since || !ttl) {
        return std::nullopt;
    }
    record.since_ms = *since;
    record.ttl_ms = *ttl;

    const auto meta = nlohmann::json::parse(json, nullptr, false);
    if (meta.is_object()) {
        record.meta.host = meta.value("host", "");
        record.meta.pid = meta.value("pid", 0LL);
        record.meta.user = meta.value("user", "");
        record.meta.label = meta.value("label", "");
    }
    return record;
}

} // namespace redsem

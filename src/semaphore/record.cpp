#include "semaphore/record.hpp"

#include "util/number.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <vector>

namespace redsem {

namespace {

std::string string_field(const nlohmann::json& object, const char* name) {
    const auto field = object.find(name);
    return field != object.end() && field->is_string() ? field->get<std::string>() : std::string();
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
        auto slots = parse_slot_list(fields[1]);
        auto fence = parse_integer(fields[2]);
        if (!slots || !fence) {
            return std::nullopt;
        }
        record.slots = std::move(*slots);
        record.slot = record.slots.front();
        record.fence = *fence;
    } else if (fields[0] == "w") {
        record.kind = Record::Kind::waiter;
        if (fields[1] == "x") {
            record.wants = 0;
        } else if (fields[1] != "-") {
            record.wants = parse_integer(fields[1], 1, k_max_limit).value_or(1);
        }
    } else {
        return std::nullopt;
    }
    auto since = parse_integer(fields[3]);
    auto ttl = parse_integer(fields[4]);
    if (!since || !ttl) {
        return std::nullopt;
    }
    // Hand-edited numbers are kept within what time arithmetic can take without overflowing.
    record.since_ms = std::clamp(*since, 0LL, k_latest_time_ms);
    record.ttl_ms = std::clamp(*ttl, 0LL, k_latest_time_ms);
    record.meta = parse_meta(json);
    return record;
}

std::optional<std::vector<long long>> parse_slot_list(std::string_view text) {
    std::vector<long long> slots;
    std::size_t pos = 0;
    for (;;) {
        const std::size_t comma = text.find(',', pos);
        const auto slot = parse_integer(text.substr(pos, comma - pos), 0, k_max_limit - 1);
        if (!slot) {
            return std::nullopt;
        }
        slots.push_back(*slot);
        if (comma == std::string_view::npos) {
            return slots;
        }
        pos = comma + 1;
    }
}

std::vector<std::string_view> split_spaces(std::string_view text, std::size_t parts) {
    std::vector<std::string_view> out;
    std::size_t pos = 0;
    while (out.size() + 1 < parts) {
        const std::size_t space = text.find(' ', pos);
        if (space == std::string_view::npos) {
            break;
        }
        out.push_back(text.substr(pos, space - pos));
        pos = space + 1;
    }
    out.push_back(text.substr(pos));
    return out;
}

HolderMeta parse_meta(std::string_view json) {
    HolderMeta out;
    // The metadata may have been edited by hand: take each field only if it has its type.
    const auto meta = nlohmann::json::parse(json, nullptr, false);
    if (meta.is_object()) {
        out.host = string_field(meta, "host");
        out.user = string_field(meta, "user");
        out.label = string_field(meta, "label");
        out.pid_of = string_field(meta, "pid_of");
        if (const auto keeper = meta.find("keeper"); keeper != meta.end() && keeper->is_boolean()) {
            out.keeper = keeper->get<bool>();
        }
        if (const auto pid = meta.find("pid"); pid != meta.end() && pid->is_number_integer()) {
            out.pid = pid->get<long long>();
        }
        if (const auto attempt = meta.find("attempt");
            attempt != meta.end() && attempt->is_number_integer()) {
            out.attempt = attempt->get<long long>();
        }
        out.after = string_field(meta, "after");
        if (const auto status = meta.find("exit");
            status != meta.end() && status->is_number_integer()) {
            out.exit_status = status->get<long long>();
        }
        if (const auto ci = meta.find("ci"); ci != meta.end() && ci->is_object()) {
            out.ci = CiJob{.system = string_field(*ci, "system"),
                           .url = string_field(*ci, "url"),
                           .pipeline = string_field(*ci, "pipeline"),
                           .job = string_field(*ci, "job")};
        }
    }
    return out;
}

std::string label_cell(const HolderMeta& meta) {
    if (!meta.ci) {
        return meta.label;
    }
    const CiJob& ci = *meta.ci;
    std::string job = ci.url;
    if (job.empty()) {
        job = "(" + ci.system + (ci.pipeline.empty() ? "" : " " + ci.pipeline) +
              (ci.job.empty() ? "" : " " + ci.job) + ")";
    }
    return meta.label.empty() ? job : meta.label + " " + job;
}

} // namespace redsem

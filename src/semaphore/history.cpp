#include "semaphore/history.hpp"

#include "semaphore/keys.hpp"
#include "semaphore/protocol.hpp"
#include "semaphore/record.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>

namespace redsem {

namespace {

// Events read per XRANGE call: keeps every call short on a long history.
constexpr std::size_t k_page = 1000;

// A part of an event: '-' is "does not apply"; anything else must be a number.
bool number_part(std::string_view text, std::optional<long long>& out) {
    if (text == "-") {
        return true;
    }
    out = parse_integer(text);
    return out.has_value();
}

// The causes of a closed admission that lua/lib/epoch.lua writes.
bool known_cause(std::string_view cause) {
    return cause == "start" || cause == "change" || cause == "unproven" || cause == "evicted" ||
           cause == "declared";
}

// A skip's JSON (lua/lib/occurrence.lua's log_skip()): the caller's metadata, with "skipped"
// (why), "by" (the holders, or the claim, each with its token and since_ms) and, for a skip
// while admission was closed, "cause".
void read_skip(std::string_view text, Event& event) {
    const auto json = nlohmann::json::parse(text, nullptr, false);
    if (!json.is_object()) {
        return;
    }
    if (const auto why = json.find("skipped"); why != json.end() && why->is_string()) {
        event.skipped = why->get<std::string>();
    }
    if (const auto cause = json.find("cause"); cause != json.end() && cause->is_string()) {
        event.cause = cause->get<std::string>();
    }
    if (const auto lost = json.find("lost_at_ms");
        lost != json.end() && lost->is_number_integer()) {
        event.lost_at_ms = lost->get<long long>(); // "lost": a possible loss of data then
    }
    const auto by = json.find("by");
    if (by == json.end() || !by->is_array()) {
        return;
    }
    for (const auto& one : *by) {
        if (!one.is_object()) {
            continue;
        }
        SkippedFor whom;
        whom.meta = parse_meta(one.dump());
        if (const auto token = one.find("token"); token != one.end() && token->is_string()) {
            whom.token = token->get<std::string>();
        }
        if (const auto since = one.find("since_ms");
            since != one.end() && since->is_number_integer()) {
            whom.since_ms = since->get<long long>();
        }
        if (const auto until = one.find("until_ms");
            until != one.end() && until->is_number_integer()) {
            whom.until_ms = until->get<long long>();
        }
        event.skipped_for.push_back(std::move(whom));
    }
}

bool parse_value(std::string_view value, Event& event) {
    if (std::find(std::begin(k_event_kinds), std::end(k_event_kinds), event.kind) ==
        std::end(k_event_kinds)) {
        return false; // a kind this release does not know (a newer one's): kept as it is
    }
    if (event.kind == "limit") {
        const auto parts = split_spaces(value, 2);
        return parts.size() == 2 && number_part(parts[0], event.limit_from) &&
               number_part(parts[1], event.limit_to) && event.limit_to;
    }
    if (event.kind == "closed") {
        const auto parts = split_spaces(value, 3);
        if (parts.size() != 3 || !known_cause(parts[0])) {
            return false;
        }
        event.cause = parts[0];
        return number_part(parts[1], event.lost_at_ms) && event.lost_at_ms &&
               number_part(parts[2], event.opens_at_ms) && event.opens_at_ms;
    }
    if (event.kind == "paused" || event.kind == "resumed") {
        // "UNTIL_MS JSON" ('-': until resumed), "PAUSED_FOR_MS JSON" ('{}': it ran out).
        const auto parts = split_spaces(value, 2);
        std::optional<long long>& number =
            event.kind == "paused" ? event.until_ms : event.duration_ms;
        if (parts.size() != 2 || !number_part(parts[0], number) || parts[1].empty() ||
            parts[1][0] != '{') {
            return false;
        }
        if (parts[1] != "{}") {
            event.meta = parse_meta(parts[1]);
        }
        return event.kind == "paused" || event.duration_ms;
    }
    const auto parts = split_spaces(value, 5);
    if (parts.size() != 5 || parts[0].empty() || !number_part(parts[2], event.fence) ||
        !number_part(parts[3], event.duration_ms)) {
        return false;
    }
    if (parts[1] != "-") {
        // "3", or "0,3,4" for a grant of several (--slots K).
        auto slots = parse_slot_list(parts[1]);
        if (!slots) {
            return false;
        }
        event.slots = std::move(*slots);
        event.slot = event.slots.front();
    }
    event.token = parts[0];
    if (parts[4] != "{}") {
        event.meta = parse_meta(parts[4]);
    }
    if (event.kind == "released") {
        const auto json = nlohmann::json::parse(parts[4], nullptr, false);
        if (const auto status = json.is_object() ? json.find("exit") : json.end();
            status != json.end() && status->is_number_integer()) {
            event.exit_status = status->get<long long>();
        }
        if (const auto signal = json.is_object() ? json.find("signal") : json.end();
            signal != json.end() && signal->is_number_integer()) {
            event.signal = signal->get<long long>();
        }
        if (const auto ran = json.is_object() ? json.find("timed_out_ms") : json.end();
            ran != json.end() && ran->is_number_integer()) {
            event.timed_out_ms = ran->get<long long>();
        }
        if (const auto late = json.is_object() ? json.find("late") : json.end();
            late != json.end() && late->is_string()) {
            event.late = late->get<std::string>();
        }
    }
    if (event.kind == "skipped") {
        read_skip(parts[4], event);
    }
    return true;
}

// The sequence number of stream entry ID "MS-SEQ", which orders events of the same millisecond.
long long sequence(std::string_view id) {
    const std::size_t dash = id.find('-');
    return dash == std::string_view::npos ? 0 : parse_integer(id.substr(dash + 1)).value_or(0);
}

// The events of one stream entry (one script call), in the order they happened.
void add_events(std::string_view name, const Reply& entry, std::vector<Event>& events) {
    const std::string& id = entry.at(0).as_string();
    const auto& fields = entry.at(1).as_array();
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
        events.push_back(parse_event(name, id, fields[i].as_string(), fields[i + 1].as_string()));
    }
}

// Throws the Error for `error`, a reply to a command on the history streams `keys` (of the
// semaphores `names`): when a key holds something else than a stream, names that key.
[[noreturn]] void throw_history_error(Connection& connection, const std::string& error,
                                      const std::vector<std::string>& keys,
                                      const std::vector<std::string>& names) {
    if (error.starts_with("WRONGTYPE")) {
        for (std::size_t i = 0; i < keys.size(); ++i) {
            const std::string type =
                connection.call(Command{keys[i], {"TYPE", keys[i]}}).as_string();
            if (type != "stream" && type != "none") {
                throw ConflictError(fmt::format(
                    "key '{}' of semaphore '{}' holds a {}, not the stream redsem keeps its "
                    "history in; delete the key, or choose another --prefix",
                    printable(keys[i], 300), printable(names[i]), type));
            }
        }
    }
    throw_reply_error(error);
}

} // namespace

Event parse_event(std::string_view name, std::string_view id, std::string_view kind,
                  std::string_view value) {
    Event event;
    event.name = name;
    event.id = id;
    event.kind = kind;
    event.time_ms = parse_integer(id.substr(0, id.find('-'))).value_or(0);
    if (parse_value(value, event)) {
        return event;
    }
    Event raw;
    raw.name = std::move(event.name);
    raw.id = std::move(event.id);
    raw.kind = std::move(event.kind);
    raw.time_ms = event.time_ms;
    raw.raw = value;
    return raw;
}

std::vector<Event> read_history(Connection& connection, std::string_view prefix,
                                std::string_view name, long long from_ms, long long to_ms) {
    const std::string key = Keys::make(prefix, name).log;
    std::vector<Event> events;
    std::string start = std::to_string(from_ms);
    const std::string end = std::to_string(to_ms);
    for (;;) {
        const Reply page = connection.command(
            Command{key, {"XRANGE", key, start, end, "COUNT", std::to_string(k_page)}});
        if (page.is_error()) {
            throw_history_error(connection, page.text, {key}, {std::string(name)});
        }
        const auto& entries = page.as_array();
        for (const Reply& entry : entries) {
            add_events(name, entry, events);
        }
        if (entries.size() < k_page) {
            return events;
        }
        start = "(" + entries.back().at(0).as_string(); // exclusive: after the last one read
    }
}

namespace {

// Hands `visit` the events of `name`'s history newest first, read back from its newest entry
// (XREVRANGE, in pages) through `scan` entries at most (0: all of them), until `visit` returns
// false. Returns whether the whole history was read.
bool visit_newest_first(Connection& connection, std::string_view prefix, std::string_view name,
                        std::size_t scan, const std::function<bool(const Event&)>& visit) {
    const std::string key = Keys::make(prefix, name).log;
    std::string end = "+";
    for (std::size_t read = 0; scan == 0 || read < scan;) {
        const std::size_t page_size = scan == 0 ? k_page : std::min(k_page, scan - read);
        const Reply page = connection.command(
            Command{key, {"XREVRANGE", key, end, "-", "COUNT", std::to_string(page_size)}});
        if (page.is_error()) {
            throw_history_error(connection, page.text, {key}, {std::string(name)});
        }
        const auto& entries = page.as_array();
        for (const Reply& entry : entries) {
            std::vector<Event> events;
            add_events(name, entry, events);
            // An entry's events are in the order the call wrote them: the newest is last.
            for (auto event = events.rbegin(); event != events.rend(); ++event) {
                if (!visit(*event)) {
                    return false;
                }
            }
        }
        read += entries.size();
        if (entries.size() < page_size) {
            return true;
        }
        end = "(" + entries.back().at(0).as_string(); // exclusive: before the last one read
    }
    return false;
}

} // namespace

std::vector<Milliseconds> recent_holds(Connection& connection, std::string_view prefix,
                                       std::string_view name, std::size_t count, std::size_t scan,
                                       bool& whole) {
    std::vector<Milliseconds> holds;
    whole = visit_newest_first(connection, prefix, name, scan, [&](const Event& event) {
        if (event.kind == "released" && event.duration_ms) {
            holds.emplace_back(*event.duration_ms);
        }
        return holds.size() < count;
    });
    return holds;
}

RunHistory read_runs(Connection& connection, std::string_view prefix, std::string_view name) {
    RunHistory runs;
    visit_newest_first(connection, prefix, name, 0, [&](const Event& event) {
        if (event.kind != "released" || !event.exit_status) {
            return true;
        }
        if (!runs.last) {
            runs.last = event;
        }
        if (*event.exit_status == 0) {
            runs.last_success = event;
            return false;
        }
        return true;
    });
    return runs;
}

std::vector<Event> follow_history(Connection& connection, std::string_view prefix,
                                  const std::vector<std::string>& names,
                                  std::vector<std::string>& last_ids, Milliseconds block,
                                  int interrupt_fd) {
    std::vector<std::string> keys;
    std::vector<std::string> argv{"XREAD", "BLOCK", std::to_string(block.count()), "STREAMS"};
    for (const auto& name : names) {
        keys.push_back(Keys::make(prefix, name).log);
        argv.push_back(keys.back());
    }
    argv.insert(argv.end(), last_ids.begin(), last_ids.end());
    const Reply reply = connection.command(Command{keys.front(), argv}, block, interrupt_fd);
    if (reply.is_error()) {
        if (reply.text.starts_with("CROSSSLOT")) {
            throw UsageError("on a Redis Cluster, --follow takes one semaphore at a time (their "
                             "histories are on different hash slots)");
        }
        throw_history_error(connection, reply.text, keys, names);
    }
    std::vector<Event> events;
    if (reply.is_nil()) {
        return events;
    }
    for (const Reply& stream : reply.as_array()) {
        const auto at = std::find(keys.begin(), keys.end(), stream.at(0).as_string());
        if (at == keys.end()) {
            continue;
        }
        const auto index = static_cast<std::size_t>(at - keys.begin());
        for (const Reply& entry : stream.at(1).as_array()) {
            add_events(names[index], entry, events);
            last_ids[index] = entry.at(0).as_string();
        }
    }
    sort_by_time(events);
    return events;
}

std::vector<std::string> last_entry_ids(Connection& connection, std::string_view prefix,
                                        const std::vector<std::string>& names) {
    std::vector<Command> commands;
    for (const auto& name : names) {
        const std::string key = Keys::make(prefix, name).log;
        commands.emplace_back(key,
                              std::vector<std::string>{"XREVRANGE", key, "+", "-", "COUNT", "1"});
    }
    std::vector<std::string> ids;
    for (const Reply& reply : connection.pipeline(commands)) {
        if (reply.is_error()) {
            const std::size_t i = ids.size();
            throw_history_error(connection, reply.text, {commands[i].key}, {names[i]});
        }
        const auto& entries = reply.as_array();
        ids.push_back(entries.empty() ? "0-0" : entries.front().at(0).as_string());
    }
    return ids;
}

void sort_by_time(std::vector<Event>& events) {
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
        if (a.time_ms != b.time_ms) {
            return a.time_ms < b.time_ms;
        }
        if (a.name != b.name) {
            return a.name < b.name;
        }
        return sequence(a.id) < sequence(b.id);
    });
}

} // namespace redsem

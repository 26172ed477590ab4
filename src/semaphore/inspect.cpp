#include "semaphore/inspect.hpp"

#include "semaphore/keys.hpp"
#include "semaphore/record.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <map>
#include <set>

namespace redsem {

namespace {

// Entries read per call: keeps every call short on a semaphore with many holders.
constexpr long long k_page = 500;
// Semaphores read per pipelined round trip by list_semaphores().
constexpr std::size_t k_batch = 100;
constexpr std::string_view k_scan_count = "1000";
// Commands list_semaphores() sends per semaphore.
constexpr std::size_t k_summary_commands = 6;

// A number Redis itself keeps (TIME, a sorted set's score): anything else is an error.
long long to_number(const std::string& text) {
    if (const auto value = parse_integer(text)) {
        return *value;
    }
    throw InternalError(fmt::format("Redis sent '{}' where a whole number belongs (a key "
                                    "changed by hand?)",
                                    printable(text)));
}

// A score that is a time, as epoch milliseconds; one edited by hand (-inf, 1e300, a
// fraction) is clamped to what time arithmetic can take.
long long to_time_ms(const std::string& text) {
    if (const auto value = parse_integer(text)) {
        return std::clamp(*value, -k_latest_time_ms, k_latest_time_ms);
    }
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || std::isnan(value)) {
        return to_number(text); // says what is wrong
    }
    const auto limit = static_cast<double>(k_latest_time_ms);
    return static_cast<long long>(std::clamp(value, -limit, limit));
}

std::optional<long long> optional_number(const Reply& reply) {
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    if (reply.is_nil()) {
        return std::nullopt;
    }
    return parse_integer(reply.as_string()); // a field changed by hand reads as missing
}

// The state's field `format` when a newer redsem stored it (see k_state_format); else nullopt.
std::optional<long long> newer_format(const Reply& field) {
    const std::optional<long long> format = optional_number(field);
    return format && *format > k_state_format ? format : std::nullopt;
}

// The limit in the state's field `limit`: "3", or with the words that keep older redsem out
// ("3 paused", "3 weighted", "3 paused weighted": see lua/lib/state.lua).
std::optional<long long> stored_limit(const Reply& reply) {
    if (reply.is_nil() || reply.is_error()) {
        return optional_number(reply);
    }
    std::string_view text = reply.as_string();
    for (const std::string_view words : k_limit_suffixes) {
        if (text.ends_with(words)) {
            return parse_integer(text.substr(0, text.size() - words.size()));
        }
    }
    return optional_number(reply);
}

// The pause in force at server time `now`, from the state's fields paused, paused_since and
// paused_until (lua/lib/pause.lua); nullopt when none, or when its --for ran out.
std::optional<Pause> pause_in_force(const Reply& json, const Reply& since, const Reply& until,
                                    long long now) {
    if (json.is_nil() || json.is_error()) {
        return std::nullopt;
    }
    Pause pause{.by = parse_meta(json.as_string()),
                .since_ms = optional_number(since).value_or(0),
                .until_ms = optional_number(until).value_or(0)};
    if (pause.until_ms > 0 && pause.until_ms <= now) {
        return std::nullopt;
    }
    return pause;
}

const Reply& checked(const Reply& reply) {
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return reply;
}

std::optional<Record> record_of(const Reply& reply) {
    if (reply.type != Reply::Type::string) {
        return std::nullopt;
    }
    return parse_record(reply.text);
}

// The semaphores under `prefix` that have key `part` ("state": every one) on the server the
// connection's commands without a key go to.
void scan_node(Connection& connection, std::string_view prefix, std::string_view part,
               std::set<std::string>& names) {
    const std::string pattern = fmt::format("{}:{{*}}:{}", glob_escape(prefix), part);
    const std::string tail = fmt::format("}}:{}", part);
    const std::string head = std::string(prefix) + ":{";
    std::string cursor = "0";
    do {
        const Reply reply = connection.call(
            Command{"", {"SCAN", cursor, "MATCH", pattern, "COUNT", std::string(k_scan_count)}});
        cursor = reply.at(0).as_string();
        for (const Reply& key : reply.at(1).as_array()) {
            const std::string& text = key.as_string();
            const std::size_t close = text.rfind(tail);
            if (text.rfind(head, 0) == 0 && close != std::string::npos && close >= head.size() &&
                close + tail.size() == text.size()) {
                names.insert(text.substr(head.size(), close - head.size()));
            }
        }
    } while (cursor != "0");
}

// Summaries of `names`, read at server time `server_now_ms`, appended to `summaries`.
void summarize(Connection& connection, std::string_view prefix,
               const std::vector<std::string>& names, long long server_now_ms,
               std::vector<SemaphoreSummary>& summaries);

} // namespace

long long server_time_ms(Connection& connection, const std::string& key) {
    const Reply time = connection.call(Command{key, {"TIME"}});
    return to_number(time.at(0).as_string()) * 1000 + to_number(time.at(1).as_string()) / 1000;
}

namespace {
SemaphoreView read_view(Connection& connection, std::string_view prefix, std::string_view name);
} // namespace

SemaphoreView inspect(Connection& connection, std::string_view prefix, std::string_view name) {
    try {
        return read_view(connection, prefix, name);
    } catch (const Error& error) {
        if (std::string_view(error.what()).find("WRONGTYPE") == std::string_view::npos) {
            throw;
        }
        throw_foreign_key(connection, Keys::make(prefix, name), name,
                          "status cannot show it (delete the key, or choose another --prefix)");
    }
}

namespace {

SemaphoreView read_view(Connection& connection, std::string_view prefix, std::string_view name) {
    const Keys keys = Keys::make(prefix, name);
    SemaphoreView view;
    view.name = name;
    const auto head =
        connection.pipeline({Command{keys.state,
                                     {"HMGET", keys.state, "limit", "paused", "paused_since",
                                      "paused_until", "exclusive", "format"}},
                             Command{keys.holders, {"ZCARD", keys.holders}},
                             Command{keys.queue, {"ZCARD", keys.queue}}});
    // The clock its scripts read: its node's, on a Redis Cluster (which the reads above found
    // by their MOVED replies; TIME itself is never redirected).
    view.server_now_ms = server_time_ms(connection, keys.state);
    const Reply& state = checked(head[0]);
    if (const auto format = newer_format(state.at(5))) {
        throw ConflictError(fmt::format("semaphore '{}' was stored by a newer redsem (state format "
                                        "{}; this one reads up to {}): use that redsem for it",
                                        printable(name), *format, k_state_format));
    }
    view.limit = stored_limit(state.at(0));
    view.pause = pause_in_force(state.at(1), state.at(2), state.at(3), view.server_now_ms);
    if (!state.at(4).is_nil()) {
        view.exclusive = state.at(4).as_string();
    }
    const long long holders = checked(head[1]).as_integer();
    const long long waiters = checked(head[2]).as_integer();

    for (long long start = 0; start < holders; start += k_page) {
        const Reply page =
            connection.call(Command{keys.holders,
                                    {"ZRANGE", keys.holders, std::to_string(start),
                                     std::to_string(start + k_page - 1), "WITHSCORES"}});
        const auto& items = page.as_array();
        if (items.empty()) {
            break;
        }
        std::vector<std::string> hmget{"HMGET", keys.info};
        std::vector<std::string> claims{"ZMSCORE", keys.alive}; // hand-overs not collected yet
        for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
            hmget.push_back(items[i].as_string());
            claims.push_back(items[i].as_string());
        }
        const auto replies =
            connection.pipeline({Command{keys.info, hmget}, Command{keys.alive, claims}});
        const Reply& records = checked(replies[0]);
        const Reply& claim_until = checked(replies[1]);
        std::vector<Command> wake_lists; // of hand-overs whose claim window has passed
        std::vector<std::size_t> lapsed;
        for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
            HolderView holder;
            holder.token = items[i].as_string();
            holder.deadline_ms = to_time_ms(items[i + 1].as_string());
            // Dead when the lease ran out, or when a hand-over was not collected in time.
            const auto claim = optional_number(claim_until.at(i / 2));
            holder.expired = holder.deadline_ms <= view.server_now_ms;
            if (!holder.expired && claim && *claim <= view.server_now_ms) {
                const std::string wake_list = keys.wake(holder.token);
                wake_lists.push_back(Command{wake_list, {"EXISTS", wake_list}});
                lapsed.push_back(view.holders.size());
            }
            holder.record = record_of(records.at(i / 2));
            view.holders.push_back(std::move(holder));
        }
        if (!wake_lists.empty()) {
            // The waiter popped its grant (BLPOP) and holds the slot; the claim entry stays
            // until the scripts' next prune. Uncollected only while the grant is still there.
            const auto exists = connection.pipeline(wake_lists);
            for (std::size_t k = 0; k < lapsed.size(); ++k) {
                view.holders[lapsed[k]].expired = checked(exists[k]).as_integer() == 1;
            }
        }
    }
    std::stable_sort(view.holders.begin(), view.holders.end(), [](const auto& a, const auto& b) {
        const long long slot_a = a.record ? a.record->slot : 1LL << 62;
        const long long slot_b = b.record ? b.record->slot : 1LL << 62;
        return slot_a < slot_b;
    });

    for (long long start = 0; start < waiters; start += k_page) {
        const Reply page = connection.call(Command{
            keys.queue,
            {"ZRANGE", keys.queue, std::to_string(start), std::to_string(start + k_page - 1)}});
        const auto& tokens = page.as_array();
        if (tokens.empty()) {
            break;
        }
        std::vector<std::string> hmget{"HMGET", keys.info};
        std::vector<std::string> liveness{"ZMSCORE", keys.alive};
        for (const Reply& token : tokens) {
            hmget.push_back(token.as_string());
            liveness.push_back(token.as_string());
        }
        const auto replies =
            connection.pipeline({Command{keys.info, hmget}, Command{keys.alive, liveness}});
        const Reply& records = checked(replies[0]);
        const Reply& alive_until = checked(replies[1]);
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            if (tokens[i].as_string() == k_pause_mark) {
                continue;
            }
            const auto until = optional_number(alive_until.at(i));
            view.waiters.push_back(
                WaiterView{tokens[i].as_string(), static_cast<long long>(view.waiters.size()) + 1,
                           record_of(records.at(i)), !until || *until <= view.server_now_ms});
        }
    }
    view.admission = Semaphore(connection, prefix, name).admission();
    return view;
}

} // namespace

namespace {

// Calls `visit` on every primary (see Connection::for_each_primary()); on a Redis Cluster,
// with `unlisted`, a primary that cannot be reached is noted there and `undo` called, instead
// of failing the whole listing. A refusal (a password, NOPERM) still fails it: it would be the
// same on every node.
template <typename Visit, typename Undo>
void visit_reachable(Connection& connection, std::vector<UnlistedNode>* unlisted, Visit visit,
                     Undo undo) {
    connection.for_each_primary([&](const Endpoint* node) {
        if (node == nullptr || unlisted == nullptr) {
            visit();
            return;
        }
        try {
            visit();
        } catch (const Error& error) {
            if (error.exit_code() != static_cast<int>(ExitCode::unavailable)) {
                throw;
            }
            undo();
            unlisted->push_back(UnlistedNode{.node = node->describe(), .why = error.what()});
        }
    });
}

} // namespace

std::vector<std::string> scan_names(Connection& connection, std::string_view prefix,
                                    std::string_view part, std::vector<UnlistedNode>* unlisted) {
    std::set<std::string> names; // SCAN may return a key more than once
    visit_reachable(
        connection, unlisted, [&] { scan_node(connection, prefix, part, names); }, [] {});
    return {names.begin(), names.end()};
}

std::vector<std::string> tokens_starting_with(Connection& connection, std::string_view prefix,
                                              std::string_view name, std::string_view start) {
    const Keys keys = Keys::make(prefix, name);
    const std::string pattern = glob_escape(start) + "*";
    std::set<std::string> tokens; // HSCAN may return a field more than once
    std::string cursor = "0";
    do {
        const Reply reply = connection.call(Command{
            keys.info,
            {"HSCAN", keys.info, cursor, "MATCH", pattern, "COUNT", std::string(k_scan_count)}});
        cursor = reply.at(0).as_string();
        const auto& items = reply.at(1).as_array();
        for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
            tokens.insert(items[i].as_string());
        }
    } while (cursor != "0");
    return {tokens.begin(), tokens.end()};
}

SemaphoreSummary summarize(Connection& connection, std::string_view prefix, std::string_view name,
                           bool with_admission) {
    const Keys keys = Keys::make(prefix, name);
    const long long now = server_time_ms(connection, keys.state);
    std::vector<SemaphoreSummary> summaries;
    summarize(connection, prefix, {std::string(name)}, now, summaries);
    if (with_admission && summaries.front().unreadable.empty()) {
        summaries.front().admission = Semaphore(connection, prefix, name).admission();
    }
    return std::move(summaries.front());
}

std::vector<SemaphoreSummary> list_semaphores(Connection& connection, std::string_view prefix,
                                              bool with_admission,
                                              std::vector<UnlistedNode>* unlisted) {
    std::vector<SemaphoreSummary> summaries;
    std::size_t first = 0; // the first summary of the node being read
    auto visit = [&] {
        std::set<std::string> found; // SCAN may return a key more than once
        first = summaries.size();
        scan_node(connection, prefix, "state", found);
        // One clock per server: the one its semaphores' scripts read.
        const long long now = server_time_ms(connection, "");
        summarize(connection, prefix, {found.begin(), found.end()}, now, summaries);
        // (One script call each: on a Redis Cluster every semaphore has its own epoch.)
        for (std::size_t i = first; with_admission && i < summaries.size(); ++i) {
            if (!summaries[i].unreadable.empty()) {
                continue;
            }
            summaries[i].admission = Semaphore(connection, prefix, summaries[i].name).admission();
        }
    };
    // A node lost half-way is not listed in part.
    visit_reachable(connection, unlisted, visit, [&] { summaries.resize(first); });
    std::sort(summaries.begin(), summaries.end(),
              [](const SemaphoreSummary& a, const SemaphoreSummary& b) { return a.name < b.name; });
    return summaries;
}

namespace {

void summarize(Connection& connection, std::string_view prefix,
               const std::vector<std::string>& names, long long server_now_ms,
               std::vector<SemaphoreSummary>& summaries) {
    const std::string now = std::to_string(server_now_ms);
    for (std::size_t first = 0; first < names.size(); first += k_batch) {
        const std::size_t last = std::min(names.size(), first + k_batch);
        std::vector<Command> commands;
        for (std::size_t i = first; i < last; ++i) {
            const Keys keys = Keys::make(prefix, names[i]);
            commands.emplace_back(keys.state,
                                  std::vector<std::string>{"HMGET", keys.state, "limit", "history",
                                                           "acquired_total", "expired_total",
                                                           "lost_total", "paused", "paused_since",
                                                           "paused_until", "exclusive", "format"});
            commands.emplace_back(keys.holders, std::vector<std::string>{"ZCARD", keys.holders});
            commands.emplace_back(keys.queue, std::vector<std::string>{"ZCARD", keys.queue});
            commands.emplace_back(keys.info, std::vector<std::string>{"HGETALL", keys.info});
            // Expired leases, and lapsed liveness: waiters that stopped refreshing, and
            // hand-overs nobody collected.
            commands.emplace_back(keys.holders, std::vector<std::string>{"ZRANGE", keys.holders,
                                                                         "-inf", now, "BYSCORE"});
            commands.emplace_back(
                keys.alive, std::vector<std::string>{"ZRANGE", keys.alive, "-inf", now, "BYSCORE"});
        }
        const std::vector<Reply> replies = connection.pipeline(commands);
        // A key of another type at one of a semaphore's names: that semaphore is set aside,
        // naming the key and what it holds, and the others are read.
        std::map<std::size_t, std::string> foreign; // semaphore index -> its foreign key
        for (std::size_t i = first; i < last; ++i) {
            const std::size_t at = (i - first) * k_summary_commands;
            for (std::size_t k = 0; k < k_summary_commands; ++k) {
                if (is_error_code(replies[at + k], "WRONGTYPE")) {
                    foreign.emplace(i, commands[at + k].argv[1]);
                    break;
                }
                checked(replies[at + k]);
            }
        }
        std::vector<Command> types;
        for (const auto& [i, key] : foreign) {
            types.emplace_back(key, std::vector<std::string>{"TYPE", key});
        }
        const std::vector<Reply> foreign_types =
            types.empty() ? std::vector<Reply>{} : connection.pipeline(types);
        // Holders whose hand-over claim lapsed: uncollected only while the grant is still in
        // the wake list (as the scripts judge it; see settle_lapsed() in lua/lib/expiry.lua).
        std::vector<Command> wake_lists;
        std::vector<std::pair<std::size_t, std::string>> claimed;
        for (std::size_t i = first; i < last; ++i) {
            const std::size_t at = (i - first) * k_summary_commands;
            if (foreign.contains(i)) {
                continue;
            }
            const auto& lapsed = checked(replies[at + 5]).as_array();
            if (lapsed.empty()) {
                continue;
            }
            std::set<std::string> holders; // lapsed waiters need no look
            const auto& info = checked(replies[at + 3]).as_array();
            for (std::size_t k = 0; k + 1 < info.size(); k += 2) {
                const auto record = record_of(info[k + 1]);
                if (record && record->kind == Record::Kind::holder) {
                    holders.insert(info[k].as_string());
                }
            }
            for (const Reply& token : lapsed) {
                if (!holders.contains(token.as_string())) {
                    continue;
                }
                const std::string wake_list = Keys::make(prefix, names[i]).wake(token.as_string());
                wake_lists.emplace_back(wake_list, std::vector<std::string>{"EXISTS", wake_list});
                claimed.emplace_back(i, token.as_string());
            }
        }
        std::set<std::pair<std::size_t, std::string>> collected;
        if (!wake_lists.empty()) {
            const std::vector<Reply> exists = connection.pipeline(wake_lists);
            for (std::size_t k = 0; k < claimed.size(); ++k) {
                if (checked(exists[k]).as_integer() == 0) {
                    collected.insert(claimed[k]);
                }
            }
        }
        for (std::size_t i = first; i < last; ++i) {
            const std::size_t at = (i - first) * k_summary_commands;
            SemaphoreSummary summary;
            summary.name = names[i];
            summary.server_now_ms = server_now_ms;
            if (const auto found = foreign.find(i); found != foreign.end()) {
                const std::size_t index =
                    static_cast<std::size_t>(std::distance(foreign.begin(), found));
                const Reply& type = foreign_types[index];
                summary.unreadable = fmt::format("key '{}' holds a {}, not what redsem keeps there",
                                                 printable(found->second, 120),
                                                 type.is_error() ? "value of an unknown type"
                                                                 : printable(type.text, 20));
                summaries.push_back(std::move(summary));
                continue;
            }
            const auto& state = checked(replies[at]);
            if (const auto format = newer_format(state.at(9))) {
                summary.unreadable = fmt::format(
                    "stored by a newer redsem (state format {}; this one reads up to {})", *format,
                    k_state_format);
                summaries.push_back(std::move(summary));
                continue;
            }
            summary.limit = stored_limit(state.at(0));
            summary.pause = pause_in_force(state.at(5), state.at(6), state.at(7), server_now_ms);
            summary.history = optional_number(state.at(1)).value_or(k_default_history);
            if (summary.limit && summary.history > 0) {
                summary.counters =
                    HistoryCounters{.acquired = optional_number(state.at(2)).value_or(0),
                                    .expired = optional_number(state.at(3)).value_or(0),
                                    .lost = optional_number(state.at(4)).value_or(0)};
            }
            const long long holders = checked(replies[at + 1]).as_integer();
            // The pause's mark is nobody (while the state names a pause, the queue holds it).
            const long long queued = std::max(0LL, checked(replies[at + 2]).as_integer() -
                                                       (state.at(5).is_nil() ? 0 : 1));
            const auto& info = checked(replies[at + 3]).as_array();
            std::set<std::string> dead_holders;
            for (const Reply& token : checked(replies[at + 4]).as_array()) {
                dead_holders.insert(token.as_string());
            }
            std::set<std::string> lapsed;
            for (const Reply& token : checked(replies[at + 5]).as_array()) {
                lapsed.insert(token.as_string());
            }
            // Each holder's slots beyond its first: one of --slots K counts K.
            std::map<std::string, long long> extra_slots;
            const std::string exclusive = state.at(8).is_nil() ? "" : state.at(8).as_string();
            bool exclusive_holder = false;
            for (std::size_t k = 0; k + 1 < info.size(); k += 2) {
                const std::string& token = info[k].as_string();
                auto record = record_of(info[k + 1]);
                const bool holder = record && record->kind == Record::Kind::holder;
                exclusive_holder = exclusive_holder || (holder && token == exclusive);
                if (holder && record->slots.size() > 1) {
                    extra_slots[token] = static_cast<long long>(record->slots.size()) - 1;
                }
                if (lapsed.contains(token)) {
                    if (holder) {
                        if (!collected.contains({i, token})) {
                            dead_holders.insert(token); // a hand-over nobody collected
                        }
                    } else {
                        ++summary.stale;
                    }
                } else if (record && !holder &&
                           (!summary.oldest_wait_since_ms ||
                            record->since_ms < *summary.oldest_wait_since_ms)) {
                    summary.oldest_wait_since_ms = record->since_ms;
                }
                if (holder && !dead_holders.contains(token) &&
                    (!summary.oldest || record->since_ms < summary.oldest->since_ms)) {
                    summary.oldest = std::move(record);
                }
            }
            summary.expired = std::min<long long>(holders, dead_holders.size());
            summary.holders = holders - summary.expired;
            summary.held = summary.holders;
            for (const auto& [token, extra] : extra_slots) {
                if (!dead_holders.contains(token)) {
                    summary.held += extra;
                }
            }
            // A live --exclusive holder uses every slot, also those a raised limit added.
            if (exclusive_holder && summary.limit && !dead_holders.contains(exclusive)) {
                summary.held = std::max(summary.held, *summary.limit);
            }
            summary.stale = std::min(queued, summary.stale);
            summary.waiting = queued - summary.stale;
            summaries.push_back(std::move(summary));
        }
    }
}

} // namespace

} // namespace redsem

#include "semaphore/inspect.hpp"

#include "lua_scripts.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/wire.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace redsem {

namespace {

// Entries read per call: keeps every call short on a semaphore with many holders.
constexpr long long k_page = 500;
// Semaphores read per pipelined round trip by list_semaphores().
constexpr std::size_t k_batch = 100;
constexpr std::string_view k_scan_count = "1000";

// A number Redis itself keeps (TIME): anything else is an error.
long long to_number(const std::string& text) {
    if (const auto value = parse_integer(text)) {
        return *value;
    }
    throw InternalError(fmt::format("Redis sent '{}' where a whole number belongs (a key "
                                    "changed by hand?)",
                                    printable(text)));
}

ScriptCall view_call(const Keys& keys, const wire::ViewRead& read) {
    return ScriptCall{scripts::k_view_script, keys.script_keys(),
                      keys.script_args(wire::view_args(read)), keys.cluster_script_keys()};
}

// Why semaphore `keys` cannot be read, from its view's `reply` ("": it can): a key of another
// type at one of its names (which key, and what it holds), or a state a newer redsem stored.
std::string unreadable(Connection& connection, const Keys& keys, const Reply& reply) {
    std::optional<wire::WrongType> wrong = wire::wrong_type(reply);
    if (!wrong && reply.is_error() && is_error_code(reply, "WRONGTYPE")) {
        wrong = find_foreign_key(connection, keys);
        if (!wrong) {
            return "a key held the wrong kind of value";
        }
    }
    if (wrong) {
        return fmt::format("key '{}' holds a {}, not what redsem keeps there",
                           printable(wrong->key, 120), printable(wrong->found, 20));
    }
    if (const std::optional<long long> format = wire::newer_format(reply)) {
        return fmt::format("stored by a newer redsem (state format {}; this one reads up to {})",
                           *format, k_state_format);
    }
    if (reply.is_error()) {
        throw_script_error(scripts::k_view_script, reply.text);
    }
    return "";
}

// What a summary reads.
wire::ViewRead summary_read(AdmissionRead admission) {
    return {.counts = true, .oldest = true, .admission = admission != AdmissionRead::none};
}

HolderView holder_view(wire::ViewEntry entry) {
    return HolderView{.token = std::move(entry.token),
                      .record = std::move(entry.record),
                      .deadline_ms = entry.deadline_ms,
                      .expired = entry.dead};
}

WaiterView waiter_view(wire::ViewEntry entry) {
    return WaiterView{.token = std::move(entry.token),
                      .position = entry.position,
                      .record = std::move(entry.record),
                      .stale = entry.dead};
}

// The summary of semaphore `name` from its view (summary_read()); admission as the view
// read it, or, where it could not judge it (no INFO), as `admission` says (AdmissionRead).
SemaphoreSummary summary_of(Connection& connection, std::string_view prefix,
                            const std::string& name, wire::View view, AdmissionRead admission) {
    SemaphoreSummary summary{.name = name,
                             .limit = view.limit,
                             .held = view.held,
                             .holders = view.holders,
                             .expired = view.expired,
                             .waiting = view.waiting,
                             .stale = view.stale,
                             .history = view.history,
                             .server_now_ms = view.server_now_ms,
                             .pause = std::move(view.pause),
                             .claim = std::move(view.claim)};
    if (view.oldest) {
        summary.oldest = std::move(view.oldest->record);
    }
    summary.oldest_wait_since_ms = view.oldest_wait_since_ms;
    if (summary.limit && summary.history > 0) {
        summary.counters = HistoryCounters{.acquired = view.acquired_total,
                                           .expired = view.expired_total,
                                           .lost = view.lost_total};
    }
    if (view.admission) {
        summary.admission = *view.admission;
    } else if (admission == AdmissionRead::proven) {
        summary.admission = Semaphore(connection, prefix, name).admission();
    } else if (admission == AdmissionRead::recorded) {
        AdmissionState unknown;
        unknown.known = false;
        summary.admission = view.recorded_admission.value_or(unknown);
    }
    return summary;
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

} // namespace

long long server_time_ms(Connection& connection, const std::string& key) {
    const Reply time = connection.call(Command{key, {"TIME"}});
    return to_number(time.at(0).as_string()) * 1000 + to_number(time.at(1).as_string()) / 1000;
}

SemaphoreView inspect(Connection& connection, std::string_view prefix, std::string_view name) {
    const Keys keys = Keys::make(prefix, name);
    SemaphoreView view{.name = std::string(name)};
    for (long long first = 0;; first += k_page) {
        const wire::ViewRead read{.counts = first == 0,
                                  .admission = first == 0,
                                  .first_holder = first,
                                  .first_waiter = first,
                                  .page = k_page};
        Reply reply = std::move(connection.eval_pipeline({view_call(keys, read)}).front());
        if (reply.is_error() && is_error_code(reply, "WRONGTYPE")) {
            throw_foreign_key(connection, keys, name,
                              "status cannot show it (delete the key, or choose another --prefix)");
        }
        if (reply.is_error()) {
            throw_script_error(scripts::k_view_script, reply.text);
        }
        check_readable(reply, name,
                       "status cannot show it (delete the key, or choose another --prefix)");
        wire::View page = wire::decode_view(reply);
        if (first == 0) {
            view.limit = page.limit;
            view.server_now_ms = page.server_now_ms;
            view.exclusive = page.exclusive;
            view.pause = page.pause;
            view.claim = page.claim;
            view.held = page.held;
            view.expired = page.expired;
            view.waiting = page.waiting;
            view.stale = page.stale;
            view.admission =
                page.admission ? *page.admission : Semaphore(connection, prefix, name).admission();
        }
        const bool more = static_cast<long long>(page.holder_entries.size()) == k_page ||
                          static_cast<long long>(page.waiter_entries.size()) == k_page;
        for (wire::ViewEntry& entry : page.holder_entries) {
            view.holders.push_back(holder_view(std::move(entry)));
        }
        for (wire::ViewEntry& entry : page.waiter_entries) {
            view.waiters.push_back(waiter_view(std::move(entry)));
        }
        if (!more) {
            return view;
        }
    }
}

namespace {

// Calls `visit` on every primary (see Connection::for_each_primary()); on a Redis Cluster,
// with `unlisted`, a primary that cannot be reached is noted there and `undo` called, instead
// of failing the whole listing. A refusal (a password, NOPERM) still fails it: it would be the
// same on every node.
// `visit` is given the primary (null: the one server).
template <typename Visit, typename Undo>
void visit_reachable(Connection& connection, std::vector<UnlistedNode>* unlisted, Visit visit,
                     Undo undo) {
    connection.for_each_primary([&](const Endpoint* node) {
        if (node == nullptr || unlisted == nullptr) {
            visit(node);
            return;
        }
        try {
            visit(node);
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
        connection, unlisted, [&](const Endpoint*) { scan_node(connection, prefix, part, names); },
        [] {});
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
                           AdmissionRead admission) {
    const Keys keys = Keys::make(prefix, name);
    const Reply reply =
        std::move(connection.eval_pipeline({view_call(keys, summary_read(admission))}).front());
    const std::string why = unreadable(connection, keys, reply);
    if (!why.empty()) {
        return SemaphoreSummary{.name = std::string(name), .unreadable = why};
    }
    return summary_of(connection, prefix, std::string(name), wire::decode_view(reply), admission);
}

std::vector<SemaphoreSummary> list_semaphores(Connection& connection, std::string_view prefix,
                                              AdmissionRead admission,
                                              std::vector<UnlistedNode>* unlisted) {
    std::vector<SemaphoreSummary> summaries;
    std::size_t first = 0; // the first summary of the node being read
    auto visit = [&](const Endpoint* node) {
        std::set<std::string> found; // SCAN may return a key more than once
        first = summaries.size();
        scan_node(connection, prefix, "state", found);
        const std::vector<std::string> names(found.begin(), found.end());
        // On one server, one epoch key judges admission for every semaphore (on a Redis
        // Cluster each has its own): it is judged once, with the first readable semaphore's
        // view, read alone, and the others' views read none.
        const bool one_epoch = node == nullptr && admission != AdmissionRead::none;
        std::optional<AdmissionState> judged;
        for (std::size_t batch = 0; batch < names.size();) {
            const bool judging = one_epoch && !judged;
            const AdmissionRead reads = judged ? AdmissionRead::none : admission;
            const std::size_t end = judging ? batch + 1 : std::min(names.size(), batch + k_batch);
            std::vector<ScriptCall> calls;
            for (std::size_t i = batch; i < end; ++i) {
                calls.push_back(view_call(Keys::make(prefix, names[i]), summary_read(reads)));
            }
            const std::vector<Reply> replies = connection.eval_pipeline(calls);
            for (std::size_t i = batch; i < end; ++i) {
                const Reply& reply = replies[i - batch];
                const std::string why = unreadable(connection, Keys::make(prefix, names[i]), reply);
                if (!why.empty()) {
                    summaries.push_back(SemaphoreSummary{.name = names[i], .unreadable = why});
                    continue;
                }
                SemaphoreSummary summary =
                    summary_of(connection, prefix, names[i], wire::decode_view(reply), reads);
                if (judging) {
                    judged = summary.admission;
                } else if (judged) {
                    summary.admission = *judged;
                    summary.admission.server_now_ms = summary.server_now_ms;
                }
                summaries.push_back(std::move(summary));
            }
            batch = end;
        }
    };
    // A node lost half-way is not listed in part.
    visit_reachable(connection, unlisted, visit, [&] { summaries.resize(first); });
    std::sort(summaries.begin(), summaries.end(),
              [](const SemaphoreSummary& a, const SemaphoreSummary& b) { return a.name < b.name; });
    return summaries;
}

} // namespace redsem

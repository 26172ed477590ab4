#include "doctor/checks.hpp"

#include "semaphore/inspect.hpp"
#include "semaphore/protocol.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <set>

namespace redsem::doctor {

namespace {

// How many keys one SCAN step asks for, and how many TYPE calls share a round trip.
constexpr const char* k_scan_count = "1000";

// A key under the prefix that is not what redsem keeps at that name.
struct ForeignKey {
    std::string key;
    std::string type;
    std::string wanted; // "" when redsem never uses such a name
};

// What the scan found on every primary.
struct Scanned {
    std::set<std::string> names;   // semaphores with a state hash and no foreign key
    std::set<std::string> tainted; // semaphores with a foreign key
    std::vector<ForeignKey> foreign;
    std::vector<std::string> unreadable; // keys this user's ACL does not let it read
    std::string epoch_type;              // what the shared epoch key holds when it is not a hash
    bool epoch_foreign = false;          // the shared epoch key is not a hash
    bool epoch_seen = false;             // the shared epoch key is there
    long long keys = 0;
};

// The type redsem keeps at `key` (under `prefix`), or "" for a name redsem never uses. Sets
// `name` to the semaphore it belongs to, if any. Keys: lua/lib/call.lua.
std::string wanted_type(const std::string& key, std::string_view prefix, std::string& name) {
    name.clear();
    const std::string head = std::string(prefix) + ":";
    if (key == head + "epoch") {
        return "hash";
    }
    if (key.rfind(head + "{", 0) != 0) {
        return "";
    }
    const std::size_t close = key.find("}:", head.size() + 1);
    if (close == std::string::npos) {
        return "";
    }
    name = key.substr(head.size() + 1, close - head.size() - 1);
    const std::string part = key.substr(close + 2);
    static const std::map<std::string, std::string, std::less<>> types{
        {"state", "hash"}, {"holders", "zset"}, {"info", "hash"},  {"queue", "zset"},
        {"alive", "zset"}, {"slots", "string"}, {"epoch", "hash"}, {"log", "stream"}};
    if (const auto found = types.find(part); found != types.end()) {
        return found->second;
    }
    return part.starts_with(k_wake_part) ? "list" : "";
}

// Scans the server that commands without a key go to; adds what it finds to `scanned`.
void scan_node(Connection& connection, std::string_view prefix, Scanned& scanned) {
    const std::string pattern = glob_escape(prefix) + ":*";
    std::set<std::string> states;
    std::string cursor = "0";
    do {
        const Reply reply =
            connection.call(Command{"", {"SCAN", cursor, "MATCH", pattern, "COUNT", k_scan_count}});
        cursor = reply.at(0).as_string();
        std::vector<Command> types;
        for (const Reply& key : reply.at(1).as_array()) {
            types.emplace_back(key.as_string(), std::vector<std::string>{"TYPE", key.as_string()});
        }
        if (types.empty()) {
            continue;
        }
        const std::vector<Reply> found = connection.pipeline(types);
        for (std::size_t i = 0; i < types.size(); ++i) {
            const std::string& key = types[i].argv[1];
            if (is_error_code(found[i], "NOPERM")) {
                scanned.unreadable.push_back(key);
                continue;
            }
            if (found[i].is_error()) {
                throw_reply_error(found[i].text);
            }
            const std::string& type = found[i].as_string();
            if (type == "none") {
                continue; // expired since the SCAN
            }
            ++scanned.keys;
            std::string name;
            const std::string wanted = wanted_type(key, prefix, name);
            const bool semaphore_key = key.rfind(std::string(prefix) + ":{", 0) == 0;
            const bool bad_name = semaphore_key && name_problem(name);
            if (!semaphore_key && !wanted.empty() && wanted != type) {
                // The epoch key that every semaphore of the prefix shares: judged on its own.
                scanned.epoch_foreign = true;
                scanned.epoch_type = type;
            } else if (wanted != type || bad_name) {
                scanned.foreign.push_back({key, type, bad_name ? "" : wanted});
                if (semaphore_key) {
                    scanned.tainted.insert(name);
                }
            } else if (key.ends_with("}:state")) {
                states.insert(name);
            } else if (!semaphore_key) {
                scanned.epoch_seen = true;
            }
        }
    } while (cursor != "0");
    for (const std::string& name : states) {
        if (!scanned.tainted.contains(name)) {
            scanned.names.insert(name);
        }
    }
}

std::string plural(std::size_t count, std::string_view one, std::string_view many) {
    return fmt::format("{} {}", count, count == 1 ? one : many);
}

} // namespace

Finding check_own_keys(Connection& connection, const std::string& prefix, bool shared_epoch,
                       std::optional<long long> uptime_s) {
    Finding finding("keys");
    Scanned scanned;
    connection.for_each_primary([&] { scan_node(connection, prefix, scanned); });
    // Admission is read by a script that needs the epoch key; without INFO it could only be
    // proven by writing (and removing) a proof, which doctor must not: then it is read as a
    // call that could tell recorded it.
    const AdmissionRead admission =
        scanned.epoch_foreign ? AdmissionRead::none : AdmissionRead::recorded;
    std::vector<SemaphoreSummary> summaries;
    if (scanned.foreign.empty() && scanned.unreadable.empty()) {
        summaries = list_semaphores(connection, prefix, admission);
    } else {
        for (const std::string& name : scanned.names) {
            summaries.push_back(summarize(connection, prefix, name, admission));
        }
    }
    const std::set<std::string>& names = scanned.names;
    const std::vector<ForeignKey>& foreign = scanned.foreign;
    const long long keys = scanned.keys;
    std::vector<std::string> abandoned;
    std::vector<std::string> fixes;
    long long closed = 0;
    long long opens_in_ms = 0;
    for (const SemaphoreSummary& summary : summaries) {
        if (summary.held == 0 && summary.waiting == 0 && summary.expired + summary.stale > 0) {
            abandoned.push_back(summary.name);
        }
        if (summary.admission.closed()) {
            ++closed;
            opens_in_ms = std::max(opens_in_ms,
                                   summary.admission.opens_at_ms - summary.admission.server_now_ms);
        }
    }

    std::vector<std::string> notes{
        fmt::format("{} under '{}:' ({})",
                    plural(names.size() + scanned.tainted.size(), "semaphore", "semaphores"),
                    terminal_safe(prefix), plural(static_cast<std::size_t>(keys), "key", "keys"))};
    if (shared_epoch && !scanned.epoch_seen && !scanned.epoch_foreign) {
        // A brand-new Redis cannot be told from one that lost its data.
        std::string wait = "without INFO, the first call that may admit closes admission for "
                           "the loss grace (60s)";
        if (uptime_s) {
            const long long left_ms = k_default_loss_grace.count() - *uptime_s * 1000;
            wait = left_ms <= 0 ? "the first acquire records one"
                                : fmt::format("the first admissions wait until the server has "
                                              "been up for the loss grace ({} more)",
                                              format_duration(Milliseconds{left_ms}));
        }
        notes.push_back(fmt::format("no '{}:epoch' yet (redsem has admitted nobody under this "
                                    "prefix here): {}",
                                    terminal_safe(prefix), wait));
    }
    if (closed > 0) {
        notes.push_back(fmt::format("admission closed after a possible loss of data in {} of "
                                    "them, for up to {} more (redsem status says why)",
                                    closed, format_duration(Milliseconds{opens_in_ms})));
    }
    if (!abandoned.empty()) {
        finding.verdict = Verdict::warn;
        notes.push_back(fmt::format("{} abandoned: only dead holders or waiters left, and their "
                                    "keys never expire until they are cleaned (first: '{}')",
                                    abandoned.size(), terminal_safe(abandoned.front())));
        fixes.emplace_back("run redsem gc (from cron)");
    }
    if (!foreign.empty()) {
        finding.verdict = Verdict::warn;
        const ForeignKey& first = foreign.front();
        notes.push_back(fmt::format(
            "{} at redsem's names that redsem did not write (first: '{}', {}): a semaphore "
            "with such a key is refused (65)",
            plural(foreign.size(), "key", "keys"), printable(first.key, 100),
            first.wanted.empty()
                ? fmt::format("a {} at a name redsem never uses", first.type)
                : fmt::format("a {} where redsem keeps a {}", first.type, first.wanted)));
        fixes.emplace_back("give redsem a prefix of its own (--prefix), or remove those keys");
    }
    if (!scanned.unreadable.empty()) {
        finding.verdict = std::max(finding.verdict, Verdict::warn);
        notes.push_back(fmt::format("{} under the prefix that this user may not read (first: "
                                    "'{}'): not checked",
                                    plural(scanned.unreadable.size(), "key", "keys"),
                                    printable(scanned.unreadable.front(), 100)));
    }
    if (scanned.epoch_foreign) {
        // Every semaphore of the prefix shares it: not one semaphore's problem.
        finding.verdict = Verdict::unsafe;
        notes.push_back(fmt::format("'{}:epoch' holds a {} where redsem keeps a hash: every "
                                    "call that may admit under this prefix is refused (65)",
                                    terminal_safe(prefix), scanned.epoch_type));
        fixes.emplace_back(fmt::format("remove that key (DEL {}:epoch), or give redsem a prefix "
                                       "of its own (--prefix)",
                                       terminal_safe(prefix)));
    }
    finding.found = fmt::format("{}", fmt::join(notes, "; "));
    finding.fix = fmt::format("{}", fmt::join(fixes, "; "));
    return finding;
}

} // namespace redsem::doctor

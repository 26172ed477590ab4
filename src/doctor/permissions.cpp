#include "doctor/checks.hpp"

#include "redis/reply.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/protocol.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace redsem::doctor {

namespace {

// Replies, for each command in ARGV (its word count, then its words), 1 when the user may run
// it with those arguments (keys included), 0 when not, -1 when the server knows no such command
// (renamed away); nil on Redis 6.2, which has no redis.acl_check_cmd. Runs none of them.
// Redis 7 is told that it writes nothing (k_no_writes), so that a CLIENT PAUSE WRITE (a
// manual failover under way) does not hold it.
constexpr const char* k_no_writes = "#!lua flags=no-writes\n";
constexpr const char* k_probe_script = R"(local allowed = redis.acl_check_cmd
if not allowed then
    return nil
end
local replies, at = {}, 1
while at <= #ARGV do
    local count = tonumber(ARGV[at])
    local ok, yes = pcall(allowed, unpack(ARGV, at + 1, at + count))
    replies[#replies + 1] = (not ok and -1) or (yes and 1) or 0
    at = at + count + 1
end
return replies
)";

// When redsem needs a command (README, "Least privilege").
enum class Need {
    always,
    without_info, // MULTI/EXEC: the proof of the epoch when INFO is refused
    cluster,      // on a Redis Cluster
    other_db,     // SELECT: a database other than 0
    feature,      // only the feature named in Probe::feature stops working
    info,         // optional: restart detection by the server's identity, eviction policy
};

struct Probe {
    Need need;
    std::vector<std::string> words; // "K" stands for a key under the prefix
    const char* feature = "";       // for Need::feature: what is lost without it
};

// The name of the semaphore doctor probes, and a token shaped as a caller's (32 hex digits:
// key patterns may name them so), shown in findings as TOKEN.
constexpr std::string_view k_probe_name = "redsem-doctor";
constexpr std::string_view k_probe_token = "0123456789abcdef0123456789abcdef";

const std::vector<Probe>& probes() {
    static const std::vector<Probe> table = [] {
        // What the client sends itself.
        std::vector<Probe> made{
            {Need::always, {"eval", "return 1", "1", "K"}},
            {Need::always, {"evalsha", std::string(40, '0'), "1", "K"}},
            {Need::always, {"ping"}},
            {Need::always, {"scan", "0"}},
            {Need::always, {"blpop", "K", "0"}},
        };
        // What the scripts run (the one list their own check reads), each on a key but TIME.
        for (const std::string_view command : k_script_commands) {
            std::vector<std::string> words{std::string(command)};
            if (command != "time") {
                words.emplace_back("K");
            }
            made.push_back({Need::always, std::move(words)});
        }
        made.insert(
            made.end(),
            {
                {Need::without_info, {"multi"}},
                {Need::without_info, {"exec"}},
                {Need::cluster, {"asking"}},
                {Need::cluster, {"cluster", "slots"}},
                {Need::cluster, {"cluster", "myid"}},
                {Need::cluster, {"cluster", "nodes"}},
                {Need::other_db, {"select", "1"}},
                {Need::feature, {"xadd", "K", "*", "f", "v"}, "the history is not written"},
                {Need::feature, {"xtrim", "K", "MAXLEN", "1"}, "the history is not written"},
                {Need::feature, {"xrange", "K", "-", "+"}, "redsem log cannot read the history"},
                {Need::feature,
                 {"xrevrange", "K", "+", "-"},
                 "redsem status --watch cannot follow the history"},
                {Need::feature, {"xread", "STREAMS", "K", "0"}, "redsem log --follow fails (77)"},
                {Need::feature, {"wait", "0", "0"}, "--replicas fails (77)"},
                {Need::feature,
                 {"fcall", "f", "1", "K"},
                 "the scripts go by EVAL, which costs Redis more per call"},
                {Need::feature,
                 {"function", "load", "x"},
                 "the scripts go by EVAL, which costs Redis more per call"},
                {Need::info, {"info", "server"}},
                {Need::info, {"info", "replication"}},
            });
        return made;
    }();
    return table;
}

// The ACL rule that allows `words`: "+cluster|slots", "+function|load", "+setbit".
std::string rule_for(const std::vector<std::string>& words) {
    if (words.front() == "cluster" || words.front() == "function") {
        return "+" + words.front() + "|" + words[1];
    }
    return "+" + words.front();
}

std::string joined(const std::vector<std::string>& items, std::string_view separator) {
    std::string text;
    for (const std::string& item : items) {
        text += (text.empty() ? "" : std::string(separator)) + item;
    }
    return text;
}

} // namespace

std::vector<Finding> check_permissions(Connection& connection, const ServerFacts& facts,
                                       const std::string& prefix, const std::string& user) {
    const Keys keys = Keys::make(prefix, k_probe_name);
    const std::string& key = keys.state;
    // Every key of a semaphore (keys.hpp); named in findings by what follows "<prefix>:{NAME}".
    const std::vector<std::string> semaphore_keys = keys.every_key(k_probe_token);
    const std::size_t named_from = fmt::format("{}:{{{}}}", prefix, k_probe_name).size();
    // Each probe as redsem sends it, on a key under the prefix; then each command that takes
    // a key alone, which tells a missing command from keys out of the user's reach.
    int major = 0;
    std::sscanf(
        facts.hello.get("version").value_or(facts.info.get("redis_version").value_or("")).c_str(),
        "%d", &major);
    std::vector<std::string> eval{
        "EVAL", (major >= 7 ? std::string(k_no_writes) : "") + k_probe_script, "0"};
    std::vector<std::size_t> keyed;
    for (std::size_t i = 0; i < probes().size(); ++i) {
        const std::vector<std::string>& words = probes()[i].words;
        eval.push_back(std::to_string(words.size()));
        for (const std::string& word : words) {
            eval.push_back(word == "K" ? key : word);
        }
        if (std::find(words.begin(), words.end(), "K") != words.end()) {
            keyed.push_back(i);
        }
    }
    for (const std::size_t i : keyed) {
        eval.push_back("1");
        eval.push_back(probes()[i].words.front());
    }
    // The epoch key that every semaphore of the prefix shares (not on a cluster), which
    // patterns naming semaphores may leave out.
    const std::string epoch = fmt::format("{}:epoch", prefix);
    eval.insert(eval.end(), {"4", "hset", epoch, "f", "v", "3", "hget", epoch, "f"});
    const std::size_t epoch_probes = 2;
    // Every key of a semaphore, read (EXISTS) and written (DEL).
    for (const std::string& part : semaphore_keys) {
        eval.insert(eval.end(), {"2", "exists", part, "2", "del", part});
    }
    const std::size_t part_probes = 2 * semaphore_keys.size();

    const Reply reply = connection.command(eval);
    if (reply.is_error()) {
        // Never the probe's own text, which the server quotes after "with args".
        const std::string error = reply.text.substr(0, reply.text.find(", with args"));
        if (is_error_code(reply, "NOPERM")) {
            return {Finding(
                "permissions", facts.node, Verdict::unsafe,
                fmt::format("this user may not run redsem's scripts ({})", printable(error, 120)),
                fmt::format("ACL SETUSER {} +eval +evalsha", printable(user)))};
        }
        return {Finding("permissions", facts.node, Verdict::unsafe,
                        fmt::format("this server runs no scripts ({}): redsem cannot work here",
                                    printable(error, 120)),
                        "undo the rename-command of EVAL and EVALSHA")};
    }
    if (reply.is_nil()) {
        return {Finding("permissions", facts.node, Verdict::warn,
                        "unknown: this Redis has no redis.acl_check_cmd (Redis 7 has), so "
                        "permissions cannot be checked without running the commands",
                        "compare the user's rules with README, \"Least privilege\"")};
    }
    const std::vector<Reply>& replies = reply.as_array();
    const std::size_t epoch_at = probes().size() + keyed.size();
    const std::size_t parts_at = epoch_at + epoch_probes;
    const std::size_t expected = parts_at + part_probes;
    if (replies.size() != expected) {
        throw InternalError(fmt::format("the permission probe answered {} times for {} commands",
                                        replies.size(), expected));
    }
    const bool epoch_denied = !facts.cluster && (replies[epoch_at].as_integer() == 0 ||
                                                 replies[epoch_at + 1].as_integer() == 0);
    // The parts of a semaphore out of reach (read or write), where others are in reach: the
    // patterns name some of a semaphore's keys, and every call on it exits 77.
    std::vector<std::string> parts_denied;
    bool any_part_allowed = false;
    for (std::size_t p = 0; p < semaphore_keys.size(); ++p) {
        const bool readable = replies[parts_at + 2 * p].as_integer() == 1;
        const bool writable = replies[parts_at + 2 * p + 1].as_integer() == 1;
        any_part_allowed = any_part_allowed || readable || writable;
        if (!readable || !writable) {
            std::string part = semaphore_keys[p].substr(named_from);
            if (const std::size_t at = part.find(k_probe_token); at != std::string::npos) {
                part.replace(at, k_probe_token.size(), "TOKEN");
            }
            parts_denied.push_back(std::move(part));
        }
    }
    const bool parts_missing = any_part_allowed && !parts_denied.empty();
    std::vector<long long> allowed;
    for (std::size_t i = 0; i < probes().size(); ++i) {
        allowed.push_back(replies[i].as_integer());
    }
    // A command allowed alone but not on redsem's keys: the keys are what is missing.
    bool keys_denied = false;
    for (std::size_t k = 0; k < keyed.size(); ++k) {
        if (allowed[keyed[k]] == 0 && replies[probes().size() + k].as_integer() == 1) {
            keys_denied = true;
            allowed[keyed[k]] = 1;
        }
    }
    std::vector<std::string> missing;
    std::vector<std::string> renamed;
    std::vector<std::string> lost_features;
    std::vector<std::string> feature_rules;
    std::vector<std::string> features_renamed; // an ACL rule cannot bring these back
    bool info_allowed = true;
    bool info_renamed = false;
    for (std::size_t i = 0; i < probes().size(); ++i) {
        const Probe& probe = probes()[i];
        const long long verdict = allowed[i];
        if (verdict == 1) {
            continue;
        }
        const std::string rule = rule_for(probe.words);
        switch (probe.need) {
        case Need::info:
            info_allowed = false;
            info_renamed = verdict == -1;
            continue;
        case Need::feature:
            if (verdict == -1) {
                features_renamed.push_back(probe.words.front());
            } else {
                feature_rules.push_back(rule);
            }
            if (std::find(lost_features.begin(), lost_features.end(), probe.feature) ==
                lost_features.end()) {
                lost_features.emplace_back(probe.feature);
            }
            continue;
        case Need::cluster:
            if (!facts.cluster) {
                continue;
            }
            break;
        case Need::other_db:
            if (facts.db == 0) {
                continue;
            }
            break;
        case Need::without_info:
        case Need::always:
            break;
        }
        (verdict == -1 ? renamed : missing).push_back(rule);
    }
    if (info_allowed) {
        // MULTI and EXEC prove the epoch only where INFO is refused.
        const auto proves_epoch = [](const std::string& rule) {
            return rule == "+multi" || rule == "+exec";
        };
        std::erase_if(missing, proves_epoch);
        std::erase_if(renamed, proves_epoch);
    }

    std::vector<Finding> findings;
    const std::string setuser = fmt::format("ACL SETUSER {}", printable(user));
    if (parts_missing) {
        findings.emplace_back(
            "permissions", facts.node, Verdict::unsafe,
            fmt::format(
                "this user's key patterns leave out some keys of a semaphore ('{}:{{NAME}}' "
                "+ {}), or allow only reading or only writing them: every call on a "
                "semaphore exits 77",
                terminal_safe(prefix), joined(parts_denied, " ")),
            fmt::format("{} ~{}:*", setuser, terminal_safe(prefix)));
    } else if (keys_denied && (epoch_denied || facts.cluster)) {
        findings.emplace_back("permissions", facts.node, Verdict::unsafe,
                              fmt::format("this user may not use the keys '{}:*', where redsem "
                                          "keeps its semaphores: every call exits 77",
                                          terminal_safe(prefix)),
                              fmt::format("{} ~{}:*", setuser, terminal_safe(prefix)));
    } else if (keys_denied) {
        findings.emplace_back(
            "permissions", facts.node, Verdict::warn,
            fmt::format("this user's key patterns do not cover every semaphore "
                        "('{}:{{NAME}}:*'): a semaphore outside them exits 77",
                        terminal_safe(prefix)),
            fmt::format("{} ~{}:*, or check the names in use", setuser, terminal_safe(prefix)));
    } else if (epoch_denied) {
        findings.emplace_back(
            "permissions", facts.node, Verdict::unsafe,
            fmt::format("this user may not use '{}', which every call that admits needs: those "
                        "calls exit 77",
                        terminal_safe(epoch)),
            fmt::format("{} ~{}", setuser, terminal_safe(epoch)));
    }
    if (!missing.empty()) {
        findings.emplace_back("permissions", facts.node, Verdict::unsafe,
                              fmt::format("this user may not run {}, which redsem needs: those "
                                          "calls exit 77",
                                          joined(missing, " ")),
                              fmt::format("{} {}", setuser, joined(missing, " ")));
    }
    if (!renamed.empty()) {
        findings.emplace_back("permissions", facts.node, Verdict::unsafe,
                              fmt::format("this server knows no {} (renamed or disabled), which "
                                          "redsem needs",
                                          joined(renamed, " ")),
                              renamed.size() == 1 ? "undo its rename-command"
                                                  : "undo their rename-command");
    }
    if (findings.empty()) {
        findings.emplace_back("permissions", facts.node, Verdict::ok,
                              "this user may run every command redsem needs");
    }
    if (!lost_features.empty()) {
        std::vector<std::string> missing_features = feature_rules;
        for (const std::string& command : features_renamed) {
            missing_features.push_back(command + " (renamed or disabled)");
        }
        std::vector<std::string> fixes;
        if (!feature_rules.empty()) {
            fixes.push_back(
                fmt::format("{} {} for those features", setuser, joined(feature_rules, " ")));
        }
        if (!features_renamed.empty()) {
            fixes.push_back(
                fmt::format("undo the rename-command of {}", joined(features_renamed, " ")));
        }
        findings.emplace_back("permissions", facts.node, Verdict::warn,
                              fmt::format("without {}: {}", joined(missing_features, " "),
                                          joined(lost_features, "; ")),
                              joined(fixes, "; "));
    }
    if (info_renamed) {
        findings.emplace_back(
            "permissions", facts.node, Verdict::warn,
            "INFO is renamed or disabled here, so redsem proves the server's identity by a "
            "script: a restart is seen only at the first call after it, a failback to a node "
            "that still has redsem's marker script is not seen, and neither is an allkeys-* "
            "eviction policy (README, \"Before the first run\")",
            "undo the rename-command of INFO, if you can");
    } else if (!info_allowed) {
        findings.emplace_back(
            "permissions", facts.node, Verdict::warn,
            "without +info (@dangerous) redsem proves the server's identity by a script: a "
            "restart is seen only at the first call after it, a failback to a node that still "
            "has redsem's marker script is not seen, and neither is an allkeys-* eviction "
            "policy (README, \"Before the first run\")",
            fmt::format("{} +info, if the provider allows it", setuser));
    }
    return findings;
}

} // namespace redsem::doctor

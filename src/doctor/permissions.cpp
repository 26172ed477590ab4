#include "doctor/checks.hpp"

#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace redsem::doctor {

namespace {

// Replies, for each command in ARGV (its word count, then its words), 1 when the user may run
// it with those arguments (keys included), 0 when not, -1 when the server knows no such command
// (renamed away); nil on Redis 6.2, which has no redis.acl_check_cmd. Runs none of them.
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

const std::vector<Probe>& probes() {
    static const std::vector<Probe> table{
        {Need::always, {"eval", "return 1", "1", "K"}},
        {Need::always, {"evalsha", std::string(40, '0'), "1", "K"}},
        {Need::always, {"ping"}},
        {Need::always, {"time"}},
        {Need::always, {"scan", "0"}},
        {Need::always, {"type", "K"}},
        {Need::always, {"exists", "K"}},
        {Need::always, {"blpop", "K", "0"}},
        {Need::always, {"bitpos", "K", "0"}},
        {Need::always, {"del", "K"}},
        {Need::always, {"hdel", "K", "f"}},
        {Need::always, {"hget", "K", "f"}},
        {Need::always, {"hgetall", "K"}},
        {Need::always, {"hincrby", "K", "f", "1"}},
        {Need::always, {"hmget", "K", "f"}},
        {Need::always, {"hscan", "K", "0"}},
        {Need::always, {"hset", "K", "f", "v"}},
        {Need::always, {"persist", "K"}},
        {Need::always, {"pexpire", "K", "1"}},
        {Need::always, {"pexpireat", "K", "1"}},
        {Need::always, {"pttl", "K"}},
        {Need::always, {"rpush", "K", "v"}},
        {Need::always, {"setbit", "K", "0", "1"}},
        {Need::always, {"zadd", "K", "1", "m"}},
        {Need::always, {"zcard", "K"}},
        {Need::always, {"zmscore", "K", "m"}},
        {Need::always, {"zpopmin", "K"}},
        {Need::always, {"zrange", "K", "0", "-1"}},
        {Need::always, {"zrangebyscore", "K", "0", "1"}},
        {Need::always, {"zrank", "K", "m"}},
        {Need::always, {"zrem", "K", "m"}},
        {Need::always, {"zscore", "K", "m"}},
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
        {Need::feature, {"xrevrange", "K", "+", "-"}, "redsem status cannot show the history"},
        {Need::feature, {"xread", "STREAMS", "K", "0"}, "redsem log --follow fails (77)"},
        {Need::feature, {"wait", "0", "0"}, "--replicas fails (77)"},
        {Need::info, {"info", "server"}},
    };
    return table;
}

// The ACL rule that allows `words`: "+cluster|slots", "+setbit".
std::string rule_for(const std::vector<std::string>& words) {
    if (words.front() == "cluster") {
        return "+cluster|" + words[1];
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

Finding check_permissions(Connection& connection, const ServerFacts& facts,
                          const std::string& prefix) {
    Finding finding("permissions", facts.node);
    const std::string key = fmt::format("{}:{{redsem-doctor}}:probe", prefix);
    std::vector<std::string> eval{"EVAL", k_probe_script, "0"};
    for (const Probe& probe : probes()) {
        eval.push_back(std::to_string(probe.words.size()));
        for (const std::string& word : probe.words) {
            eval.push_back(word == "K" ? key : word);
        }
    }
    const Reply reply = connection.command(eval);
    if (reply.is_error()) {
        finding.verdict = Verdict::unsafe;
        finding.found = fmt::format("this user cannot run redsem's scripts: {}",
                                    printable(reply.text, 200));
        finding.fix = "add +eval +evalsha (README, \"Least privilege\")";
        return finding;
    }
    if (reply.is_nil()) {
        finding.verdict = Verdict::warn;
        finding.found = "unknown: this Redis has no redis.acl_check_cmd (Redis 7 has), so "
                        "permissions cannot be checked without running the commands";
        finding.fix = "compare the user's rules with README, \"Least privilege\"";
        return finding;
    }
    const std::vector<Reply>& allowed = reply.as_array();
    std::vector<std::string> missing;
    std::vector<std::string> renamed;
    std::vector<std::string> lost_features;
    std::vector<std::string> feature_rules;
    bool info_allowed = true;
    for (std::size_t i = 0; i < probes().size() && i < allowed.size(); ++i) {
        const Probe& probe = probes()[i];
        const long long verdict = allowed[i].as_integer();
        if (verdict == 1) {
            continue;
        }
        const std::string rule = rule_for(probe.words);
        switch (probe.need) {
        case Need::info:
            info_allowed = false;
            continue;
        case Need::feature:
            feature_rules.push_back(rule);
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
        std::erase_if(missing, [](const std::string& rule) {
            return rule == "+multi" || rule == "+exec";
        });
    }

    std::vector<std::string> notes;
    if (!missing.empty()) {
        finding.verdict = Verdict::unsafe;
        notes.push_back(fmt::format("this user may not run {} (on keys '{}:*'), which redsem "
                                    "needs: those calls exit 77",
                                    joined(missing, " "), printable(prefix)));
        finding.fix = fmt::format("ACL SETUSER <user> {} ~{}:*", joined(missing, " "),
                                  printable(prefix));
    }
    if (!renamed.empty()) {
        finding.verdict = Verdict::unsafe;
        notes.push_back(fmt::format("this server knows no {} (renamed or disabled?), which redsem "
                                    "needs",
                                    joined(renamed, " ")));
        if (finding.fix.empty()) {
            finding.fix = "undo the rename-command of those commands";
        }
    }
    if (!lost_features.empty()) {
        finding.verdict = std::max(finding.verdict, Verdict::warn);
        notes.push_back(fmt::format("without {}: {}", joined(feature_rules, " "),
                                    joined(lost_features, "; ")));
        if (finding.fix.empty()) {
            finding.fix = fmt::format("add {} for those features", joined(feature_rules, " "));
        }
    }
    if (!info_allowed) {
        finding.verdict = std::max(finding.verdict, Verdict::warn);
        notes.push_back("without +info (@dangerous), a restart is seen only at the first call "
                        "after it, a failback to a node that still has redsem's marker script "
                        "is not seen, and an allkeys-* eviction policy is not seen (README, "
                        "\"Before the first run\")");
        if (finding.fix.empty()) {
            finding.fix = "add +info if the provider allows it";
        }
    }
    finding.found = notes.empty() ? "this user may run every command redsem needs"
                                  : joined(notes, "; ");
    return finding;
}

} // namespace redsem::doctor

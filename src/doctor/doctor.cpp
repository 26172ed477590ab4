#include "doctor/doctor.hpp"

#include "doctor/checks.hpp"
#include "semaphore/semaphore.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <type_traits>

namespace redsem {

std::string_view verdict_name(Verdict verdict) {
    switch (verdict) {
    case Verdict::ok:
        return "ok";
    case Verdict::warn:
        return "warn";
    case Verdict::unsafe:
        return "unsafe";
    }
    return "?";
}

Verdict DoctorReport::verdict() const {
    Verdict worst = Verdict::ok;
    for (const Finding& finding : findings) {
        worst = std::max(worst, finding.verdict);
    }
    return worst;
}

namespace doctor {

namespace {

// A round trip longer than this leaves a short lease little room: warned about.
constexpr Milliseconds k_slow_round_trip{200};
// The local clock this far from the server's: times in logs and cron stop lining up.
constexpr Milliseconds k_clock_skew{2'000};
// How many TIME calls the clock check makes; it keeps the one with the shortest round trip.
constexpr int k_clock_samples = 5;
// A replica this many seconds behind (INFO's lag) is warned about.
constexpr long long k_replica_lag_seconds = 10;
// Used memory above this share of maxmemory, under noeviction: writes fail soon.
constexpr double k_nearly_full = 0.9;
constexpr long long k_all_slots = 16384;

std::string joined(const std::vector<std::string>& parts, std::string_view separator = "; ") {
    return fmt::format("{}", fmt::join(parts, separator));
}

std::string bytes(long long count) {
    constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(count);
    std::size_t unit = 0;
    while (value >= 1024 && unit + 1 < std::size(units)) {
        value /= 1024;
        ++unit;
    }
    return unit == 0 ? fmt::format("{} B", count) : fmt::format("{:.1f} {}", value, units[unit]);
}

// HELLO's fields without switching protocols; empty when HELLO is refused or renamed.
ServerInfo hello_fields(Connection& connection) {
    const Reply reply = connection.command(std::vector<std::string>{"HELLO"});
    if (reply.type != Reply::Type::array) {
        return {};
    }
    std::string text;
    for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) {
        const Reply& value = reply.elements[i + 1];
        if (value.type == Reply::Type::integer) {
            text += fmt::format("{}:{}\n", reply.elements[i].text, value.integer);
        } else if (value.type == Reply::Type::string || value.type == Reply::Type::status) {
            text += fmt::format("{}:{}\n", reply.elements[i].text, value.text);
        }
    }
    return ServerInfo(text);
}

// A CONFIG GET's value, or nullopt when CONFIG is refused or renamed away.
std::optional<std::string> config(Connection& connection, const std::string& parameter) {
    const Reply reply = connection.command(std::vector<std::string>{"CONFIG", "GET", parameter});
    if (reply.type != Reply::Type::array || reply.elements.size() < 2) {
        return std::nullopt;
    }
    return reply.elements[1].text;
}

// Why INFO told nothing, for "unknown" findings.
std::string info_refused(const ServerFacts& facts) {
    if (facts.refusal.rfind("NOPERM", 0) == 0) {
        return "INFO refused (NOPERM)";
    }
    const std::string error = facts.refusal.substr(0, facts.refusal.find(", with args"));
    return fmt::format("INFO unavailable ({})", printable(error, 80));
}

// How many hash slots the cluster serves, and its state, by CLUSTER INFO, else CLUSTER SLOTS
// (which the README's cluster user may run); -1 when neither answers.
long long slots_served(Connection& connection, std::string& state) {
    const Reply info = connection.command(std::vector<std::string>{"CLUSTER", "INFO"});
    if (info.type == Reply::Type::string) {
        const ServerInfo fields(info.text);
        state = fields.get("cluster_state").value_or("unknown");
        return fields.number("cluster_slots_ok").value_or(-1);
    }
    state = "unknown (CLUSTER INFO refused)";
    const Reply slots = connection.command(std::vector<std::string>{"CLUSTER", "SLOTS"});
    if (slots.type != Reply::Type::array) {
        return -1;
    }
    long long served = 0;
    for (const Reply& range : slots.elements) {
        served += range.at(1).as_integer() - range.at(0).as_integer() + 1;
    }
    return served;
}

ServerFacts gather(Connection& connection, int db) {
    ServerFacts facts;
    facts.hello = hello_fields(connection);
    const Reply info = connection.command(std::vector<std::string>{"INFO"});
    if (info.is_error()) {
        facts.refusal = info.text;
    } else {
        facts.info = ServerInfo(info.as_string());
    }
    facts.cluster =
        facts.hello.get("mode") == "cluster" || facts.info.get("cluster_enabled") == "1";
    facts.node = facts.cluster ? connection.server() : "";
    if (facts.cluster) {
        facts.slots = slots_served(connection, facts.cluster_state);
    }
    facts.db = db;
    return facts;
}

Finding check_version(const ServerFacts& facts) {
    Finding finding("version", facts.node);
    const auto version =
        facts.hello.get("version").value_or(facts.info.get("redis_version").value_or(""));
    if (version.empty()) {
        finding.verdict = Verdict::warn;
        finding.found = "unknown: neither HELLO nor INFO answered";
        return finding;
    }
    int major = 0;
    int minor = 0;
    std::sscanf(version.c_str(), "%d.%d", &major, &minor);
    if (major < 6 || (major == 6 && minor < 2)) {
        finding.verdict = Verdict::unsafe;
        finding.found =
            fmt::format("Redis {}: redsem needs Redis 6.2 or later", printable(version));
        finding.fix = "upgrade Redis";
    } else if (major == 6) {
        finding.found = fmt::format("Redis {} (supported; Redis 7 checks a user's permissions "
                                    "before a script writes, and neither saves nor replicates "
                                    "scripts)",
                                    printable(version));
    } else {
        finding.found = fmt::format("Redis {}", printable(version));
    }
    return finding;
}

void judge_cluster(const ServerFacts& facts, Finding& finding) {
    const std::string& state = facts.cluster_state;
    const long long assigned = facts.slots;
    finding.found = fmt::format("a Redis Cluster, state {}, {} of {} slots served", state,
                                assigned < 0 ? "?" : std::to_string(assigned), k_all_slots);
    if (state == "fail" || (assigned >= 0 && assigned < k_all_slots)) {
        finding.verdict = Verdict::unsafe;
        finding.found += ": semaphores on the slots nobody serves cannot be used (69)";
        finding.fix = "bring the failed nodes back, or assign their slots";
    } else if (assigned < 0) {
        finding.verdict = Verdict::warn;
        finding.found += " (CLUSTER INFO and CLUSTER SLOTS refused)";
    }
}

Finding check_mode(Connection& connection, const ServerFacts& facts, const RedisUrl& url) {
    Finding finding("mode");
    const std::string mode = facts.hello.get("mode").value_or(
        facts.info.empty() ? "unknown" : (facts.cluster ? "cluster" : "standalone"));
    const std::string role = facts.hello.get("role").value_or(facts.info.get("role").value_or(""));
    if (mode == "sentinel") {
        finding.verdict = Verdict::unsafe;
        finding.found = "this is a Redis Sentinel, which keeps no data";
        finding.fix = "use redis-sentinel://HOST:PORT#MASTER (README, \"Sentinel\")";
        return finding;
    }
    if (role == "replica" || role == "slave") {
        finding.verdict = Verdict::unsafe;
        finding.found = fmt::format(
            "a replica{}: it refuses redsem's writes, or loses them at its next sync",
            facts.info.get("master_host") ? fmt::format(" of {}:{}", *facts.info.get("master_host"),
                                                        facts.info.get("master_port").value_or("?"))
                                          : "");
        finding.fix = "point redsem at the master, or at the sentinels (redis-sentinel://)";
        return finding;
    }
    if (mode == "cluster") {
        judge_cluster(facts, finding);
        return finding;
    }
    if (url.kind == RedisUrl::Kind::sentinel) {
        finding.found = fmt::format("the master '{}' that the sentinels name ({})",
                                    printable(url.master_name), connection.server());
        if (url.sentinels.size() == 1) {
            finding.verdict = Verdict::warn;
            finding.found += "; the URL names one sentinel: while it is down, redsem cannot find "
                             "the master";
            finding.fix = "list every sentinel: redis-sentinel://S1,S2,S3#MASTER";
        }
        return finding;
    }
    finding.found = mode == "unknown" ? "a server (HELLO and INFO refused; not a cluster node)"
                                      : fmt::format("a {} master", mode);
    return finding;
}

// Whether `host` names this machine: "localhost", or a loopback address (not a DNS name that
// merely starts with "127.").
bool loopback(const std::string& host) {
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
        return (ntohl(v4.s_addr) >> 24) == 127;
    }
    if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
        return IN6_IS_ADDR_LOOPBACK(&v6);
    }
    return host == "localhost";
}

// Whether everything `url` talks to is on this machine: a Unix socket, or loopback addresses
// (the sentinels' too; the master they name is checked by what they say).
bool on_this_machine(const RedisUrl& url) {
    switch (url.kind) {
    case RedisUrl::Kind::unix_socket:
        return true;
    case RedisUrl::Kind::tcp:
        return loopback(url.host);
    case RedisUrl::Kind::sentinel:
        return std::all_of(url.sentinels.begin(), url.sentinels.end(),
                           [](const Endpoint& sentinel) { return loopback(sentinel.host); });
    }
    return false;
}

Finding check_tls(const ConnectOptions& options) {
    Finding finding("tls");
    const RedisUrl& url = options.url;
    if (url.kind == RedisUrl::Kind::unix_socket) {
        finding.found = "a Unix socket: nothing crosses the network";
        return finding;
    }
    if (url.tls) {
        if (options.tls.insecure) {
            finding.verdict = Verdict::warn;
            finding.found = "TLS, but the server's certificate is not verified (--insecure): "
                            "anyone on the path can pose as the server";
            finding.fix = "give the CA with --cacert and drop --insecure";
        } else {
            finding.found = "TLS, the server's certificate verified";
        }
        return finding;
    }
    if (on_this_machine(url)) {
        finding.found = "plain TCP on the loopback interface";
        return finding;
    }
    finding.verdict = Verdict::warn;
    finding.found = "plain TCP: the tokens (and any password) cross the network unencrypted";
    finding.fix = "use rediss:// (a server with tls-port)";
    return finding;
}

Finding check_user(Connection& connection, const ConnectOptions& options) {
    Finding finding("acl user");
    const Reply whoami = connection.command(std::vector<std::string>{"ACL", "WHOAMI"});
    const std::string user = whoami.is_error() ? "" : whoami.as_string();
    const RedisUrl& url = options.url;
    const bool password = url.password.has_value();
    if (!user.empty()) {
        finding.found = fmt::format("'{}'", printable(user));
    } else if (url.user) {
        finding.found = fmt::format("'{}' (the URL's; ACL WHOAMI refused)", printable(*url.user));
    } else {
        finding.found = fmt::format("unknown (ACL WHOAMI refused: {})", printable(whoami.text, 80));
    }
    if (!password) {
        finding.found += ", logged in without a password";
        if (!on_this_machine(url)) {
            finding.verdict = Verdict::warn;
            finding.found += ": anyone who reaches the server may take and release slots";
            finding.fix = "give the server a password (requirepass, or an ACL user)";
        }
    }
    return finding;
}

Finding check_eviction(const ServerFacts& facts) {
    Finding finding("eviction", facts.node);
    if (facts.info.empty()) {
        finding.verdict = Verdict::warn;
        finding.found = fmt::format(
            "unknown: {}, so redsem cannot see the maxmemory-policy; under an allkeys-* policy "
            "a semaphore in use can be evicted and a second holder let in",
            info_refused(facts));
        finding.fix = facts.refusal.rfind("NOPERM", 0) == 0
                          ? "ask the provider: noeviction or volatile-* is safe; or grant +info"
                          : "ask the provider: noeviction or volatile-* is safe";
        return finding;
    }
    const auto maxmemory_field = facts.info.number("maxmemory");
    if (!maxmemory_field) {
        finding.verdict = Verdict::warn;
        finding.found = "unknown: this server's INFO shows no maxmemory (a trimmed INFO?); under "
                        "an allkeys-* policy a semaphore in use can be evicted and a second "
                        "holder let in";
        finding.fix = "ask the provider: noeviction or volatile-* is safe";
        return finding;
    }
    const long long maxmemory = *maxmemory_field;
    const std::string policy = facts.info.get("maxmemory_policy").value_or("unknown");
    const long long used = facts.info.number("used_memory").value_or(0);
    if (maxmemory == 0) {
        finding.found = fmt::format("no maxmemory: nothing is evicted (policy {})", policy);
        return finding;
    }
    const double share = static_cast<double>(used) / static_cast<double>(maxmemory);
    const std::string usage =
        fmt::format("maxmemory {}, {:.0f}% used, policy {}", bytes(maxmemory), share * 100, policy);
    if (policy.rfind("allkeys-", 0) == 0) {
        finding.verdict = Verdict::unsafe;
        finding.found = usage + ": Redis may evict a semaphore in use and let a second holder "
                                "in, so redsem admits nobody here (69), nor for the loss grace "
                                "after the policy is set back";
        finding.fix = "CONFIG SET maxmemory-policy volatile-lru (or noeviction), or a Redis of "
                      "redsem's own";
        return finding;
    }
    // Under volatile-* Redis evicts the keys with an expiry, never a semaphore in use; once
    // none is left to evict, it refuses writes as under noeviction.
    const bool volatile_policy = policy.rfind("volatile-", 0) == 0;
    const std::string full_means =
        "Redis refuses writes and redsem exits 69 (run stops its command, 76)";
    if (share >= 1) {
        finding.verdict = Verdict::unsafe;
        finding.found =
            fmt::format("{}: full{}, so {} now", usage,
                        volatile_policy ? ", with nothing left it may evict" : "", full_means);
        finding.fix = "raise maxmemory, or free memory";
    } else if (share >= k_nearly_full) {
        finding.verdict = Verdict::warn;
        finding.found =
            fmt::format("{}: nearly full; when full{}, {}", usage,
                        volatile_policy ? " with nothing left it may evict" : "", full_means);
        finding.fix = "raise maxmemory, or free memory";
    } else if (volatile_policy) {
        finding.found = usage + ": a semaphore in use has no expiry, so it is never evicted "
                                "(an abandoned one waits for redsem gc)";
        const long long evicted = facts.info.number("evicted_keys").value_or(0);
        if (evicted > 0) {
            // Evictions after a CONFIG SET may have come under another policy
            // (lua/lib/eviction.lua).
            finding.found += fmt::format("; {} keys evicted since the start: after a CONFIG SET, "
                                         "more evictions close admission for the loss grace",
                                         evicted);
        }
    } else {
        finding.found = usage + ": when full, Redis refuses writes and redsem exits 69; "
                                "nothing is evicted";
    }
    return finding;
}

// Redis refuses every write (MISCONF) while its last save failed: an RDB snapshot, under
// stop-writes-on-bgsave-error (the default) with a save schedule, or an AOF write.
void judge_disk_errors(Connection& connection, const ServerFacts& facts, bool aof,
                       const std::optional<std::string>& save, Finding& finding) {
    std::string failed;
    bool certain = true;
    if (aof && facts.info.get("aof_last_write_status") == "err") {
        failed = "its last AOF write failed";
    } else if (facts.info.get("rdb_last_bgsave_status") == "err") {
        const auto stop = config(connection, "stop-writes-on-bgsave-error");
        if (stop && *stop != "yes") {
            return; // a failed snapshot is the persistence finding's, not a refusal
        }
        if (save && save->empty()) {
            return; // no schedule: Redis refuses nothing after a failed manual BGSAVE
        }
        failed = "its last RDB snapshot failed";
        certain = stop && save;
    }
    if (failed.empty()) {
        return;
    }
    finding.verdict = certain ? Verdict::unsafe : std::max(finding.verdict, Verdict::warn);
    finding.found =
        fmt::format("{}: Redis {} every write (MISCONF) until a save succeeds, and "
                    "every acquire exits 69 meanwhile; {}",
                    failed, certain ? "refuses" : "may refuse (CONFIG refused)", finding.found);
    finding.fix = "give Redis the disk it needs (space, permissions: see its log), then BGSAVE";
}

Finding check_persistence(Connection& connection, const ServerFacts& facts,
                          const DoctorSettings& settings, bool failover) {
    Finding finding("persistence", facts.node);
    const auto appendonly = config(connection, "appendonly");
    const auto fsync = config(connection, "appendfsync");
    const auto save = config(connection, "save");
    std::optional<bool> aof;
    if (appendonly) {
        aof = *appendonly == "yes";
    } else if (const auto enabled = facts.info.number("aof_enabled")) {
        aof = *enabled == 1;
    }
    bool loses_nothing = false;
    if (!aof) {
        finding.verdict = Verdict::warn;
        finding.found = fmt::format("unknown ({}, CONFIG refused): a restart may lose "
                                    "leases; redsem notices it and admits nobody for the "
                                    "loss grace (60s)",
                                    info_refused(facts));
    } else if (*aof) {
        if (!fsync) {
            finding.found = "AOF on (appendfsync unknown: CONFIG refused): a crash may lose the "
                            "last writes; redsem notices the restart and admits nobody for the "
                            "loss grace (60s)";
        } else if (*fsync == "always") {
            loses_nothing = true;
            finding.found = "AOF with appendfsync always: a restart loses no lease; the loss "
                            "grace (60s) after it is a precaution, and still guards failovers";
        } else {
            finding.found = fmt::format("AOF with appendfsync {}: a crash may lose the last "
                                        "{}; redsem notices the restart and admits nobody for "
                                        "the loss grace (60s)",
                                        printable(*fsync),
                                        *fsync == "everysec" ? "second of writes" : "writes");
        }
    } else {
        finding.verdict = Verdict::warn;
        if (!save) {
            finding.found = "no AOF, and whether RDB snapshots are taken is unknown (CONFIG "
                            "refused): a restart loses the leases taken since the last snapshot, "
                            "or every lease";
        } else if (!save->empty()) {
            finding.found = "RDB snapshots only: a restart loses the leases taken since the last "
                            "snapshot";
        } else {
            finding.found = "none: a restart loses every lease";
        }
        finding.found += "; redsem notices it and admits nobody for the loss grace (60s); an "
                         "acquire token that nobody renews, with a ttl over 60s, is not covered; "
                         "and the claims of run --once-per go too, so such a job runs again "
                         "(unless --at-most-once)";
        finding.fix = "CONFIG SET appendonly yes (appendfsync always: a restart loses nothing)";
    }
    judge_disk_errors(connection, facts, aof.value_or(false), save, finding);
    // A caller's own shorter grace (it shortens only its own wait) is safe only where no
    // restart and no failover can lose a lease.
    failover = failover || facts.info.number("connected_slaves").value_or(0) > 0;
    if (settings.loss_grace && *settings.loss_grace < k_default_loss_grace &&
        (!loses_nothing || failover)) {
        finding.verdict = Verdict::warn;
        finding.found += fmt::format("; REDSEM_LOSS_GRACE={} is set here: after a {} this "
                                     "caller may be admitted beside a holder the server forgot",
                                     format_duration(*settings.loss_grace),
                                     loses_nothing ? "failover" : "restart or failover");
        finding.fix = (finding.fix.empty() ? "" : finding.fix + "; ") +
                      "unset REDSEM_LOSS_GRACE (a short grace is for a throwaway Redis)";
    }
    return finding;
}

Finding check_replication(Connection& connection, const ServerFacts& facts,
                          const DoctorSettings& settings, bool failover) {
    Finding finding("replication", facts.node);
    long long online = 0;
    std::vector<std::string> notes;
    if (facts.info.empty()) {
        finding.verdict = Verdict::warn;
        finding.found = fmt::format("unknown ({}): --replicas N is checked by each acquire "
                                    "itself (WAIT)",
                                    info_refused(facts));
        return finding;
    }
    const long long connected = facts.info.number("connected_slaves").value_or(0);
    long long worst_lag = 0;
    for (long long i = 0; i < connected; ++i) {
        const std::string replica = facts.info.get(fmt::format("slave{}", i)).value_or("");
        const ServerInfo fields([&] {
            std::string lines = replica;
            std::replace(lines.begin(), lines.end(), ',', '\n');
            std::replace(lines.begin(), lines.end(), '=', ':');
            return lines;
        }());
        const std::string where =
            fmt::format("{}:{}", fields.get("ip").value_or("?"), fields.get("port").value_or("?"));
        const long long lag = fields.number("lag").value_or(0);
        if (fields.get("state") != "online") {
            finding.verdict = Verdict::warn;
            notes.push_back(fmt::format("replica {} is {}", where,
                                        fields.get("state").value_or("in an unknown state")));
            continue;
        }
        ++online;
        worst_lag = std::max(worst_lag, lag);
        if (lag > k_replica_lag_seconds) {
            finding.verdict = Verdict::warn;
            notes.push_back(fmt::format("replica {} is {}s behind", where, lag));
        }
    }
    notes.insert(notes.begin(),
                 fmt::format("{} replica{} online{}", online, online == 1 ? "" : "s",
                             online > 0 ? fmt::format(" (lag up to {}s)", worst_lag) : ""));
    if (online == 0) {
        notes.push_back("--replicas 1 or more fails (69)");
        if (failover) {
            finding.verdict = std::max(finding.verdict, Verdict::warn);
            notes.push_back("a failover has no replica to promote");
            finding.fix = "bring a replica up (or add one)";
        }
    } else {
        notes.push_back(fmt::format(
            "--replicas {} can be met while all are up; after a failover the new master has {} "
            "until the old one re-syncs, so a run --replicas above {} loses its lease then",
            online, online - 1, online - 1));
    }
    // INFO shows min_slaves_good_slaves (the replicas within min-replicas-max-lag) only while
    // min-replicas-to-write is set; CONFIG tells its value.
    const auto required = config(connection, "min-replicas-to-write");
    const auto good = facts.info.number("min_slaves_good_slaves");
    // (Redis refuses writes only while both min-replicas settings are set, as INFO shows.)
    const long long need = !good ? 0 : required ? parse_integer(*required, 0).value_or(0) : 1;
    const long long good_count = good.value_or(online);
    if (need > good_count) {
        finding.verdict = Verdict::unsafe;
        notes.push_back(fmt::format("min-replicas-to-write {} with {} replica{} online within "
                                    "min-replicas-max-lag: Redis refuses every write "
                                    "(NOREPLICAS), so every acquire exits 69",
                                    required ? *required : "set (CONFIG refused)", good_count,
                                    good_count == 1 ? "" : "s"));
        finding.fix = "bring the replicas back, or lower min-replicas-to-write";
    } else if (!required && good) {
        finding.verdict = std::max(finding.verdict, Verdict::warn);
        notes.push_back(fmt::format("min-replicas-to-write is set (CONFIG refused, so its value "
                                    "is unknown) and {} replica{} meet min-replicas-max-lag: "
                                    "with fewer than it asks, every acquire exits 69",
                                    good_count, good_count == 1 ? "" : "s"));
    }
    if (settings.replicas > online) {
        finding.verdict = std::max(finding.verdict, Verdict::warn);
        notes.push_back(fmt::format("REDSEM_REPLICAS={} is set here: every acquire fails (69)",
                                    settings.replicas));
        finding.fix = fmt::format("REDSEM_REPLICAS={} at most", online);
    }
    finding.found = joined(notes);
    return finding;
}

Finding check_clock(Connection& connection, const std::string& node) {
    Finding finding("clock", node);
    using SystemClock = std::chrono::system_clock;
    using Steady = std::chrono::steady_clock;
    using Trip = std::chrono::microseconds;
    Trip best_trip = Trip::max();
    long long skew_ms = 0;
    for (int i = 0; i < k_clock_samples; ++i) {
        const auto sent = Steady::now();
        const auto sent_wall = SystemClock::now();
        const Reply time = connection.call(std::vector<std::string>{"TIME"});
        const auto trip = std::chrono::duration_cast<Trip>(Steady::now() - sent);
        if (trip >= best_trip) {
            continue;
        }
        best_trip = trip;
        const auto seconds = parse_integer(time.at(0).as_string(), 0);
        const auto micros = parse_integer(time.at(1).as_string(), 0, 999'999);
        if (!seconds || !micros) {
            throw InternalError("TIME answered something other than a time");
        }
        const long long server_ms = *seconds * 1000 + *micros / 1000;
        const long long local_ms =
            std::chrono::duration_cast<Milliseconds>((sent_wall + trip / 2).time_since_epoch())
                .count();
        skew_ms = server_ms - local_ms;
    }
    // The skew is known to within half the round trip.
    const long long precision_ms =
        std::max<long long>(5, std::chrono::duration_cast<Milliseconds>(best_trip / 2).count());
    const long long off_ms = std::llabs(skew_ms);
    std::string skew = fmt::format("within {} ms of", precision_ms);
    if (off_ms > precision_ms) {
        skew = fmt::format("{} {}",
                           off_ms < 1000 ? fmt::format("{} ms", off_ms)
                                         : format_duration(Milliseconds{off_ms}),
                           skew_ms > 0 ? "ahead of" : "behind");
    }
    finding.found = fmt::format("round trip {:.2f} ms; the server's clock is {} this machine's",
                                std::chrono::duration<double, std::milli>(best_trip).count(), skew);
    if (best_trip > k_slow_round_trip) {
        finding.verdict = Verdict::warn;
        finding.found += "; a slow round trip leaves a short --ttl little room";
        finding.fix = "run redsem near its Redis, or use a --ttl of a minute or more";
    }
    if (Milliseconds{std::llabs(skew_ms)} > k_clock_skew) {
        finding.verdict = Verdict::warn;
        finding.found += "; leases are timed by the server's clock, but the times redsem shows "
                         "will not line up with this machine's logs";
        finding.fix = "synchronise the clocks (NTP)";
    }
    return finding;
}

// The fix for a refused login; "" for a refusal of something else (an ACL rule: the
// message names the rule to add).
std::string login_fix(const Error& error) {
    const std::string_view what = error.what();
    if (what.find("NOAUTH") != std::string_view::npos) {
        return "give the password (--password-file, $REDSEM_PASSWORD or the URL)";
    }
    if (what.find("without any password configured") != std::string_view::npos) {
        return "this server has no password: give none (or set one: requirepass)";
    }
    if (what.find("WRONGPASS") != std::string_view::npos ||
        what.find("user name or password") != std::string_view::npos ||
        what.find("rejected the password") != std::string_view::npos ||
        what.find("invalid password") != std::string_view::npos) {
        return "check the user name and the password";
    }
    return "";
}

// Whether `error` says that the server cannot be reached or cannot serve now: down, cut off,
// a failover under way, loading its data. (A refused command is a finding of its check.)
bool unreachable(const Error& error) {
    return error.exit_code() == static_cast<int>(ExitCode::unavailable) &&
           error.transience() != Transience::permanent;
}

// Runs one check, turning a refusal or an unexpected reply into a finding of its own; an
// unreachable server ends the report (examine()), unless `several` servers are checked (a
// cluster, one of whose nodes is down): then it is the check's finding too.
template <typename Check>
void attempt(std::vector<Finding>& findings, std::string_view check, const std::string& node,
             Check run, bool several = false) {
    try {
        if constexpr (std::is_same_v<decltype(run()), Finding>) {
            findings.push_back(run());
        } else {
            for (Finding& finding : run()) {
                findings.push_back(std::move(finding));
            }
        }
    } catch (const Error& error) {
        if (unreachable(error) && !several) {
            throw;
        }
        const std::string_view what = error.what();
        findings.emplace_back(std::string(check), node, Verdict::warn,
                              what.find("ERR unknown command") != std::string_view::npos
                                  ? "cannot tell: the server knows no command this check "
                                    "sends (renamed or disabled: see permissions)"
                                  : fmt::format("cannot tell: {}", what));
    }
}

} // namespace

} // namespace doctor

DoctorReport examine(Connection& connection, const DoctorSettings& settings) {
    using namespace doctor;
    DoctorReport report;
    report.target = connection.describe();
    std::vector<Finding>& findings = report.findings;
    const ConnectOptions& options = connection.options();
    try {
        connection.connect();
        // A first answer: a port that accepts but never answers, or speaks something else,
        // is not reached.
        const Reply hello = connection.command(std::vector<std::string>{"HELLO"});
        if (is_error_code(hello, "NOAUTH") || is_error_code(hello, "DENIED")) {
            // A password is needed and none was given; protected mode refuses this host.
            throw_reply_error(hello.text);
        }
    } catch (const Error& error) {
        if (error.exit_code() == static_cast<int>(ExitCode::unavailable)) {
            report.reach = DoctorReport::Reach::unreachable;
            const std::string_view what = error.what();
            const bool protected_mode = what.find("protected mode") != std::string_view::npos;
            const bool auth = what.find("did not accept AUTH") != std::string_view::npos;
            findings.emplace_back("reachable", "", Verdict::unsafe, error.what(),
                                  protected_mode
                                      ? "give the server a password (requirepass or an ACL "
                                        "user), or bind it to the address used"
                                  : auth ? "check that the URL points at Redis; give no password "
                                           "where it needs none, or undo a rename-command of AUTH"
                                         : "check the URL, that the server runs and answers "
                                           "there, and the firewall (rediss:// for a TLS port)");
            return report;
        }
        if (error.exit_code() != static_cast<int>(ExitCode::denied)) {
            throw; // a database the server does not have: a usage error
        }
        // A refused login (77), or a command the connection needs (SELECT: unsafe).
        const bool login = !login_fix(error).empty();
        report.reach = login ? DoctorReport::Reach::denied : DoctorReport::Reach::reached;
        if (!login) {
            findings.emplace_back("reachable", "", Verdict::ok, report.target);
        }
        findings.emplace_back(login ? "reachable" : "permissions", "", Verdict::unsafe,
                              error.what(), login_fix(error));
        return report;
    }
    try {
        findings.emplace_back("reachable", "", Verdict::ok, connection.server());
        const std::string user = options.url.user.value_or("default");
        std::vector<ServerFacts> nodes;
        std::vector<Finding> per_node;
        const bool failover = options.url.kind == RedisUrl::Kind::sentinel;
        std::vector<Finding> about_all; // mode, TLS, the user: asked of the first server
        bool several = false;
        connection.for_each_primary([&](const Endpoint* node) {
            several = node != nullptr;
            ServerFacts facts;
            try {
                facts = gather(connection, options.url.db);
            } catch (const Error& error) {
                if (!unreachable(error) || !several) {
                    throw;
                }
                // A cluster node that is down: the others are still checked.
                per_node.emplace_back("reachable", node->describe(), Verdict::unsafe, error.what(),
                                      "bring the node back, or fail it over");
                return;
            }
            nodes.push_back(facts);
            if (facts.hello.get("mode") == "sentinel") {
                // Not a server that keeps data: nothing else applies.
                attempt(about_all, "mode", "",
                        [&] { return check_mode(connection, facts, options.url); });
                return;
            }
            if (nodes.size() == 1) {
                attempt(
                    about_all, "mode", "",
                    [&] { return check_mode(connection, facts, options.url); }, several);
                attempt(about_all, "tls", "", [&] { return check_tls(options); });
                attempt(
                    about_all, "acl user", "", [&] { return check_user(connection, options); },
                    several);
            }
            const auto check = [&](std::string_view name, auto run) {
                attempt(per_node, name, facts.node, run, several);
            };
            check("version", [&] { return check_version(facts); });
            check("permissions",
                  [&] { return check_permissions(connection, facts, settings.prefix, user); });
            check("eviction", [&] { return check_eviction(facts); });
            check("persistence", [&] {
                return check_persistence(connection, facts, settings, failover || facts.cluster);
            });
            check("replication", [&] {
                return check_replication(connection, facts, settings, failover || facts.cluster);
            });
            check("clock", [&] { return check_clock(connection, facts.node); });
        });
        report.target = connection.describe();
        if (nodes.empty()) {
            throw UnavailableError(fmt::format("no primary of {} answers", report.target));
        }
        // Per-node findings grouped by check, each check's findings in the nodes' order.
        const auto add_per_node = [&](std::string_view check) {
            for (const Finding& finding : per_node) {
                if (finding.check == check) {
                    findings.push_back(finding);
                }
            }
        };
        add_per_node("reachable");
        add_per_node("version");
        findings.insert(findings.end(), about_all.begin(), about_all.end());
        if (nodes.front().hello.get("mode") == "sentinel") {
            return report;
        }
        for (const char* check :
             {"permissions", "eviction", "persistence", "replication", "clock"}) {
            add_per_node(check);
        }
        attempt(
            findings, "keys", "",
            [&] {
                const ServerFacts& first = nodes.front();
                return check_own_keys(connection, settings.prefix, !first.cluster,
                                      first.info.number("uptime_in_seconds"));
            },
            several);
    } catch (const Error& error) {
        if (error.exit_code() == static_cast<int>(ExitCode::denied)) {
            // Refused before any server could be checked (a password the server requires,
            // CLUSTER SLOTS that the user may not run).
            const bool login = !login_fix(error).empty();
            report.reach = login ? DoctorReport::Reach::denied : DoctorReport::Reach::reached;
            findings.emplace_back(login ? "reachable" : "permissions", "", Verdict::unsafe,
                                  error.what(), login_fix(error));
            return report;
        }
        if (!unreachable(error)) {
            throw;
        }
        report.reach = DoctorReport::Reach::unreachable;
        findings.emplace_back("reachable", "", Verdict::unsafe,
                              fmt::format("lost during the checks: {}", error.what()));
    }
    return report;
}

} // namespace redsem

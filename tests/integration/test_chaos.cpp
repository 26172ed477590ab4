// The invariant under load, crashes and skewed clocks, checked by an observer that does not
// trust redsem: every client's command writes its entry and exit times, from the machine's
// real clock, to a log; a killed client's time inside ends when it was killed. Bounded in
// time and count, loopback only.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

constexpr int k_clients = 66; // running at once
#ifdef REDSEM_SANITIZED
// Sanitized binaries are many times slower: give renewals room, so that a client starved of
// CPU is not (correctly) fenced off its slot. Safety is checked the same either way.
constexpr const char* k_ttl = "4s";
#else
constexpr const char* k_ttl = "1s";
#endif
constexpr auto k_chaos_time = 20s; // spawning and killing
constexpr auto k_kill_every = 150ms;
constexpr const char* k_faketime_lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const std::vector<std::string> k_clock_skews{"-1h", "+1h", "+1h x1.05", "-1h x0.95"};

long long now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

struct Client {
    int id = 0;
    std::string semaphore;
    long long limit = 0;
    bool skewed = false;
    std::unique_ptr<Child> process;
    bool killed = false;
    long long killed_at_ns = 0;
    int exit_code = -1;
};

} // namespace

TEST_CASE("64+ clients, SIGKILLs and skewed clocks: never more than the limit inside") {
    const bool have_faketime = std::filesystem::exists(k_faketime_lib);
    if (!have_faketime) {
        WARN("libfaketime is not installed (Debian package faketime): clocks are not skewed");
    }
    RedisServer server;
    const std::string log = server.dir() + "/inside.log";
    // The observer's clock: the real one, whatever the client was given.
    const std::string stamp = "$(env -u LD_PRELOAD -u FAKETIME date +%s%N)";
    const std::map<std::string, long long> limits{{"c1", 1}, {"c3", 3}, {"c10", 10}};

    std::mt19937 random(20261121);
    std::vector<Client> clients;
    std::set<std::size_t> active;
    int next_id = 0;
    auto spawn = [&] {
        Client client;
        client.id = next_id++;
        const auto pick = std::next(limits.begin(), static_cast<long>(random() % limits.size()));
        client.semaphore = pick->first;
        client.limit = pick->second;
        client.skewed = have_faketime && random() % 2 == 0;
        EnvChanges env = env_for(server);
        if (client.skewed) {
            env["LD_PRELOAD"] = k_faketime_lib;
            env["FAKETIME"] = k_clock_skews[random() % k_clock_skews.size()];
            env["FAKETIME_NO_CACHE"] = "1";
            // A sanitized build (CI) refuses a preloaded library unless told it may.
            const char* asan = std::getenv("ASAN_OPTIONS");
            env["ASAN_OPTIONS"] =
                std::string(asan != nullptr ? asan : "") + ":verify_asan_link_order=0";
        }
        const std::string hold = "0.0" + std::to_string(1 + random() % 8); // 10..80ms
        const std::string tag = client.semaphore + " " + std::to_string(client.id);
        const std::string body = "echo \"S " + tag + " " + stamp + "\" >> " + log + "; sleep " +
                                 hold + "; echo \"E " + tag + " " + stamp + "\" >> " + log;
        const std::string n = std::to_string(client.limit);
        if (random() % 2 == 0) {
            client.process = std::make_unique<Child>(
                std::vector<std::string>{"run", client.semaphore, "-n", n, "--ttl", k_ttl, "-q",
                                         "--", "sh", "-c", body},
                env);
        } else {
            client.process = Child::shell("tok=$(" + std::string(REDSEM_BINARY) + " acquire " +
                                              client.semaphore + " -n " + n + " --ttl " + k_ttl +
                                              " -q) || exit 9; " + body + "; " + REDSEM_BINARY +
                                              " release " + client.semaphore + " \"$tok\"",
                                          env);
        }
        clients.push_back(std::move(client));
        active.insert(clients.size() - 1);
    };
    auto reap = [&] {
        for (auto it = active.begin(); it != active.end();) {
            Client& client = clients[*it];
            if (client.process->finished()) {
                client.exit_code = client.process->wait(1s).exit_code;
                it = active.erase(it);
            } else {
                ++it;
            }
        }
    };

    const auto chaos_ends = std::chrono::steady_clock::now() + k_chaos_time;
    auto next_kill = std::chrono::steady_clock::now() + k_kill_every;
    int kills = 0;
    while (std::chrono::steady_clock::now() < chaos_ends) {
        reap();
        while (active.size() < k_clients) {
            spawn();
        }
        if (std::chrono::steady_clock::now() >= next_kill && !active.empty()) {
            auto victim = std::next(active.begin(), static_cast<long>(random() % active.size()));
            Client& client = clients[*victim];
            client.process->signal(SIGKILL);
            client.killed = true;
            client.killed_at_ns = now_ns();
            ++kills;
            next_kill += k_kill_every;
        }
        std::this_thread::sleep_for(5ms);
    }
    // Let every survivor finish: nobody may starve or miss a wake-up.
    const auto give_up = std::chrono::steady_clock::now() + 90s;
    while (!active.empty() && std::chrono::steady_clock::now() < give_up) {
        reap();
        std::this_thread::sleep_for(10ms);
    }
    CHECK(active.empty());

    // The observer: entry and exit times per client.
    std::map<int, long long> entered;
    std::map<int, long long> left;
    std::istringstream lines(read_file(log));
    std::string kind, semaphore;
    int id = 0;
    long long when = 0;
    while (lines >> kind >> semaphore >> id >> when) {
        (kind == "S" ? entered : left)[id] = when;
    }
    int completed = 0;
    int skewed_completed = 0;
    int survivors_failed = 0;
    std::map<std::string, std::vector<std::pair<long long, int>>> events;
    for (const Client& client : clients) {
        const bool in = entered.count(client.id) != 0;
        const bool out = left.count(client.id) != 0;
        if (!client.killed) {
            // Not killed: it ran, left, and exited cleanly.
            if (!in || !out || client.exit_code != 0) {
                ++survivors_failed;
                std::cout << "chaos: client " << client.id << " (" << client.semaphore
                          << (client.skewed ? ", skewed" : "") << ") in=" << in << " out=" << out
                          << " exit=" << client.exit_code << "\n";
            }
        }
        if (in) {
            const long long end = out ? left[client.id] : client.killed_at_ns;
            REQUIRE(end != 0);
            events[client.semaphore].emplace_back(entered[client.id], +1);
            events[client.semaphore].emplace_back(end, -1);
            if (out) {
                ++completed;
                skewed_completed += client.skewed ? 1 : 0;
            }
        }
    }
    CHECK(survivors_failed == 0);
    int violations = 0;
    std::map<std::string, int> most;
    for (auto& [name, timeline] : events) {
        std::sort(timeline.begin(), timeline.end(), [](const auto& a, const auto& b) {
            return a.first != b.first ? a.first < b.first : a.second < b.second;
        });
        int inside = 0;
        for (const auto& [time, delta] : timeline) {
            inside += delta;
            most[name] = std::max(most[name], inside);
            if (inside > limits.at(name)) {
                ++violations;
            }
        }
    }
    CHECK(violations == 0);
    CHECK(most["c1"] == 1);
    CHECK(most["c3"] <= 3);
    CHECK(most["c10"] <= 10);
    // The load really was concurrent, and the chaos really struck (a sanitized build spawns
    // far fewer clients in the same time, hence modest floors).
    CHECK(most["c10"] >= 2);
    CHECK(kills >= 10);
    CHECK(skewed_completed >= (have_faketime ? 10 : 0));

    // After the leases of the killed run out and a gc, nothing of redsem's is left.
    std::this_thread::sleep_for(7s); // the longest TTL: a hand-over nobody collected (6s)
    CHECK(run_redsem({"gc"}, env_for(server)).exit_code == 0);
    Connection admin = server.admin();
    const Reply left_over = admin.call({"KEYS", "redsem:*"});
    std::string names;
    for (const Reply& key : left_over.as_array()) {
        names += key.as_string() + " ";
    }
    INFO("left over: " << names);
    CHECK(left_over.as_array().empty());

    std::cout << "chaos: " << clients.size() << " clients (" << k_clients << " at once), "
              << completed << " completed cycles (" << skewed_completed << " with skewed clocks), "
              << kills << " SIGKILLs, max inside c1/c3/c10 = " << most["c1"] << "/" << most["c3"]
              << "/" << most["c10"] << ", violations " << violations << "\n";
}

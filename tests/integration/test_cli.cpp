// The redsem binary, as users run it, against a private redis-server.
#include <catch2/catch.hpp>

#include "semaphore/semaphore.hpp"
#include "support/helpers.hpp"

#include <csignal>
#include <fmt/format.h>
#include <thread>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

TEST_CASE("acquire prints a token, release frees the slot, a mutex admits one") {
    RedisServer server;
    const auto first = run_redsem({"acquire", "job"}, env_for(server));
    REQUIRE(first.exit_code == 0);
    const std::string token = first.out.substr(0, first.out.find('\n'));
    CHECK(first.out == token + "\n");
    CHECK(token.size() == 32);
    CHECK(first.err.empty());

    const auto second = run_redsem({"acquire", "job", "--wait", "0"}, env_for(server));
    CHECK(second.exit_code == 75);
    CHECK(second.out.empty());
    CHECK(second.err.rfind("redsem: ", 0) == 0);
    CHECK(line_count(second.err) == 1);

    CHECK(run_redsem({"release", "job", token}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"acquire", "job", "-w", "0"}, env_for(server)).exit_code == 0);
}

TEST_CASE("limit N admits N, hands out the lowest free slot and increasing fences") {
    RedisServer server;
    std::vector<nlohmann::json> leases;
    for (int i = 0; i < 3; ++i) {
        leases.push_back(acquire_json(server, {"gpu", "-n", "3"}));
        CHECK(leases.back()["slot"] == i);
        CHECK(leases.back()["limit"] == 3);
        CHECK(leases.back()["ttl_ms"] == 60000);
        CHECK(leases.back()["name"] == "gpu");
    }
    CHECK(leases[0]["fence"].get<long long>() < leases[1]["fence"].get<long long>());
    CHECK(leases[1]["fence"].get<long long>() < leases[2]["fence"].get<long long>());
    CHECK(run_redsem({"acquire", "gpu", "-n", "3", "-w", "0"}, env_for(server)).exit_code == 75);

    const auto released =
        run_redsem({"release", "gpu", leases[1]["token"].get<std::string>()}, env_for(server));
    CHECK(released.exit_code == 0);
    const auto again = acquire_json(server, {"gpu", "-n", "3"});
    CHECK(again["slot"] == 1);
    CHECK(again["fence"].get<long long>() > leases[2]["fence"].get<long long>());
    // deadline is server time: about now + ttl, in ms and ISO-8601
    CHECK(again["deadline"].get<std::string>().size() == 24);
    Connection admin = server.admin();
    const long long server_now_s = std::stoll(admin.call({"TIME"}).at(0).as_string());
    const long long deadline_s = again["deadline_ms"].get<long long>() / 1000;
    CHECK(deadline_s >= server_now_s + 58);
    CHECK(deadline_s <= server_now_s + 61);
}

TEST_CASE("acquire on a full semaphore with --wait 0 exits 75, or the -E code") {
    RedisServer server;
    REQUIRE(run_redsem({"acquire", "x"}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"acquire", "x", "-w", "0"}, env_for(server)).exit_code == 75);
    CHECK(run_redsem({"acquire", "x", "-w", "0", "-E", "3"}, env_for(server)).exit_code == 3);
    CHECK(run_redsem({"acquire", "x", "--wait=0", "--conflict-exit-code", "0"}, env_for(server))
              .exit_code == 0);
    const auto start = std::chrono::steady_clock::now();
    CHECK(run_redsem({"acquire", "x", "-w", "700ms"}, env_for(server)).exit_code == 75);
    CHECK(std::chrono::steady_clock::now() - start >= 700ms);
    // The timed-out waiter left the queue.
    Connection admin = server.admin();
    CHECK(zcard(admin, "redsem:{x}:queue") == 0);
}

TEST_CASE("a different limit conflicts while held and replaces the old one when idle") {
    RedisServer server;
    const auto lease = acquire_json(server, {"deploy", "-n", "2"});
    const auto conflict = run_redsem({"acquire", "deploy", "-n", "3", "-w", "0"}, env_for(server));
    CHECK(conflict.exit_code == 65);
    CHECK(conflict.err.find("limit 2") != std::string::npos);
    CHECK(line_count(conflict.err) == 1);
    // The conflicting call did not sneak in a holder.
    Connection admin = server.admin();
    CHECK(zcard(admin, "redsem:{deploy}:holders") == 1);

    REQUIRE(run_redsem({"release", "deploy", lease["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto relimited = acquire_json(server, {"deploy", "-n", "3"});
    CHECK(relimited["limit"] == 3);
    CHECK(admin.call({"HGET", "redsem:{deploy}:state", "limit"}).as_string() == "3");
}

TEST_CASE("release and renew of a foreign, released or expired token exit 1") {
    RedisServer server;
    const auto lease = acquire_json(server, {"r", "--ttl", "60s"});
    const std::string token = lease["token"];
    const std::string foreign(32, 'a');

    const auto foreign_release = run_redsem({"release", "r", foreign}, env_for(server));
    CHECK(foreign_release.exit_code == 1);
    CHECK(foreign_release.err.rfind("redsem: ", 0) == 0);
    CHECK(run_redsem({"renew", "r", foreign}, env_for(server)).exit_code == 1);
    // The real holder was not touched.
    Connection admin = server.admin();
    CHECK(zcard(admin, "redsem:{r}:holders") == 1);

    CHECK(run_redsem({"renew", "r", token, "--ttl", "2m"}, env_for(server)).exit_code == 0);
    const double deadline =
        std::stod(admin.call({"ZSCORE", "redsem:{r}:holders", token}).as_string());
    CHECK(deadline >= lease["deadline_ms"].get<double>() + 55'000);

    CHECK(run_redsem({"release", "r", token}, env_for(server)).exit_code == 0);
    CHECK(run_redsem({"release", "r", token}, env_for(server)).exit_code == 1);
    CHECK(run_redsem({"renew", "r", token}, env_for(server)).exit_code == 1);

    const auto short_lease = acquire_json(server, {"r", "--ttl", "200ms"});
    std::this_thread::sleep_for(400ms);
    CHECK(run_redsem({"renew", "r", short_lease["token"].get<std::string>()}, env_for(server))
              .exit_code == 1);
    CHECK(run_redsem({"release", "r", short_lease["token"].get<std::string>()}, env_for(server))
              .exit_code == 1);
}

TEST_CASE("renew of a token that is still queued exits 1, says so, and counts no lost lease") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    REQUIRE(run_redsem({"acquire", "rq"}, env).exit_code == 0);
    Child waiter({"acquire", "rq", "-w", "20s"}, env);
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{rq}:queue") == 1; }, 10s));
    const std::string token =
        admin.call({"ZRANGE", "redsem:{rq}:queue", "0", "0"}).at(0).as_string();
    const auto renewed = run_redsem({"renew", "rq", token}, env);
    CHECK(renewed.exit_code == 1);
    CHECK(renewed.err ==
          "redsem: error: that token is waiting for a slot of 'rq', not holding one; "
          "nothing was renewed\n");
    CHECK(zcard(admin, "redsem:{rq}:queue") == 1); // still in its place
    const auto metrics = run_redsem({"status", "rq", "--format", "prometheus"}, env);
    CHECK(metrics.out.find(R"(redsem_lost_total{prefix="redsem",name="rq"} 0)") !=
          std::string::npos);
}

TEST_CASE("an expired holder is reclaimed without a release, by its deadline") {
    RedisServer server;
    Connection admin = server.admin();
    // Times on the server's clock. The waiter must queue before the holder's deadline; a
    // machine too slow to start it in time gets another try.
    bool queued_in_time = false;
    for (int attempt = 0; attempt < 5 && !queued_in_time; ++attempt) {
        const std::string name = "e" + std::to_string(attempt);
        const auto holder = acquire_json(server, {name, "--ttl", "700ms"});
        const long long holder_deadline_ms = holder["deadline_ms"];
        // The waiter queues after this, so its first refresh (k_waiter_refresh, the polling
        // this test rules out) cannot come before started_ms + k_waiter_refresh.
        const long long started_ms = server_time_ms(admin);
        Child waiter({"acquire", name, "-w", "10s", "--json"}, env_for(server));
        wait_until(
            [&] {
                queued_in_time = zcard(admin, "redsem:{" + name + "}:queue") == 1 &&
                                 server_time_ms(admin) < holder_deadline_ms;
                return queued_in_time || server_time_ms(admin) >= holder_deadline_ms;
            },
            10s);
        const auto next = waiter.wait();
        REQUIRE(next.exit_code == 0);
        if (!queued_in_time) {
            continue;
        }
        const auto lease = nlohmann::json::parse(next.out);
        const long long granted_ms =
            lease["deadline_ms"].get<long long>() - lease["ttl_ms"].get<long long>();
        // Woken by the holder's deadline, not by its refresh.
        CHECK(granted_ms >= holder_deadline_ms);
        CHECK(granted_ms < started_ms + k_waiter_refresh.count());
    }
    REQUIRE(queued_in_time);
}

TEST_CASE("five queued waiters are served in arrival order") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"fifo"});
    std::vector<std::unique_ptr<Child>> waiters;
    for (int i = 0; i < 5; ++i) {
        waiters.push_back(
            std::make_unique<Child>(std::vector<std::string>{"acquire", "fifo"}, env_for(server)));
        // Start the next one only once this one is queued, so arrival order is known.
        const auto give_up = std::chrono::steady_clock::now() + 10s;
        while (zcard(admin, "redsem:{fifo}:queue") < i + 1) {
            REQUIRE(std::chrono::steady_clock::now() < give_up);
            std::this_thread::sleep_for(5ms);
        }
    }
    std::string token = holder["token"];
    for (int i = 0; i < 5; ++i) {
        REQUIRE(run_redsem({"release", "fifo", token}, env_for(server)).exit_code == 0);
        const auto line = waiters[i]->wait_for_line(10s);
        REQUIRE(line);
        token = *line;
        // Nobody behind waiter i got a slot before it.
        for (int j = i + 1; j < 5; ++j) {
            CHECK(waiters[j]->out_so_far().empty());
        }
        CHECK(waiters[i]->wait(5s).exit_code == 0);
    }
}

TEST_CASE("a waiter killed with SIGKILL stops blocking the queue within seconds") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"k"});
    Child doomed({"acquire", "k"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{k}:queue") >= 1; }, 10s));
    Child survivor({"acquire", "k"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{k}:queue") >= 2; }, 10s));
    doomed.signal(SIGKILL);
    REQUIRE(run_redsem({"release", "k", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto start = std::chrono::steady_clock::now();
    const auto line = survivor.wait_for_line(30s);
    REQUIRE(line);
    // The dead waiter's claim window (3s) and one refresh of the survivor (1.5s); the margin
    // is for a CI machine building three other trees meanwhile (10s was once too little).
    CHECK(std::chrono::steady_clock::now() - start < 15s);
    CHECK(zcard(admin, "redsem:{k}:queue") == 0);
}

TEST_CASE("SIGTERM or SIGINT while waiting leaves the queue and exits 128+N") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"s"});
    for (const int signal : {SIGTERM, SIGINT, SIGHUP}) {
        Child waiter({"acquire", "s"}, env_for(server));
        REQUIRE(wait_until([&] { return zcard(admin, "redsem:{s}:queue") >= 1; }, 10s));
        waiter.signal(signal);
        const auto result = waiter.wait(5s);
        CHECK(result.exit_code == 128 + signal);
        CHECK(result.out.empty());
        CHECK(zcard(admin, "redsem:{s}:queue") == 0);
        CHECK(zcard(admin, "redsem:{s}:holders") == 1);
    }
}

TEST_CASE("a key of the wrong type is reported and left alone") {
    RedisServer server;
    Connection admin = server.admin();
    admin.call({"SET", "redsem:{w}:holders", "not a zset"});
    const auto acquire = run_redsem({"acquire", "w"}, env_for(server));
    CHECK(acquire.exit_code == 65);
    CHECK(acquire.err.find("redsem:{w}:holders") != std::string::npos);
    CHECK(line_count(acquire.err) == 1);
    const auto release = run_redsem({"release", "w", std::string(32, 'b')}, env_for(server));
    CHECK(release.exit_code == 65);
    CHECK(admin.call({"GET", "redsem:{w}:holders"}).as_string() == "not a zset");
    CHECK(admin.call({"EXISTS", "redsem:{w}:state"}).as_integer() == 0);
}

TEST_CASE("a semaphore's keys have no TTL while anybody holds or waits (nothing can evict "
          "them), and all carry one once nobody does") {
    RedisServer server;
    Connection admin = server.admin();
    const auto holder = acquire_json(server, {"ttl", "-n", "1", "--ttl", "5m"});
    Child waiter({"acquire", "ttl"}, env_for(server));
    REQUIRE(wait_until([&] { return zcard(admin, "redsem:{ttl}:queue") >= 1; }, 10s));
    const auto is_wake_list = [](const std::string& key) {
        return key.find(":wake:") != std::string::npos;
    };
    const Reply in_use = admin.call({"KEYS", "redsem:{ttl}*"});
    CHECK(in_use.as_array().size() >= 6);
    for (const Reply& key : in_use.as_array()) {
        INFO(key.as_string());
        // A waiter's wake list is its own, short-lived; losing it costs a wake-up, no safety.
        CHECK((admin.call({"PTTL", key.as_string()}).as_integer() == -1) !=
              is_wake_list(key.as_string()));
    }
    REQUIRE(run_redsem({"release", "ttl", holder["token"].get<std::string>()}, env_for(server))
                .exit_code == 0);
    const auto handed = waiter.wait(10s);
    REQUIRE(handed.exit_code == 0);
    REQUIRE(run_redsem({"release", "ttl", first_line(handed.out)}, env_for(server)).exit_code == 0);
    const Reply idle = admin.call({"KEYS", "redsem:{ttl}*"});
    CHECK(idle.as_array().size() >= 3);
    for (const Reply& key : idle.as_array()) {
        INFO(key.as_string());
        const long long ttl = admin.call({"PTTL", key.as_string()}).as_integer();
        CHECK(ttl > 0);
        CHECK(ttl <= 36LL * 3600 * 1000); // the horizon: a day and a half at most
    }
    // The one key without a TTL, by design: it must outlive every semaphore to notice lost data.
    CHECK(admin.call({"PTTL", "redsem:epoch"}).as_integer() == -1);
}

TEST_CASE("global options work before and after the subcommand, and the prefix and db apply") {
    RedisServer server;
    server.mark_in_use("team");
    server.mark_in_use("envp");
    Connection admin = server.admin();
    CHECK(run_redsem({"--url", server.socket_url(), "acquire", "g"}).exit_code == 0);
    CHECK(run_redsem({"acquire", "g2", "--url", server.socket_url()}).exit_code == 0);
    CHECK(run_redsem({"acquire", "--prefix", "team", "g3", "-u", server.socket_url()}).exit_code ==
          0);
    CHECK(admin.call({"EXISTS", "team:{g3}:holders"}).as_integer() == 1);
    // Only the command named is built, found after the global options and their values: a
    // value that names a command is still the value.
    server.mark_in_use("run");
    CHECK(run_redsem({"--prefix", "run", "acquire", "g6", "-u", server.socket_url()}).exit_code ==
          0);
    CHECK(admin.call({"EXISTS", "run:{g6}:holders"}).as_integer() == 1);
    CHECK(run_redsem({"acquire", "g4"},
                     {{"REDSEM_URL", server.socket_url()}, {"REDSEM_PREFIX", "envp"}})
              .exit_code == 0);
    CHECK(admin.call({"EXISTS", "envp:{g4}:holders"}).as_integer() == 1);
    // Database 4 is new to redsem on a young server: no grace wanted here.
    CHECK(run_redsem({"acquire", "g5", "--loss-grace", "0"},
                     {{"REDIS_URL", server.socket_url() + "?db=4"}})
              .exit_code == 0);
    CHECK(admin.call({"EXISTS", "redsem:{g5}:holders"}).as_integer() == 0);
    admin.call({"SELECT", "4"});
    CHECK(admin.call({"EXISTS", "redsem:{g5}:holders"}).as_integer() == 1);
}

TEST_CASE("an empty --option= value is that option's value, before and after the command") {
    RedisServer server;
    const auto env = env_for(server);
    // The word after it is not taken as its value.
    const auto acquired = run_redsem({"acquire", "e", "--label=", "-w", "0", "--json"}, env);
    REQUIRE(acquired.exit_code == 0);
    const auto status = run_redsem({"status", "e", "--json"}, env);
    REQUIRE(status.exit_code == 0);
    CHECK(nlohmann::json::parse(status.out)["holders"][0]["label"] == "");
    const auto ran = run_redsem({"run", "e2", "--label=", "-c", "echo hi"}, env);
    CHECK(ran.exit_code == 0);
    CHECK(ran.out == "hi\n");
    // An empty value the option cannot take is refused as such, not as a missing command.
    const auto url = run_redsem({"--url=", "status"}, env);
    CHECK(url.exit_code == 64);
    CHECK(url.err.find("invalid Redis URL") != std::string::npos);
    const auto prefix = run_redsem({"--prefix=", "status"}, env);
    CHECK(prefix.exit_code == 64);
    CHECK(prefix.err.find("the key prefix is empty") != std::string::npos);
    // The command's own words are its own.
    const auto child = run_redsem({"run", "e3", "printf", "%s|", "--label=", "x"}, env);
    CHECK(child.exit_code == 0);
    CHECK(child.out == "--label=|x|");
}

TEST_CASE("output that cannot be written: acquire gives the slot back and exits 74, listings "
          "exit 74, a reader that went away ends them quietly") {
    RedisServer server;
    const auto env = env_for(server);
    EnvChanges shell_env = env;
    shell_env["REDSEM"] = redsem_binary();
    Connection admin = server.admin();
    REQUIRE(run_redsem({"acquire", "other"}, env).exit_code == 0);
    for (const char* redirect : {">/dev/full", ">&-"}) {
        INFO(redirect);
        const ProcessResult full =
            Child::shell(std::string("exec \"$REDSEM\" acquire full -w 0 ") + redirect, shell_env)
                ->wait();
        CHECK(full.exit_code == 74);
        CHECK(full.err.find("redsem: error: cannot write the token to standard output") == 0);
        CHECK(full.err.find("the slot was given back") != std::string::npos);
        CHECK(zcard(admin, "redsem:{full}:holders") == 0);
    }
    // A keeper (--while-pid) stops with the slot given back.
    const ProcessResult kept = Child::shell("exec \"$REDSEM\" acquire kept --while-pid $$ -w 0 "
                                            ">/dev/full",
                                            shell_env)
                                   ->wait();
    CHECK(kept.exit_code == 74);
    CHECK(zcard(admin, "redsem:{kept}:holders") == 0);
    // The pipe's reader went away before the token came: given back too.
    // (The writer starts only once the reader has closed its end, within 10s.)
    const ProcessResult piped =
        Child::shell("d=$(mktemp -d); { for i in $(seq 1000); do [ -e \"$d/closed\" ] && break; "
                     "sleep 0.01; done; \"$REDSEM\" acquire piped -w 0; echo \"status=$?\" >&2; "
                     "} | (exec 0<&-; touch \"$d/closed\"; sleep 1); rm -r \"$d\"",
                     shell_env)
            ->wait();
    CHECK(piped.err.find("the slot was given back") != std::string::npos);
    CHECK(piped.err.find("status=74\n") != std::string::npos);
    CHECK(zcard(admin, "redsem:{piped}:holders") == 0);

    const ProcessResult listing =
        Child::shell("exec \"$REDSEM\" status >/dev/full", shell_env)->wait();
    CHECK(listing.exit_code == 74);
    CHECK(listing.err ==
          "redsem: error: cannot write to standard output (No space left on device)\n");
    const ProcessResult help =
        Child::shell("exec \"$REDSEM\" --help >/dev/full", shell_env)->wait();
    CHECK(help.exit_code == 74);
    // A closed pipe: the listing ends quietly, with its own status.
    const ProcessResult closed =
        Child::shell("{ \"$REDSEM\" status other; echo \"status=$?\" >&2; } | "
                     "(exec 0<&-; sleep 1)",
                     shell_env)
            ->wait();
    CHECK(closed.err == "status=0\n");
}

TEST_CASE("help goes to stdout and exits 0, and the version names hiredis") {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                                 {"acquire", "--help"},
                                                 {"release", "--help"},
                                                 {"renew", "--help"}}) {
        const auto help = run_redsem(args);
        CHECK(help.exit_code == 0);
        CHECK(help.out.find("Usage:") != std::string::npos);
        CHECK(help.err.empty());
    }
    // No command named before the options: every command is built, and --help lists them all.
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--help"}, {"--prefix", "p", "--help"}}) {
        const auto overview = run_redsem(args);
        for (const char* command :
             {"acquire", "release", "renew", "run", "status", "limit", "log", "gc"}) {
            INFO(command);
            CHECK(overview.out.find(std::string("\n  ") + command + " ") != std::string::npos);
        }
    }
    CHECK(run_redsem({"--help", "acquire"}).out.find("Usage: redsem acquire") != std::string::npos);
    const auto version = run_redsem({"--version"});
    CHECK(version.exit_code == 0);
    CHECK(version.out.find("redsem 0.") == 0);
    CHECK(version.out.find("hiredis 0.14") != std::string::npos);
    CHECK(version.out.find("TLS: OpenSSL") != std::string::npos);
}

TEST_CASE("bad input is a usage error: one line on stderr, exit 64, nothing written") {
    RedisServer server;
    const std::string token(32, 'c');
    const std::vector<std::vector<std::string>> cases{
        {"acquire", "x", "-n", "0"},
        {"acquire", "x", "-n", "-1"},
        {"acquire", "x", "-n", "100001"},
        {"acquire", "x", "-n", "abc"},
        {"acquire", "x", "-n", "1e3"},
        {"acquire", "x", "-n", "99999999999999999999999"},
        {"acquire", "x", "--ttl", "0"},
        {"acquire", "x", "--ttl", "0.05"},
        {"acquire", "x", "--ttl", "50ms"},
        {"acquire", "x", "--ttl", "soon"},
        {"acquire", "x", "--ttl", "-5s"},
        {"acquire", "x", "--ttl", "400d"},
        {"acquire", "x", "--wait", "forever"},
        {"acquire", "x", "-E", "256"},
        {"acquire", "x", "-E", "abc"},
        {"acquire", ""},
        {"acquire", std::string(201, 'n')},
        {"acquire", "a{b}"},
        {"acquire", "a b"},
        {"acquire", "a\nb"},
        {"acquire", "\xff\xfe"},
        {"acquire", "x", "--url", "http://localhost"},
        {"acquire", "x", "--url", "redis://host:99999"},
        {"acquire", "x", "--url", "nonsense"},
        {"acquire", "x", "--connect-timeout", "0"},
        {"acquire", "x", "--prefix", ""},
        {"acquire", "x", "--prefix", "a}"},
        {"acquire", "x", "--bogus"},
        {"acquire"},
        {"acquire", "x", "y"},
        {"release", "x"},
        {"release", "x", "not-a-token"},
        {"renew", "x", token, "--ttl", "0"},
        {"frobnicate"},
        {},
    };
    for (const auto& args : cases) {
        std::string shown;
        for (const auto& arg : args) {
            shown += "[" + arg + "] ";
        }
        INFO(shown);
        const auto result = run_redsem(args, env_for(server));
        CHECK(result.exit_code == 64);
        CHECK(result.out.empty());
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(line_count(result.err) <= 2); // the error, and "Try 'redsem ... --help'."
    }
    Connection admin = server.admin();
    CHECK(admin.call({"KEYS", "*{*"}).as_array().empty());
}

TEST_CASE("the mistakes of new users get the message that helps: flock's -n, -x and -s, a "
          "missing NAME, "
          "a command line as one word, a URL without scheme, a database the server lacks") {
    RedisServer::Options tcp;
    tcp.tcp = true;
    RedisServer server(tcp);
    const auto env = env_for(server);
    const std::string port = std::to_string(server.port());
    struct Case {
        std::vector<std::string> args;
        int exit_code;
        std::string says;
    };
    const std::vector<Case> cases{
        // Before: "no command given" and "missing NAME".
        {{"run", "-n", "nightly", "./backup.sh"}, 64, "use -w 0"},
        {{"acquire", "-n", "nightly"}, 64, "use -w 0"},
        {{"acquire", "x", "-n", "0"}, 64, "'0' is not a whole number from 1 to"},
        // Before: "unknown option '--'" (issue 52).
        {{"run", "-x", "job", "--", "true"}, 64, "-x is flock's exclusive lock"},
        {{"run", "-e", "job", "true"}, 64, "use --exclusive"},
        {{"run", "-s", "job", "--", "true"}, 64, "-s is flock's shared lock; here the limit"},
        {{"run", "job", "--shared", "true"}, 64, "-n N lets N hold it at once"},
        {{"acquire", "-x", "job"}, 64, "use --exclusive"},
        // Before: "'hi': command not found" alone.
        {{"run", "echo", "hi"}, 127, "'echo' was taken as the semaphore's NAME"},
        {{"run", "job", "echo hi"}, 127, "use -c 'echo hi'"},
        {{"-u", "127.0.0.1:" + port, "status"}, 64, "did you mean 'redis://127.0.0.1:" + port},
        {{"-u", "/tmp/x.sock", "status"}, 64, "did you mean 'unix:///tmp/x.sock'"},
        // Before: 64 and "Try --help".
        {{"-u", "redis://127.0.0.1:" + port + "/99", "status", "x"}, 69, "has no database 99"},
        {{"-u", "redis://127.0.0.1:" + port + "/99", "run", "x", "--", "true"},
         69,
         "has no database 99"},
    };
    for (const Case& each : cases) {
        const auto result = run_redsem(each.args, env);
        INFO(fmt::format("{}", fmt::join(each.args, " ")));
        INFO(result.err);
        CHECK(result.exit_code == each.exit_code);
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(result.err.find(each.says) != std::string::npos);
        CHECK(line_count(result.err) == (each.exit_code == 64 ? 2U : 1U));
    }
    const auto exclusive = run_redsem({"run", "-x", "job", "--", "true"}, env);
    CHECK(exclusive.err.find("'--'") == std::string::npos);
    CHECK(exclusive.err.ends_with("\nTry 'redsem run --help'.\n"));
    // A password in a URL without scheme is never echoed back.
    const auto secret = run_redsem({"-u", "user:hunter2@127.0.0.1:" + port, "status"}, env);
    CHECK(secret.exit_code == 64);
    CHECK(secret.err.find("hunter2") == std::string::npos);
    CHECK(server.admin().call({"KEYS", "*{x}*"}).as_array().empty()); // nothing held or queued
}

TEST_CASE("off a terminal a wait is told in lines: when queued with the holders, and the "
          "holders again on giving up, and -q says nothing") {
    RedisServer server;
    const auto env = env_for(server);
    const auto holder = acquire_json(server, {"told", "--label", "deploy #41"});
    // stderr into stdout, to see the line before the release: it names the holders as they
    // are when it is written (after the release, the waiter itself).
    auto waiter = Child::shell("exec '" + redsem_binary() + "' acquire told -w 60s 2>&1", env);
    const std::optional<std::string> told = waiter->wait_for_line(20s);
    REQUIRE(told);
    REQUIRE(run_redsem({"release", "told", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    const auto waited = waiter->wait(20s);
    INFO(waited.out);
    REQUIRE(waited.exit_code == 0);
    // Before: nothing at all while waiting off a terminal. (The line, then the token.)
    CHECK(line_count(waited.out) == 2);
    // A new semaphore: no holds to estimate the wait from, and it says so.
    CHECK(told->rfind("redsem: waiting for 'told': number 1 of 1 in the queue, 1/1 held, no "
                      "estimate yet (no holds in the history); held by ",
                      0) == 0);
    CHECK(told->find(fmt::format("(pid {}, 'deploy #41', for ", getpid())) != std::string::npos);

    // Before: "no slot of 'told' free within 1s" without a word of who held it.
    const auto gave_up = run_redsem({"acquire", "told", "-w", "1s"}, env);
    INFO(gave_up.err);
    CHECK(gave_up.exit_code == 75);
    CHECK(gave_up.err.find("redsem: no slot of 'told' free within 1s; held by ") !=
          std::string::npos);
    const auto now = run_redsem({"run", "told", "-w", "0", "--", "true"}, env);
    CHECK(now.exit_code == 75);
    CHECK(now.err.rfind("redsem: no slot of 'told' free now; held by ", 0) == 0);
    CHECK(line_count(now.err) == 1);

    const auto quiet = run_redsem({"acquire", "told", "-w", "1s", "-q"}, env);
    CHECK(quiet.exit_code == 75);
    CHECK(quiet.err.empty());
}

TEST_CASE("every subcommand tells a missing password the same way, run included (not as a "
          "protocol error)") {
    RedisServer::Options options;
    options.extra_args = {"--requirepass", "pw-needed"};
    options.admin_password = "pw-needed";
    RedisServer server(options);
    const auto env = env_for(server);
    for (const std::vector<std::string>& args : {std::vector<std::string>{"run", "x", "--", "true"},
                                                 {"acquire", "x"},
                                                 {"status", "x"},
                                                 {"status"},
                                                 {"gc"},
                                                 {"log", "x"}}) {
        const auto result = run_redsem(args, env);
        INFO(fmt::format("{}", fmt::join(args, " ")) << ": " << result.err);
        CHECK(result.exit_code == 77);
        CHECK(result.err.rfind("redsem: error: Redis requires a password: use --password-file, "
                               "set REDSEM_PASSWORD, or put it in the URL (NOAUTH",
                               0) == 0);
        CHECK(result.err.find("Protocol error") == std::string::npos); // before: run's
        CHECK(line_count(result.err) == 1);
    }
}

TEST_CASE("acquire --max-hold: no renewal moves the lease past its grant plus the bound, and "
          "renew says so once the bound is reached") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    // --ttl is at most the bound: the first lease already ends with it.
    const auto lease = acquire_json(server, {"mh", "--max-hold", "3s", "--ttl", "1m"});
    const std::string token = lease["token"];
    CHECK(lease["ttl_ms"] == 3000);
    const long long granted = lease["deadline_ms"].get<long long>() - 3000;
    const long long bound = granted + 3000;
    const auto deadline = [&] {
        return std::stoll(admin.call({"ZSCORE", "redsem:{mh}:holders", token}).as_string());
    };
    // A renewal that would reach past the bound stops at it, says so, and succeeds.
    const auto capped = run_redsem({"renew", "mh", token, "--ttl", "10s"}, env);
    CHECK(capped.exit_code == 0);
    CHECK(capped.err.starts_with("redsem: the lease of 'mh' ends at "));
    CHECK(capped.err.ends_with(", as acquire --max-hold bounds it; no renewal moves it "
                               "further\n"));
    CHECK(line_count(capped.err) == 1);
    CHECK(deadline() == bound);
    // Once the bound passed, the lease is gone like any that ran out.
    REQUIRE(wait_until([&] { return server_time_ms(admin) > bound; }, 10s));
    CHECK(run_redsem({"renew", "mh", token}, env).exit_code == 1);
    CHECK(zcard(admin, "redsem:{mh}:holders") == 0);
    // Within the bound a renewal is an ordinary one, and says nothing.
    const auto roomy = acquire_json(server, {"mh2", "--max-hold", "1h", "--ttl", "1s"});
    const auto renewed =
        run_redsem({"renew", "mh2", roomy["token"].get<std::string>(), "--ttl", "5s"}, env);
    CHECK(renewed.exit_code == 0);
    CHECK(renewed.err.empty());
    // Bad bounds are usage errors, and take no slot.
    for (const std::string bad : {"0", "50ms", "soon", "-1s"}) {
        INFO(bad);
        const auto refused = run_redsem({"acquire", "mh3", "--max-hold", bad}, env);
        CHECK(refused.exit_code == 64);
        CHECK(refused.err.starts_with("redsem: error: --max-hold"));
    }
    CHECK(zcard(admin, "redsem:{mh3}:holders") == 0);
}

TEST_CASE("acquire --max-hold with --while-pid: the keeper's renewals stop at the bound, and "
          "PID gets the --on-lost signal") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    const auto holder =
        Child::shell("trap 'echo got TERM; exit 0' TERM; while :; do sleep 0.1; done");
    // A first lease of 2s, which the keeper renews every third of it, on a loaded machine too.
    const auto lease = acquire_json(server, {"kept", "--max-hold", "4s", "--ttl", "2s",
                                             "--while-pid", std::to_string(holder->pid())});
    const long long bound = lease["deadline_ms"].get<long long>() - 2000 + 4000;
    // The keeper renews past the first lease (2s), then no further than the bound.
    REQUIRE(wait_until([&] { return server_time_ms(admin) > bound - 1000; }, 10s));
    CHECK(zcard(admin, "redsem:{kept}:holders") == 1);
    const auto result = holder->wait(15s);
    CHECK(result.out == "got TERM\n");
    CHECK(server_time_ms(admin) >= bound);
}

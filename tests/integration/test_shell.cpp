// Safe in a shell: how `run` takes its command, a slot held for a process's life (acquire
// --while-pid), live limits, and `status`, `renew` and `release` telling the truth.
#include <catch2/catch.hpp>

#include "semaphore/keys.hpp"
#include "semaphore/semaphore.hpp"
#include "support/helpers.hpp"
#include "util/table.hpp"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

json status_json(const RedisServer& server, const std::vector<std::string>& names = {}) {
    std::vector<std::string> args{"status", "--json"};
    args.insert(args.end(), names.begin(), names.end());
    const auto result = run_redsem(args, env_for(server));
    if (result.exit_code != 0) {
        throw std::runtime_error("status failed: " + result.err);
    }
    return json::parse(result.out);
}

long long holders_of(const RedisServer& server, const std::string& name) {
    return status_json(server, {name})["holders"].size();
}

// The processes with every word of `words` among their arguments (whole arguments: this test
// binary's own argument, the test's name, may contain them as text), from /proc: the
// observer of what is left running, independent of redsem.
std::vector<int> processes_with(const std::vector<std::string>& words) {
    std::vector<int> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string pid = entry.path().filename();
        if (!std::all_of(pid.begin(), pid.end(), ::isdigit)) {
            continue;
        }
        const std::string cmdline = read_file(entry.path().string() + "/cmdline");
        std::vector<std::string> argv;
        for (std::size_t start = 0; start < cmdline.size();) {
            const std::size_t end = std::min(cmdline.find('\0', start), cmdline.size());
            argv.push_back(cmdline.substr(start, end - start));
            start = end + 1;
        }
        const bool all = std::all_of(words.begin(), words.end(), [&](const std::string& word) {
            return std::find(argv.begin(), argv.end(), word) != argv.end();
        });
        if (all && !process_gone(std::stoi(pid))) {
            found.push_back(std::stoi(pid));
        }
    }
    return found;
}

bool no_keeper_of(const std::string& name) {
    return wait_until([&] { return processes_with({"acquire", name, "--while-pid"}).empty(); }, 5s);
}

// A pid that no process has: one of a child that has been reaped.
int dead_pid() {
    const pid_t pid = fork();
    if (pid == 0) {
        _exit(0);
    }
    waitpid(pid, nullptr, 0);
    return pid;
}

} // namespace

// --- 1. run takes the command's options as the command's ---------------------------------

TEST_CASE("run: the first word after NAME starts the command, whatever follows it") {
    RedisServer server;
    const auto env = env_for(server);
    // grep's -q is grep's: nothing printed, and its status is the result.
    const auto grep = run_redsem({"run", "job2", "grep", "-q", "root", "/etc/passwd"}, env);
    CHECK(grep.exit_code == 0);
    CHECK(grep.out.empty());
    // echo's -n is echo's, and the limit of job stays what it was.
    const auto echo = run_redsem({"run", "job", "echo", "-n", "3"}, env);
    CHECK(echo.exit_code == 0);
    CHECK(echo.out == "3");
    CHECK(run_redsem({"limit", "job"}, env).out == "1\n");
    // Arguments that look like every redsem option reach the command untouched.
    const std::vector<std::string> lookalikes{
        "-n", "2", "-w",      "0", "-q", "--ttl", "1s", "--url", "x",     "--json",
        "-c", "y", "--label", "z", "-E", "3",     "--", "-h",    "--help"};
    std::vector<std::string> args{"run", "look", "printf", "%s|"};
    args.insert(args.end(), lookalikes.begin(), lookalikes.end());
    const auto printf = run_redsem(args, env);
    CHECK(printf.exit_code == 0);
    std::string expected;
    for (const auto& word : lookalikes) {
        expected += word + "|";
    }
    CHECK(printf.out == expected);
    // redsem's own options before NAME and between NAME and the command are redsem's.
    const auto own = run_redsem({"run", "-q", "own", "-n", "2", "--ttl=5s", "-w", "5s", "--label",
                                 "mine", "sh", "-c", "echo $REDSEM_LIMIT"},
                                env);
    CHECK(own.exit_code == 0);
    CHECK(own.out == "2\n");
    CHECK(run_redsem({"run", "-qn3", "grouped", "sh", "-c", "echo $REDSEM_LIMIT"}, env).out ==
          "3\n");
}

TEST_CASE("run: -- still works, and is needed for a command that starts with '-'") {
    RedisServer server;
    const auto env = env_for(server);
    const auto dashed = run_redsem({"run", "d", "--", "echo", "-n", "x"}, env);
    CHECK(dashed.exit_code == 0);
    CHECK(dashed.out == "x");
    const auto options_then_dashes =
        run_redsem({"run", "d", "-w", "5s", "--", "printf", "%s", "--"}, env);
    CHECK(options_then_dashes.out == "--");
    // A command named like an option: after --, it is the command (and it does not exist).
    const auto odd = run_redsem({"run", "d", "--", "-no-such-command"}, env);
    CHECK(odd.exit_code == 127);
    // Without --, it is an unknown option of redsem's.
    const auto unknown = run_redsem({"run", "d", "-Z", "echo"}, env);
    CHECK(unknown.exit_code == 64);
    CHECK(unknown.err.rfind("redsem: error: unknown option '-Z'", 0) == 0);
    // -c with a command after NAME too is refused.
    CHECK(run_redsem({"run", "d", "-c", "true", "echo"}, env).exit_code == 64);
}

TEST_CASE("run --help and the man page say where the command starts") {
    const auto help = run_redsem({"run", "--help"});
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("the first word after NAME that is not one of them starts COMMAND") !=
          std::string::npos);
    const std::string man = read_file(source_dir() + "/man/redsem.1");
    CHECK(man.find("first word after") != std::string::npos);
}

// --- 5. fail fast, speak clearly ------------------------------------------------------------

TEST_CASE("run: a command that cannot run fails with 127/126 before queueing") {
    RedisServer server;
    const auto env = env_for(server);
    // The only slot is held: a run that queued would wait for ever.
    const auto holder = acquire_json(server, {"busy"});
    const auto started = Clock::now();
    const auto missing = run_redsem({"run", "busy", "no-such-command-redsem"}, env);
    CHECK(missing.exit_code == 127);
    CHECK(missing.err == "redsem: error: 'no-such-command-redsem': command not found\n");
    const auto not_executable = run_redsem({"run", "busy", "/etc/passwd"}, env);
    CHECK(not_executable.exit_code == 126);
    const auto directory = run_redsem({"run", "busy", "/tmp"}, env);
    CHECK(directory.exit_code == 126);
    const auto no_file = run_redsem({"run", "busy", "/no/such/file"}, env);
    CHECK(no_file.exit_code == 127);
    // A script whose #! interpreter is missing: found at once too, by path and on $PATH.
    Scratch scratch;
    const std::string script = scratch.path("orphan-script");
    {
        std::ofstream out(script);
        out << "#!/no/such/interpreter -e\necho never\n";
    }
    ::chmod(script.c_str(), 0755);
    EnvChanges on_path = env;
    on_path["PATH"] = scratch.dir() + ":/usr/bin:/bin";
    for (const auto& [command, changes] :
         {std::pair{script, env}, std::pair{std::string("orphan-script"), on_path}}) {
        const auto orphan = run_redsem({"run", "busy", command}, changes);
        CHECK(orphan.exit_code == 127);
        CHECK(orphan.err == "redsem: error: cannot run '" + command +
                                "': its interpreter '/no/such/interpreter' (the #! line) is "
                                "missing or not executable\n");
    }
    CHECK(Clock::now() - started < 10s); // none of them waited for the slot
    const json status = status_json(server, {"busy"});
    CHECK(status["holders"].size() == 1);
    CHECK(status["waiters"].empty());
}

TEST_CASE("unknown commands and options are named, with the closest match") {
    const auto command = run_redsem({"acqire", "x"});
    CHECK(command.exit_code == 64);
    CHECK(command.err.rfind("redsem: error: unknown command 'acqire' (did you mean 'acquire'?)",
                            0) == 0);
    const auto option = run_redsem({"run", "job", "--limt", "3", "echo"});
    CHECK(option.exit_code == 64);
    CHECK(option.err.rfind("redsem: error: unknown option '--limt' (did you mean '--limit'?)", 0) ==
          0);
    const auto global = run_redsem({"status", "--urll", "x"});
    CHECK(global.err.rfind("redsem: error: unknown option '--urll' (did you mean '--url'?)", 0) ==
          0);
    const auto far = run_redsem({"status", "--zzzzzzzz"});
    CHECK(far.err.rfind("redsem: error: unknown option '--zzzzzzzz'\n", 0) == 0);
    // Every usage message is in one style: no capital after "error: ".
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"run"},
                                               {},
                                               {"acquire"},
                                               {"acquire", "x", "--ttl"},
                                               {"release", "x"},
                                               {"run", "x", "--on-lost", "y"},
                                               {"status", "a", "extra", "--x"}}) {
        const auto result = run_redsem(args);
        CHECK(result.exit_code == 64);
        REQUIRE(result.err.size() > 16);
        INFO(result.err);
        CHECK(result.err.rfind("redsem: error: ", 0) == 0);
        CHECK(std::isupper(static_cast<unsigned char>(result.err[15])) == 0);
    }
    CHECK(
        run_redsem({"acquire", "x", "--ttl"}).err.rfind("redsem: error: --ttl needs a value", 0) ==
        0);
}

TEST_CASE("each option's value is checked as it is parsed, with its own message, before NAME") {
    // No server: a bad value is refused before anything connects. NAME is bad too ('b{'), so
    // a message about the option shows that options are checked first.
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"acquire", "b{", "-n", "nightly"},
         "--limit: 'nightly' is not a whole number from 1 to "
         "100000: -n is the limit here"},
        {{"acquire", "b{", "--slots", "0"}, "--slots: '0' is not a whole number from 1 to 100000"},
        {{"acquire", "b{", "--ttl", "10ms"}, "--ttl: '10ms' is too short"},
        {{"acquire", "b{", "-w", "soon"}, "--wait: invalid duration 'soon'"},
        {{"acquire", "b{", "-E", "300"}, "--conflict-exit-code: '300' is not an exit code"},
        {{"acquire", "b{", "--loss-grace", "1h"}, "--loss-grace: '1h' is longer than 1m"},
        {{"acquire", "b{", "--replicas", "99"}, "--replicas: '99' is not a whole number"},
        {{"acquire", "b{", "--while-pid", "0"}, "--while-pid: '0' is not a process id"},
        {{"acquire", "b{", "--on-lost", "BOGUS"}, "--on-lost: 'BOGUS' is not a signal"},
        {{"renew", "b{", "tok", "--ttl", "x"}, "--ttl: invalid duration 'x'"},
        {{"limit", "b{", "0"}, "N: '0' is not a whole number from 1 to 100000"},
        {{"limit", "b{", "--history", "-1"}, "--history: '-1' is not a whole number of events"},
        {{"pause", "b{", "--for", "0"}, "--for must be longer than 0"},
        {{"drain", "b{", "-w", "q"}, "--wait: invalid duration 'q'"},
        {{"run", "b{", "--on-lost", "explode", "--", "true"},
         "--on-lost: 'explode' is not 'term' or 'ignore'"},
        {{"run", "b{", "--once-per", "1ms", "--", "true"},
         "--once-per: '1ms' is not from 1s to "
         "366d"},
        {{"run", "b{", "--kill-after", "later", "--", "true"}, "--kill-after: invalid duration"},
        {{"run", "b{", "--lost-exit-code", "256", "--", "true"}, "--lost-exit-code: '256' is not"},
        {{"--connect-timeout", "0", "status"}, "--connect-timeout must be longer than 0"},
    };
    for (const auto& [args, message] : cases) {
        const auto result = run_redsem(args);
        INFO(result.err);
        CHECK(result.exit_code == 64);
        CHECK(first_line(result.err).rfind("redsem: error: " + message, 0) == 0);
    }
}

TEST_CASE("subcommand --help names the global options and points at redsem(1)") {
    for (const char* command : {"acquire", "release", "renew", "run", "status", "gc", "limit"}) {
        const auto help = run_redsem({command, "--help"});
        INFO(command);
        CHECK(help.exit_code == 0);
        CHECK(help.out.find("--url") != std::string::npos);
        CHECK(help.out.find("--connect-timeout") != std::string::npos);
        CHECK(help.out.find("redsem(1)") != std::string::npos);
        CHECK(help.out.find("README") == std::string::npos);
    }
}

TEST_CASE("--help off a terminal fits 80 columns, and run's usage shows both its forms") {
    for (const char* command :
         {"", "acquire", "release", "renew", "run", "status", "limit", "log", "gc", "doctor"}) {
        const auto help = run_redsem(*command != '\0' ? std::vector<std::string>{command, "--help"}
                                                      : std::vector<std::string>{"--help"});
        INFO(command);
        REQUIRE(help.exit_code == 0);
        std::istringstream lines(help.out);
        for (std::string line; std::getline(lines, line);) {
            INFO(line);
            // Before: lines of up to 435 columns. A word longer than a line (the sentinel URL's
            // form) is the only exception.
            const bool one_word =
                line.find(' ', line.find_first_not_of(' ')) == std::string::npos ||
                line.find("redis-sentinel://") != std::string::npos;
            CHECK((display_width(line) <= 80 || one_word));
        }
    }
    const auto run = run_redsem({"run", "--help"});
    CHECK(run.out.find("Usage: redsem run [OPTIONS] NAME [--] COMMAND [ARGS...]\n"
                       "       redsem run [OPTIONS] NAME -c CMDLINE\n") != std::string::npos);
}

TEST_CASE("a server that accepts connections but never answers: 69 within --connect-timeout") {
    // A listening socket nobody accepts from: the kernel completes the TCP handshake.
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(listener >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(listen(listener, 64) == 0);
    socklen_t length = sizeof(address);
    getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
    const std::string url = "redis://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"acquire", "x", "-w", "0"}, {"status"}, {"limit", "x"}, {"run", "x", "true"}}) {
        std::vector<std::string> all{"--url", url, "--connect-timeout", "1s"};
        all.insert(all.end(), args.begin(), args.end());
        const auto started = Clock::now();
        const auto result = run_redsem(all);
        const auto took = Clock::now() - started;
        INFO(args.front());
        CHECK(result.exit_code == 69);
        CHECK(result.err.find("did not answer within 1s (--connect-timeout)") != std::string::npos);
        CHECK(took >= 900ms);
        CHECK(took < 4s); // 1s and a margin for a loaded machine; it used to be over 5s
    }
    SECTION("$REDSEM_CONNECT_TIMEOUT sets it; --connect-timeout wins over it") {
        const auto started = Clock::now();
        const auto from_env =
            run_redsem({"--url", url, "status"}, {{"REDSEM_CONNECT_TIMEOUT", "1s"}});
        CHECK(from_env.exit_code == 69);
        CHECK(from_env.err.find("did not answer within 1s") != std::string::npos);
        CHECK(Clock::now() - started < 4s);
        const auto both = run_redsem({"--url", url, "--connect-timeout", "500ms", "status"},
                                     {{"REDSEM_CONNECT_TIMEOUT", "1h"}});
        CHECK(both.exit_code == 69);
        CHECK(both.err.find("did not answer within 500ms") != std::string::npos);
        const auto bad = run_redsem({"--url", url, "status"}, {{"REDSEM_CONNECT_TIMEOUT", "soon"}});
        CHECK(bad.exit_code == 64);
        CHECK(bad.err.rfind("redsem: ", 0) == 0);
        CHECK(bad.err.find("$REDSEM_CONNECT_TIMEOUT") != std::string::npos);
    }
    close(listener);
}

// --- 3. limits that change while in use -------------------------------------------------------

TEST_CASE("limit: print, set, and acquire without -n uses the stored limit") {
    RedisServer server;
    const auto env = env_for(server);
    CHECK(run_redsem({"limit", "pool"}, env).out == "1\n");
    const json fresh = json::parse(run_redsem({"limit", "pool", "--json"}, env).out);
    CHECK(fresh["stored"] == false);
    CHECK(fresh["limit"] == 1);
    const auto set = run_redsem({"limit", "pool", "3"}, env);
    CHECK(set.exit_code == 0);
    CHECK(set.out.empty());
    CHECK(run_redsem({"limit", "pool"}, env).out == "3\n");
    for (int i = 0; i < 3; ++i) {
        CHECK(acquire_json(server, {"pool", "-w", "0"})["limit"] == 3);
    }
    CHECK(run_redsem({"acquire", "pool", "-w", "0"}, env).exit_code == 75);
    // An explicit -n that differs from the busy semaphore's limit: 65, naming the way out.
    const auto conflict = run_redsem({"acquire", "pool", "-n", "5", "-w", "0"}, env);
    CHECK(conflict.exit_code == 65);
    CHECK(conflict.err.find("redsem limit pool 5") != std::string::npos);
    // Bad limits.
    for (const char* bad : {"0", "-1", "abc", "100001", "2x", ""}) {
        const auto result = run_redsem({"limit", "pool", bad}, env);
        INFO(bad);
        CHECK(result.exit_code == 64);
        CHECK(line_count(result.err) == 2); // the error, and "Try ... --help"
    }
    CHECK(run_redsem({"limit", "pool"}, env).out == "3\n");
}

TEST_CASE("limit raised: the new slots go to the queue at once, in FIFO order") {
    RedisServer server;
    const auto env = env_for(server);
    const json holder = acquire_json(server, {"raise"});
    std::vector<std::unique_ptr<Child>> waiters;
    for (int i = 0; i < 3; ++i) {
        waiters.push_back(std::make_unique<Child>(
            std::vector<std::string>{"acquire", "raise", "--json", "--label", std::to_string(i)},
            env));
        // Queued before the next one starts, so the queue order is known.
        REQUIRE(wait_until(
            [&] {
                return status_json(server, {"raise"})["waiters"].size() ==
                       static_cast<std::size_t>(i + 1);
            },
            10s));
    }
    CHECK(run_redsem({"limit", "raise", "3"}, env).exit_code == 0);
    // The first two in the queue got slots 1 and 2, in that order; the third still waits.
    const auto first = waiters[0]->wait(10s);
    const auto second = waiters[1]->wait(10s);
    REQUIRE(first.exit_code == 0);
    REQUIRE(second.exit_code == 0);
    const json a = json::parse(first.out);
    const json b = json::parse(second.out);
    CHECK(a["slot"] == 1);
    CHECK(b["slot"] == 2);
    CHECK(a["fence"].get<long long>() < b["fence"].get<long long>());
    CHECK(a["limit"] == 3);
    CHECK_FALSE(waiters[2]->finished());
    const json status = status_json(server, {"raise"});
    CHECK(status["held"] == 3);
    REQUIRE(status["waiters"].size() == 1);
    CHECK(status["waiters"][0]["label"] == "2");
    CHECK(run_redsem({"limit", "raise", "4"}, env).exit_code == 0);
    CHECK(json::parse(waiters[2]->wait(10s).out)["slot"] == 3);
}

TEST_CASE("limit lowered: holders keep their slots, nobody is admitted until fewer hold, and "
          "new slots are below the limit") {
    RedisServer server;
    const auto env = env_for(server);
    std::vector<std::string> tokens;
    for (int i = 0; i < 3; ++i) {
        const json lease = acquire_json(server, {"lower", "-n", "3"});
        CHECK(lease["slot"] == i);
        tokens.push_back(lease["token"]);
    }
    CHECK(run_redsem({"limit", "lower", "2"}, env).exit_code == 0);
    // Holders keep their slots and can renew them.
    for (const auto& token : tokens) {
        CHECK(run_redsem({"renew", "lower", token}, env).exit_code == 0);
    }
    CHECK(run_redsem({"acquire", "lower", "-w", "0"}, env).exit_code == 75);
    CHECK(run_redsem({"release", "lower", tokens[0]}, env).exit_code == 0);  // slot 0 freed
    CHECK(run_redsem({"acquire", "lower", "-w", "0"}, env).exit_code == 75); // 2 hold, limit 2
    CHECK(run_redsem({"release", "lower", tokens[1]}, env).exit_code == 0);  // slot 1 freed
    // Only slot 2 is held now, which is past the limit: the newcomer gets slot 0.
    const json next = acquire_json(server, {"lower", "-w", "0"});
    CHECK(next["slot"] == 0);
    CHECK(next["limit"] == 2);
    CHECK(run_redsem({"acquire", "lower", "-w", "0"}, env).exit_code == 75);
    // A waiter queued behind them gets slot 1 when slot 2's holder leaves.
    Child waiter({"acquire", "lower", "--json"}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"lower"})["waiters"].size() == 1; }, 10s));
    CHECK(run_redsem({"release", "lower", tokens[2]}, env).exit_code == 0);
    const auto handed = waiter.wait(10s);
    REQUIRE(handed.exit_code == 0);
    CHECK(json::parse(handed.out)["slot"] == 1);
}

TEST_CASE("limit changes under load: an observer never sees more inside than the limit allows") {
    RedisServer server;
    const auto env = env_for(server);
    const std::string log = server.dir() + "/inside.log";
    CHECK(run_redsem({"limit", "load", "1"}, env).exit_code == 0);
    // Each command writes "+" on entry and "-" on exit, appending to one file (O_APPEND: one
    // write each, in the order they happened).
    const std::string body = "echo + >> " + log + "; sleep 0.2; echo - >> " + log;
    std::vector<std::unique_ptr<Child>> runs;
    for (int i = 0; i < 16; ++i) {
        runs.push_back(std::make_unique<Child>(
            std::vector<std::string>{"run", "load", "sh", "-c", body}, env));
    }
    REQUIRE(wait_for_file(log, 10s));
    CHECK(run_redsem({"limit", "load", "3"}, env).exit_code == 0);
    for (auto& run : runs) {
        CHECK(run->wait(60s).exit_code == 0);
    }
    int inside = 0;
    int most = 0;
    for (const char c : read_file(log)) {
        inside += c == '+' ? 1 : c == '-' ? -1 : 0;
        most = std::max(most, inside);
    }
    CHECK(inside == 0);
    CHECK(most <= 3);
    CHECK(most >= 2); // the raise took effect while the queue was long
    CHECK(holders_of(server, "load") == 0);
}

// --- 4. status, renew and release tell the truth ----------------------------------------------

TEST_CASE("renew without --ttl keeps the lease's own ttl, and a shorter --ttl never shortens it") {
    RedisServer server;
    const auto env = env_for(server);
    const json lease = acquire_json(server, {"long", "--ttl", "10m"});
    CHECK(run_redsem({"renew", "long", lease["token"]}, env).exit_code == 0);
    const json holder = status_json(server, {"long"})["holders"][0];
    CHECK(holder["ttl_ms"] == 600'000);
    CHECK(holder["expires_in_ms"].get<long long>() > 590'000);
    // A shorter --ttl never shortens the lease (nor the ttl later renewals use); a longer one
    // becomes its ttl.
    CHECK(run_redsem({"renew", "long", lease["token"], "--ttl", "30s"}, env).exit_code == 0);
    const json kept = status_json(server, {"long"})["holders"][0];
    CHECK(kept["ttl_ms"] == 600'000);
    CHECK(kept["expires_in_ms"].get<long long>() > 590'000);
    CHECK(run_redsem({"renew", "long", lease["token"], "--ttl", "20m"}, env).exit_code == 0);
    CHECK(status_json(server, {"long"})["holders"][0]["ttl_ms"] == 1'200'000);
}

TEST_CASE("status counts dead holders and waiters apart from live ones") {
    RedisServer server;
    const auto env = env_for(server);
    acquire_json(server, {"dead", "--ttl", "100ms"});
    // A waiter that is killed stops refreshing its place; nothing prunes it while nobody
    // calls a script on the semaphore.
    const json holder = acquire_json(server, {"stale", "--ttl", "1m"});
    Child waiter({"acquire", "stale"}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"stale"})["waiters"].size() == 1; }, 10s));
    waiter.signal(SIGKILL);
    waiter.wait(5s);
    REQUIRE(wait_until(
        [&] { return status_json(server, {"stale"})["waiters"][0]["stale"] == true; }, 15s));

    const json all = status_json(server);
    REQUIRE(all.size() == 2);
    CHECK(all[0]["name"] == "dead");
    CHECK(all[0]["held"] == 0);
    CHECK(all[0]["expired_holders"] == 1);
    CHECK(all[0]["oldest_holder"].is_null());
    CHECK(all[1]["held"] == 1);
    CHECK(all[1]["waiting"] == 0);
    CHECK(all[1]["stale_waiters"] == 1);
    const auto text = run_redsem({"status"}, env).out;
    CHECK(text.find("0/1") != std::string::npos);
    CHECK(text.find("1/1") != std::string::npos); // only the live holder of "stale"
    CHECK(text.find("EXPIRED") != std::string::npos);
    CHECK(text.find("STALE") != std::string::npos);
    const auto named = run_redsem({"status", "dead", "stale"}, env).out;
    CHECK(named.find("dead: 0/1 held (1 expired), 0 waiting") != std::string::npos);
    CHECK(named.find("stale: 1/1 held, 0 waiting (1 stale)") != std::string::npos);
    const json one = status_json(server, {"dead"});
    CHECK(one["held"] == 0);
    CHECK(one["expired_holders"] == 1);
}

TEST_CASE("one queue numbering: 1 is next, in text, JSON and the waiting line") {
    RedisServer server;
    const auto env = env_for(server);
    acquire_json(server, {"q"});
    Child first({"acquire", "q", "--label", "first"}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"q"})["waiters"].size() == 1; }, 10s));
    Child second({"acquire", "q", "--label", "second"}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"q"})["waiters"].size() == 2; }, 10s));
    const json waiters = status_json(server, {"q"})["waiters"];
    CHECK(waiters[0]["position"] == 1);
    CHECK(waiters[0]["label"] == "first");
    CHECK(waiters[1]["position"] == 2);
    const std::string text = run_redsem({"status", "q"}, env).out;
    CHECK(text.find("\n1 ") != std::string::npos);
    CHECK(text.find("\n2 ") != std::string::npos);
    // The waiting line, on a terminal (script(1)): the second waiter is number 3 of 3.
    const std::string out = server.dir() + "/tty";
    const std::string line = "script -qfec \"" + redsem_binary() + " --url " + server.socket_url() +
                             " acquire q -w 2500ms\" /dev/null > " + out;
    std::system(line.c_str());
    const std::string shown = read_file(out);
    CHECK(shown.find("number 3 of 3 in the queue") != std::string::npos);
    // It names the holder, as the line off a terminal does.
    CHECK(shown.find("number 3 of 3 in the queue, 1/1 held, no estimate yet (no holds in the "
                     "history); held by ") != std::string::npos);
    // Cleared ("\r" and erase to the end of the line) before the message that ends the wait.
    const auto message = shown.find("redsem: no slot of 'q' free within 2.5s");
    REQUIRE(message != std::string::npos);
    CHECK(shown.substr(0, message).ends_with("\r\033[K"));
}

TEST_CASE("status shows what each waiter wants, and on a 70-column terminal drops FENCE before "
          "it cuts LABEL") {
    RedisServer server;
    const auto env = env_for(server);
    acquire_json(server, {"w", "-n", "2", "--slots", "2", "--label", "db"});
    Child heavy({"acquire", "w", "--slots", "2", "--label", "heavy"}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"w"})["waiters"].size() == 1; }, 10s));
    Child alone({"acquire", "w", "--exclusive", "--label", "alone"}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"w"})["waiters"].size() == 2; }, 10s));
    const std::string text = run_redsem({"status", "w"}, env).out;
    INFO(text);
    const auto lines = lines_of(text);
    REQUIRE(lines.size() == 7);
    CHECK(lines[3] == "wait: no estimate yet (no holds in the history)");
    CHECK(lines[4].find("WAITING  WANTS  LABEL") != std::string::npos);
    CHECK(lines[5].find(" 2      heavy") != std::string::npos);
    CHECK(lines[6].find(" all    alone") != std::string::npos);
    // On a terminal of 70 columns (script(1)) the fence (in --json too) gives way, and then the
    // time of the last renewal, before the label: whole, and every line fits, where the other
    // columns leave room (a long host name may not).
    const std::string& header = lines[1];
    const std::size_t renewed = header.find("RENEWED");
    const std::size_t expires = header.find("EXPIRES");
    const std::size_t fence = header.find("FENCE");
    REQUIRE(fence != std::string::npos);
    const bool room = renewed + (fence - expires) + std::string("db").size() <= 70;
    const std::string out = server.dir() + "/narrow";
    const std::string line = "script -qfec \"stty cols 70 rows 24; " + redsem_binary() + " --url " +
                             server.socket_url() + " status w\" /dev/null > " + out;
    REQUIRE(std::system(line.c_str()) == 0);
    const std::string shown = read_file(out);
    INFO(shown);
    CHECK(shown.find("FENCE") == std::string::npos);
    if (room) {
        CHECK(shown.find(" db\r\n") != std::string::npos);
        for (std::string row : lines_of(shown)) {
            std::erase(row, '\r');
            // Display columns: UTF-8 continuation bytes take none ("..." is one character).
            CHECK(std::count_if(row.begin(), row.end(), [](char c) {
                      return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
                  }) <= 70);
        }
    }
}

TEST_CASE("text from other users is shown escaped in tables and kept exact in JSON") {
    RedisServer server;
    const auto env = env_for(server);
    const std::string label = "x\n\033[31mRED\r\xe2\x80\xae"
                              "evil \xc3\xa9t\xc3\xa9";
    acquire_json(server, {"esc", "--label", label});
    for (const auto& args : std::vector<std::vector<std::string>>{{"status"}, {"status", "esc"}}) {
        const std::string text = run_redsem(args, env).out;
        INFO(text);
        CHECK(text.find('\033') == std::string::npos);
        CHECK(text.find('\r') == std::string::npos);
        CHECK(text.find("\xe2\x80\xae") == std::string::npos); // right-to-left override
        CHECK(text.find("x\\x0a\\x1b[31mRED\\x0d\\u{202e}evil \xc3\xa9t\xc3\xa9") !=
              std::string::npos);
        CHECK(line_count(text) == (args.size() == 1 ? 2U : 3U)); // no row split in two
    }
    CHECK(status_json(server, {"esc"})["holders"][0]["label"] == label);
}

TEST_CASE("release and renew take the short token status prints, when it is unique") {
    RedisServer server;
    const auto env = env_for(server);
    const json lease = acquire_json(server, {"short"});
    const std::string token = lease["token"];
    CHECK(run_redsem({"renew", "short", token.substr(0, 8)}, env).exit_code == 0);
    CHECK(run_redsem({"release", "short", token.substr(0, 8)}, env).exit_code == 0);
    CHECK(holders_of(server, "short") == 0);
    const auto gone = run_redsem({"release", "short", token.substr(0, 8)}, env);
    CHECK(gone.exit_code == 1);
    CHECK(run_redsem({"release", "short", "abc"}, env).exit_code == 64); // too short
    CHECK(run_redsem({"release", "short", "ABCDEFGH"}, env).exit_code == 64);

    // Two holders whose tokens share a start: ambiguous, and both are named.
    Connection connection = server.admin();
    Semaphore semaphore(connection, "redsem", "short");
    AcquireOptions options;
    options.limit = 2;
    options.wait = Milliseconds{0};
    const std::string a = "abcd1000000000000000000000000001";
    const std::string b = "abcd2000000000000000000000000002";
    REQUIRE(semaphore.acquire(options, a));
    REQUIRE(semaphore.acquire(options, b));
    const auto ambiguous = run_redsem({"release", "short", "abcd"}, env);
    CHECK(ambiguous.exit_code == 64);
    CHECK(ambiguous.err.find(a) != std::string::npos);
    CHECK(ambiguous.err.find(b) != std::string::npos);
    CHECK(holders_of(server, "short") == 2);
    CHECK(run_redsem({"release", "short", "abcd2"}, env).exit_code == 0);
    CHECK(holders_of(server, "short") == 1);
}

// --- 2. a slot held for the life of a process -------------------------------------------------

TEST_CASE("acquire --while-pid: the slot lives as long as the shell, and goes when it is killed") {
    RedisServer server;
    const auto env = env_for(server);
    const std::string file = server.dir() + "/lease";
    // As a script would: the token from $(...), which must not wait for the keeper.
    auto shell = Child::shell(redsem_binary() + " acquire life --ttl 1s --json --while-pid $$ > " +
                                  file + ".tmp && mv " + file + ".tmp " + file + "; sleep 60",
                              env);
    REQUIRE(wait_for_file(file, 10s));
    const json lease = json::parse(read_file(file));
    const int keeper = lease["keeper_pid"];
    // Renewed for several ttls.
    std::this_thread::sleep_for(3500ms);
    json holder = status_json(server, {"life"})["holders"][0];
    CHECK(holder["token"] == lease["token"]);
    CHECK(holder["pid"] == shell->pid());
    CHECK(holder["pid_of"] == "while-pid");
    CHECK(holder["keeper"] == true);
    CHECK(holder["expires_in_ms"].get<long long>() > 0);
    CHECK_FALSE(process_gone(keeper));
    // The keeper is detached: a session of its own, no terminal.
    CHECK(getsid(keeper) == keeper);
    shell->signal(SIGKILL);
    shell->wait(5s);
    // Released by the keeper: an expired lease would stay listed (status lists expired holders
    // until someone reclaims them).
    CHECK(wait_until([&] { return holders_of(server, "life") == 0; }, 5s));
    CHECK(wait_until([&] { return process_gone(keeper); }, 5s));
    CHECK(no_keeper_of("life"));
}

TEST_CASE("acquire without --while-pid records the calling script's pid") {
    RedisServer server;
    const std::string file = server.dir() + "/token";
    auto shell = Child::shell(redsem_binary() + " acquire caller > " + file + ".tmp; mv " + file +
                                  ".tmp " + file + "; sleep 30",
                              env_for(server));
    REQUIRE(wait_for_file(file, 10s));
    const json holder = status_json(server, {"caller"})["holders"][0];
    CHECK(holder["pid"] == shell->pid());
    CHECK(holder["pid_of"] == "caller");
    CHECK(holder["keeper"] == false);
    CHECK(run_redsem({"status", "caller"}, env_for(server))
              .out.find(std::to_string(shell->pid()) + " (caller)") != std::string::npos);
}

TEST_CASE("the keeper survives SIGHUP, and release ends it at once") {
    RedisServer server;
    const auto env = env_for(server);
    auto sleeper = Child::shell("exec sleep 60");
    const json lease =
        acquire_json(server, {"hup", "--ttl", "1s", "--while-pid", std::to_string(sleeper->pid())});
    const int keeper = lease["keeper_pid"];
    kill(keeper, SIGHUP);
    std::this_thread::sleep_for(2500ms);
    CHECK_FALSE(process_gone(keeper));
    CHECK(holders_of(server, "hup") == 1);
    CHECK(run_redsem({"release", "hup", lease["token"]}, env).exit_code == 0);
    CHECK(wait_until([&] { return process_gone(keeper); }, 5s));
    CHECK_FALSE(sleeper->finished()); // a release is no lost lease: nothing is signalled
    CHECK(no_keeper_of("hup"));

    // At once, not at its next renewal: a keeper whose next renewal is 20s away ends within
    // seconds of the release.
    const json long_lease = acquire_json(
        server, {"hup-long", "--ttl", "60s", "--while-pid", std::to_string(sleeper->pid())});
    const int long_keeper = long_lease["keeper_pid"];
    CHECK(run_redsem({"release", "hup-long", long_lease["token"]}, env).exit_code == 0);
    CHECK(wait_until([&] { return process_gone(long_keeper); }, 10s));
    CHECK_FALSE(sleeper->finished());
}

TEST_CASE("a keeper whose lease is lost signals the process, as --on-lost says") {
    RedisServer server;
    Connection admin = server.admin();
    SECTION("default: SIGTERM") {
        auto sleeper = Child::shell("exec sleep 60");
        const json lease = acquire_json(
            server, {"lost", "--ttl", "1s", "--while-pid", std::to_string(sleeper->pid())});
        // The slot is taken away behind the keeper's back.
        admin.call({"ZREM", "redsem:{lost}:holders", lease["token"]});
        const auto result = sleeper->wait(10s);
        CHECK(result.signal == SIGTERM);
        CHECK(wait_until([&] { return process_gone(lease["keeper_pid"]); }, 5s));
    }
    SECTION("--on-lost KILL and --on-lost none") {
        auto killed = Child::shell("trap '' TERM; sleep 60");
        const json lease =
            acquire_json(server, {"lost", "--ttl", "1s", "--while-pid",
                                  std::to_string(killed->pid()), "--on-lost", "kill"});
        admin.call({"ZREM", "redsem:{lost}:holders", lease["token"]});
        CHECK(killed->wait(10s).signal == SIGKILL);

        auto spared = Child::shell("exec sleep 60");
        const json other =
            acquire_json(server, {"lost2", "--ttl", "1s", "--while-pid",
                                  std::to_string(spared->pid()), "--on-lost", "none"});
        admin.call({"ZREM", "redsem:{lost2}:holders", other["token"]});
        CHECK(wait_until([&] { return process_gone(other["keeper_pid"]); }, 10s));
        CHECK_FALSE(spared->finished());
    }
    SECTION("the process's descendants get the signal too") {
        Scratch scratch;
        const std::string pid_file = scratch.path("pid");
        auto parent = Child::shell("sleep 301 & echo $! > " + pid_file + "; wait");
        REQUIRE(wait_until([&] { return !read_file(pid_file).empty(); }, 10s));
        const int child = std::stoi(read_file(pid_file));
        const json lease = acquire_json(
            server, {"lost", "--ttl", "1s", "--while-pid", std::to_string(parent->pid())});
        admin.call({"ZREM", "redsem:{lost}:holders", lease["token"]});
        CHECK(parent->wait(10s).signal == SIGTERM);
        // Before: the background sleep ran on.
        CHECK(wait_until([&] { return process_gone(child); }, 10s));
    }
    SECTION("what ignores the signal gets SIGKILL --kill-after later") {
        Scratch scratch;
        const std::string pid_file = scratch.path("pid");
        auto stubborn = Child::shell("trap '' TERM; sleep 302 & echo $! > " + pid_file + "; wait");
        REQUIRE(wait_until([&] { return !read_file(pid_file).empty(); }, 10s));
        const int child = std::stoi(read_file(pid_file));
        const json lease =
            acquire_json(server, {"lost", "--ttl", "1s", "--while-pid",
                                  std::to_string(stubborn->pid()), "--kill-after", "300ms"});
        admin.call({"ZREM", "redsem:{lost}:holders", lease["token"]});
        CHECK(stubborn->wait(20s).signal == SIGKILL);
        CHECK(wait_until([&] { return process_gone(child); }, 10s));
    }
    CHECK(no_keeper_of("lost"));
}

TEST_CASE("acquire --while-pid refuses a process that is gone, holding nothing") {
    RedisServer server;
    const auto env = env_for(server);
    const auto gone =
        run_redsem({"acquire", "nobody", "--while-pid", std::to_string(dead_pid())}, env);
    CHECK(gone.exit_code == 64);
    CHECK(gone.err.find("no such process") != std::string::npos);
    for (const char* bad : {"0", "-3", "x", "99999999"}) {
        INFO(bad);
        CHECK(run_redsem({"acquire", "nobody", "--while-pid", bad}, env).exit_code == 64);
    }
    const auto signal = run_redsem(
        {"acquire", "nobody", "--while-pid", std::to_string(getpid()), "--on-lost", "SIGBOGUS"},
        env);
    CHECK(signal.exit_code == 64);
    CHECK(run_redsem({"acquire", "nobody", "--on-lost", "TERM"}, env).exit_code == 64);
    const std::string self = std::to_string(getpid());
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"acquire", "nobody", "--kill-after", "1s"},
          {"acquire", "nobody", "--while-pid", self, "--kill-after", "soon"},
          {"acquire", "nobody", "--while-pid", self, "--on-lost", "none", "--kill-after", "1s"},
          {"acquire", "nobody", "--while-pid", self, "--on-lost", "KILL", "--kill-after", "1s"}}) {
        const auto refused = run_redsem(bad, env);
        INFO(refused.err);
        CHECK(refused.exit_code == 64);
        CHECK(refused.err.rfind("redsem: ", 0) == 0);
        CHECK(line_count(refused.err) <= 2);
    }
    CHECK(holders_of(server, "nobody") == 0);
    CHECK(no_keeper_of("nobody"));
}

// --- found by an adversarial review ----------------------------------------------------------

TEST_CASE("lowering the limit while a dead holder awaits pruning admits nobody past the new "
          "limit") {
    RedisServer server;
    const auto env = env_for(server);
    const json dying = acquire_json(server, {"shrink", "-n", "3", "--ttl", "1m"});
    acquire_json(server, {"shrink", "--ttl", "1m"});
    acquire_json(server, {"shrink", "--ttl", "1m"});
    Child waiter({"acquire", "shrink", "--json"}, env);
    REQUIRE(
        wait_until([&] { return status_json(server, {"shrink"})["waiters"].size() == 1; }, 10s));
    // Stopped, it runs no script (that would prune) but stays alive for its liveness (5s).
    waiter.signal(SIGSTOP);
    // The first holder's lease runs out now, on the server's clock, and nobody prunes it.
    Connection admin = server.admin();
    const Reply time = admin.call({"TIME"});
    const long long now_ms = std::stoll(time.at(0).as_string()) * 1000;
    admin.call({"ZADD", "redsem:{shrink}:holders", "XX", std::to_string(now_ms - 1000),
                dying["token"].get<std::string>()});
    // A deadline moved by hand: the scripts' lower bound on deadlines goes too
    // (lua/lib/lifetime.lua).
    admin.call({"HDEL", "redsem:{shrink}:state", "due"});
    REQUIRE(status_json(server, {"shrink"})["expired_holders"] == 1);
    REQUIRE(run_redsem({"limit", "shrink", "1"}, env).exit_code == 0);
    // Pruning the dead holder freed a slot under the old limit 3, not under the new limit 1.
    const json view = status_json(server, {"shrink"});
    CHECK(view["holders"].size() == 2);
    CHECK(view["waiters"].size() == 1);
    CHECK(view["held"] == 2);
    waiter.signal(SIGKILL);
    waiter.wait(5s);
}

TEST_CASE("acquire --while-pid leaves the queue when its process exits while waiting") {
    RedisServer server;
    const auto env = env_for(server);
    acquire_json(server, {"owner", "--ttl", "1m"});
    std::unique_ptr<Child> owner = Child::shell("exec sleep 60");
    Child waiter({"acquire", "owner", "--while-pid", std::to_string(owner->pid())}, env);
    REQUIRE(wait_until([&] { return status_json(server, {"owner"})["waiters"].size() == 1; }, 10s));
    owner->signal(SIGKILL);
    owner->wait(5s);
    const auto started = Clock::now();
    const auto result = waiter.wait(10s);
    CHECK(Clock::now() - started < 5s); // at once, not at a timeout
    CHECK(result.exit_code == 64);
    CHECK(result.out.empty());
    CHECK(result.err.find("exited while waiting") != std::string::npos);
    CHECK(status_json(server, {"owner"})["waiters"].empty());
    CHECK(no_keeper_of("owner"));
}

TEST_CASE("acquire --while-pid 1 is refused unless --on-lost none: init is never signalled") {
    RedisServer server;
    const auto env = env_for(server);
    const auto refused = run_redsem({"acquire", "init", "--while-pid", "1"}, env);
    CHECK(refused.exit_code == 64);
    CHECK(refused.err.find("--on-lost none") != std::string::npos);
    CHECK(holders_of(server, "init") == 0);
    const auto kept = run_redsem({"acquire", "init", "--while-pid", "1", "--on-lost", "none"}, env);
    REQUIRE(kept.exit_code == 0);
    CHECK(holders_of(server, "init") == 1);
    CHECK(run_redsem({"release", "init", kept.out.substr(0, kept.out.size() - 1)}, env).exit_code ==
          0);
    CHECK(no_keeper_of("init"));
}

TEST_CASE("run: a NAME that looks like a negative number is still NAME, and the command keeps "
          "its options") {
    RedisServer server;
    const auto env = env_for(server);
    const auto result = run_redsem({"run", "-7", "echo", "-n", "hi"}, env);
    CHECK(result.exit_code == 0);
    CHECK(result.out == "hi");
    CHECK(run_redsem({"limit", "-7"}, env).out == "1\n"); // -n went to echo, not to redsem
}

TEST_CASE("names with C1 controls or bidirectional overrides are refused") {
    RedisServer server;
    const auto env = env_for(server);
    for (const std::string name : {"a\u202eb", "a\u0085b", "\u2067x"}) {
        const auto result = run_redsem({"acquire", name, "-w", "0"}, env);
        CHECK(result.exit_code == 64);
        CHECK(result.err.find("bidirectional") != std::string::npos);
        CHECK(result.err.find(name) == std::string::npos); // shown escaped
    }
    CHECK(run_redsem({"acquire", "d\u00e9ploy", "-w", "0"}, env).exit_code == 0); // é is fine
}

TEST_CASE("a hand-over nobody collected counts as expired in status NAME, as in the overview") {
    RedisServer server;
    const auto env = env_for(server);
    const json holder = acquire_json(server, {"claim", "--ttl", "1m"});
    // A waiter at the script level that queues and then never pops its wake list (a process
    // that died after queueing). One stopped inside its BLPOP would have collected the grant:
    // Redis pops it into the socket at once, and the scripts count it as collected.
    Connection client = server.admin();
    const Keys keys = Keys::make("redsem", "claim");
    const std::string token = "0123456789abcdef0123456789abcdef";
    REQUIRE(reply_kind(acquire_by_script(client, keys, token, 60s, false)) == "wait");
    REQUIRE(run_redsem({"release", "claim", holder["token"]}, env).exit_code == 0);
    // Handed to the waiter, who does not collect it within the claim window (3s).
    REQUIRE(
        wait_until([&] { return status_json(server, {"claim"})["expired_holders"] == 1; }, 10s));
    const json one = status_json(server, {"claim"});
    CHECK(one["held"] == 0);
    CHECK(one["holders"].size() == 1);
    CHECK(one["holders"][0]["expired"] == true);
    const json all = status_json(server);
    REQUIRE(all.size() == 1);
    CHECK(all[0]["held"] == 0);
    CHECK(all[0]["expired_holders"] == 1);
    CHECK(run_redsem({"status", "claim"}, env).out.find("0/1 held (1 expired)") !=
          std::string::npos);
}

TEST_CASE("usage messages: repeated options and case slips") {
    const auto twice = run_redsem({"acquire", "x", "-n", "1", "-n", "2"});
    CHECK(twice.exit_code == 64);
    CHECK(twice.err.rfind("redsem: error: --limit given more than once\n", 0) == 0);
    const auto upper = run_redsem({"RUN", "x", "true"});
    CHECK(upper.exit_code == 64);
    CHECK(upper.err.find("did you mean 'run'?") != std::string::npos);
}

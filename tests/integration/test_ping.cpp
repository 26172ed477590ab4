// run --ping URL against a real HTTP server on a loopback port (support/http_recorder.hpp):
// what each run reports, and that a monitor that is slow, down or refusing changes neither
// the command's start nor run's exit status.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/http_recorder.hpp"

#include <filesystem>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> paths_of(const HttpRecorder& monitor) {
    std::vector<std::string> paths;
    for (const auto& request : monitor.requests()) {
        paths.push_back(request.method + " " + request.path);
    }
    return paths;
}

} // namespace

TEST_CASE("run --ping: URL/start at the grant, then URL on success or URL/STATUS on failure") {
    RedisServer server;
    const auto env = env_for(server);
    HttpRecorder monitor;
    const std::string url = monitor.url() + "/ping/0f1e2d3c";
    CHECK(run_redsem({"run", "job", "--ping", url + "/", "--", "true"}, env).exit_code == 0);
    CHECK(run_redsem({"run", "job", "--ping", url, "--", "sh", "-c", "exit 3"}, env).exit_code ==
          3);
    CHECK(paths_of(monitor) ==
          std::vector<std::string>{"POST /ping/0f1e2d3c/start", "POST /ping/0f1e2d3c",
                                   "POST /ping/0f1e2d3c/start", "POST /ping/0f1e2d3c/3"});
    const auto requests = monitor.requests();
    CHECK(requests[1].body.find("the command of 'job' on ") != std::string::npos);
    CHECK(requests[1].body.find(" exited 0 after ") != std::string::npos);
    CHECK(requests[3].body.find(" exited 3 after ") != std::string::npos);
    CHECK(requests[0].raw.find("User-Agent: redsem/") != std::string::npos);

    // A run that never got a slot reports its exit status, and sends no start.
    const auto holder = acquire_json(server, {"busy", "--ttl", "10m"});
    CHECK(
        run_redsem({"run", "busy", "-w", "0", "-q", "--ping", url, "--", "true"}, env).exit_code ==
        75);
    REQUIRE(monitor.requests().size() == 5);
    CHECK(monitor.requests()[4].path == "/ping/0f1e2d3c/75");
    CHECK(monitor.requests()[4].body.find("no slot of 'busy' was free") != std::string::npos);
    // Refused by --max-waiting, and superseded: the body is what run says on stderr.
    Child queued({"run", "busy", "--supersede", "--ping", url, "--", "true"}, env);
    Connection admin = server.admin();
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("busy", "queue")) == 1; }, 10s));
    CHECK(run_redsem({"run", "busy", "--max-waiting", "1", "-q", "--ping", url, "--", "true"}, env)
              .exit_code == 81);
    Child newer({"run", "busy", "--supersede", "-q", "--", "true"}, env);
    CHECK(queued.wait(30s).exit_code == 80);
    REQUIRE(monitor.requests().size() == 7);
    CHECK(monitor.requests()[5].path == "/ping/0f1e2d3c/81");
    CHECK(monitor.requests()[5].body.find("the queue of 'busy' is full") != std::string::npos);
    CHECK(monitor.requests()[6].path == "/ping/0f1e2d3c/80");
    CHECK(monitor.requests()[6].body.find("superseded in the queue of 'busy'") !=
          std::string::npos);
    REQUIRE(run_redsem({"release", "busy", holder["token"].get<std::string>()}, env).exit_code ==
            0);
    CHECK(newer.wait(30s).exit_code == 0);
}

TEST_CASE("run --ping: a run stopped because its slot was lost reports 76, and says why") {
    RedisServer server;
    Connection admin = server.admin();
    Scratch scratch;
    const std::string ready = scratch.path("ready");
    HttpRecorder monitor;
    Child run({"run", "lost", "--ttl", "600ms", "--ping", monitor.url() + "/l", "--", "sh", "-c",
               "touch " + ready + "; exec sleep 30"},
              env_for(server));
    REQUIRE(wait_for_file(ready, 10s));
    admin.call({"DEL", "redsem:{lost}:holders"}); // the lease taken away behind redsem's back
    CHECK(run.wait(10s).exit_code == 76);
    CHECK(paths_of(monitor) == std::vector<std::string>{"POST /l/start", "POST /l/76"});
    const std::string body = monitor.requests().at(1).body;
    INFO(body);
    CHECK(body.find("was stopped because its slot was lost") != std::string::npos);
}

TEST_CASE("run --once-per --ping: a skip is a success whose body names the run it deferred to") {
    RedisServer server;
    const auto env = env_for(server);
    HttpRecorder monitor;
    const std::string url = monitor.url() + "/nightly";
    REQUIRE(run_redsem({"run", "nightly", "--once-per", "1h", "--label", "backup", "--ping", url,
                        "--", "true"},
                       env)
                .exit_code == 0);
    const auto skipped =
        run_redsem({"run", "nightly", "--once-per", "1h", "-q", "--ping", url, "--", "true"}, env);
    CHECK(skipped.exit_code == 0);
    CHECK(skipped.err.empty());
    CHECK(paths_of(monitor) ==
          std::vector<std::string>{"POST /nightly/start", "POST /nightly", "POST /nightly"});
    const std::string body = monitor.requests().at(2).body;
    INFO(body);
    CHECK(body.rfind("skipped 'nightly': it ran on ", 0) == 0);
    CHECK(body.find("'backup'") != std::string::npos);
}

TEST_CASE("run --ping: a monitor that does not answer delays neither the command nor the release, "
          "and a failed ping is a warning that leaves the exit status alone") {
    RedisServer server;
    const auto env = env_for(server);
    Connection admin = server.admin();
    Scratch scratch;
    const std::string ran = scratch.path("ran");
    HttpRecorder monitor;
    monitor.hold_answers(true);
    // The start ping waits for an answer that does not come: the command runs meanwhile.
    Child run({"run", "slow", "--ping", monitor.url() + "/p", "--ping-timeout", "1m", "--", "sh",
               "-c", "touch " + ran + "; exit 4"},
              env);
    REQUIRE(wait_for_file(ran, 30s));
    REQUIRE(monitor.wait_for(1, 30s));
    // Its slot is given back before the end ping, which waits behind the start ping.
    REQUIRE(wait_until([&] { return zcard(admin, semaphore_key("slow", "holders")) == 0; }, 30s));
    CHECK(monitor.requests().size() == 1);
    CHECK_FALSE(run.finished());
    monitor.hold_answers(false);
    CHECK(run.wait(30s).exit_code == 4);
    CHECK(paths_of(monitor) == std::vector<std::string>{"POST /p/start", "POST /p/4"});

    // No answer within --ping-timeout: a warning for each ping, naming the host only, and the
    // command's status.
    HttpRecorder mute;
    mute.hold_answers(true);
    const auto timed_out = run_redsem({"run", "slow", "--ping", mute.url() + "/secret-uuid",
                                       "--ping-timeout", "200ms", "--", "sh", "-c", "exit 3"},
                                      env);
    INFO(timed_out.err);
    CHECK(timed_out.exit_code == 3);
    CHECK(timed_out.err.find("redsem: warning: --ping to " + mute.url() + " (/start) failed: ") !=
          std::string::npos);
    CHECK(timed_out.err.find("redsem: warning: --ping to " + mute.url() + " (/3) failed: ") !=
          std::string::npos);
    CHECK(timed_out.err.find("secret-uuid") == std::string::npos);
    mute.hold_answers(false);

    // A monitor that refuses (HTTP 500), or nothing listening.
    HttpRecorder refusing(500);
    const auto refused =
        run_redsem({"run", "slow", "--ping", refusing.url() + "/x", "--", "true"}, env);
    CHECK(refused.exit_code == 0);
    CHECK(refused.err.find("failed: it answered HTTP 500") != std::string::npos);
    HttpRecorder moved(301);
    const auto redirected =
        run_redsem({"run", "slow", "--ping", moved.url() + "/x", "--", "true"}, env);
    CHECK(redirected.exit_code == 0);
    CHECK(redirected.err.find("failed: it answered HTTP 301 (redirects are not followed)") !=
          std::string::npos);
    const auto nobody =
        run_redsem({"run", "slow", "--ping", "http://127.0.0.1:1/x", "--", "true"}, env);
    CHECK(nobody.exit_code == 0);
    CHECK(line_count(nobody.err) == 2);
}

TEST_CASE("run --ping sends neither the password nor a token") {
    const std::string password = "pw-0d8e-never-sent";
    RedisServer::Options options;
    options.extra_args = {"--requirepass", password};
    options.admin_password = password;
    RedisServer server(options);
    EnvChanges env = env_for(server);
    env["REDSEM_PASSWORD"] = password;
    HttpRecorder monitor;
    REQUIRE(run_redsem({"run", "secret", "--ping", monitor.url() + "/s", "--", "true"}, env)
                .exit_code == 0);
    REQUIRE(monitor.requests().size() == 2);
    std::string token;
    for (const auto& event : json_lines(run_redsem({"log", "secret", "--json"}, env).out)) {
        if (event.value("event", "") == "acquired") {
            token = event["token"].get<std::string>();
        }
    }
    REQUIRE(token.size() == 32);
    for (const auto& request : monitor.requests()) {
        CHECK(request.raw.find(password) == std::string::npos);
        CHECK(request.raw.find(token) == std::string::npos);
        CHECK(request.raw.find(token.substr(0, 8)) == std::string::npos);
    }
}

TEST_CASE("run --ping and --ping-timeout: bad input is a usage error, and nothing is pinged") {
    RedisServer server;
    const auto env = env_for(server);
    HttpRecorder monitor;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--ping", "ftp://example.org/x"},
             {"--ping", "example.org/x"},
             {"--ping", "http://"},
             {"--ping", "https:///path"},
             {"--ping", monitor.url() + "/x?create=1"},
             {"--ping", ""},
             {"--ping", monitor.url() + "/x#frag"},
             {"--ping", "http://127.0.0.1:99999/x"},
             {"--ping", "http://127.0.0.1:0/x"},
             {"--ping", "http://user:pw-hidden@127.0.0.1:1/secret-path?x=1"},
             {"--ping-timeout", "5s"},
             {"--ping", monitor.url(), "--ping-timeout", "0"},
             {"--ping", monitor.url(), "--ping-timeout", "2m"},
             {"--ping", monitor.url(), "--ping-timeout", "soon"}}) {
        std::vector<std::string> argv{"run", "bad"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--", "true"});
        const ProcessResult result = run_redsem(argv, env);
        INFO(args.back() << ": " << result.err);
        CHECK(result.exit_code == 64);
        CHECK(result.err.rfind("redsem: error: --ping", 0) == 0);
        // The path of a ping URL is often a secret, and a password in it is one.
        CHECK(result.err.find("secret-path") == std::string::npos);
        CHECK(result.err.find("pw-hidden") == std::string::npos);
    }
    CHECK(monitor.requests().empty());
    Connection admin = server.admin();
    CHECK(admin.call({"KEYS", "redsem:{bad}:*"}).as_array().empty());
    // The scheme is not case-sensitive.
    std::string upper = monitor.url();
    upper.replace(0, 4, "HTTP");
    CHECK(run_redsem({"run", "ok", "--ping", upper + "/u", "--", "true"}, env).exit_code == 0);
    CHECK(monitor.requests().size() == 2);
}

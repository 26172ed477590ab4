// TLS (rediss://) against real redis-servers with certificates made for the test, and password
// files.
#include <catch2/catch.hpp>

#include <filesystem>

#include "support/helpers.hpp"
#include "support/loopback_proxy.hpp"
#include "support/skip.hpp"
#include "support/tls_files.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <csignal>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

const std::string k_password = "Tls-Pw-4d1f9a2b-secret";

struct TlsServerOptions {
    std::string cert = "server"; // which of TlsFiles' certificates the server shows
    bool auth_clients = false;   // require a client certificate
    std::string password = {};   // requirepass
};

// A redis-server that speaks TLS only on a free TCP port (its admin socket stays plain).
class TlsServer {
public:
    TlsServer(const TlsFiles& files, const TlsServerOptions& options = {})
        : m_server(server_options(files, options)), m_port(m_server.port_of("--tls-port")) {}

    int port() const { return m_port; }
    std::string url(const std::string& host = "127.0.0.1") const {
        return "rediss://" + host + ":" + std::to_string(m_port);
    }
    const RedisServer& server() const { return m_server; }

private:
    static RedisServer::Options server_options(const TlsFiles& files,
                                               const TlsServerOptions& options) {
        RedisServer::Options server;
        server.port_options = {"--tls-port"};
        server.extra_args = {"--tls-cert-file",    files.path(options.cert + ".crt"),
                             "--tls-key-file",     files.path(options.cert + ".key"),
                             "--tls-ca-cert-file", files.path("ca.crt"),
                             "--tls-auth-clients", options.auth_clients ? "yes" : "no"};
        if (!options.password.empty()) {
            server.extra_args.insert(server.extra_args.end(), {"--requirepass", options.password});
            server.admin_password = options.password;
        }
        return server;
    }

    RedisServer m_server;
    int m_port;
};

EnvChanges tls_env(const TlsFiles& files, const TlsServer& server) {
    return {{"REDSEM_URL", server.url()},
            {"REDSEM_CACERT", files.path("ca.crt")},
            {"REDSEM_LOSS_GRACE", "0"}};
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

void check_one_error(const ProcessResult& result, int exit_code, const std::string& part) {
    INFO(result.err);
    CHECK(result.exit_code == exit_code);
    CHECK(result.err.rfind("redsem: error: ", 0) == 0);
    CHECK(contains(result.err, part));
    // A usage error adds "Try 'redsem CMD --help'.", as every usage error does.
    CHECK(line_count(result.err) == (exit_code == 64 ? 2 : 1));
}

std::chrono::milliseconds since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
}

// A TCP listener that never accepts: the kernel completes the TCP handshake, and the TLS
// handshake never starts.
class SilentListener {
public:
    SilentListener() {
        m_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t length = sizeof(address);
        if (bind(m_fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
            getsockname(m_fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
            listen(m_fd, 16) != 0) {
            throw std::runtime_error("cannot listen");
        }
        m_port = ntohs(address.sin_port);
    }
    ~SilentListener() { close(m_fd); }
    int port() const { return m_port; }

private:
    int m_fd = -1;
    int m_port = 0;
};

std::string write_password_file(const std::string& dir, const std::string& content, mode_t mode) {
    const std::string path = dir + "/password";
    std::ofstream(path) << content;
    chmod(path.c_str(), mode);
    return path;
}

} // namespace

TEST_CASE("every subcommand works over TLS, run's heartbeat across several renewals") {
    const TlsFiles files;
    const TlsServer server(files);
    const EnvChanges env = tls_env(files, server);

    const auto acquired = run_redsem({"acquire", "tls", "-n", "2", "--json"}, env);
    REQUIRE(acquired.exit_code == 0);
    const std::string token = nlohmann::json::parse(acquired.out)["token"];
    CHECK(run_redsem({"renew", "tls", token}, env).exit_code == 0);

    const auto status = run_redsem({"status", "tls", "--json"}, env);
    REQUIRE(status.exit_code == 0);
    CHECK(nlohmann::json::parse(status.out)["holders"].size() == 1);
    CHECK(run_redsem({"status"}, env).exit_code == 0);
    CHECK(run_redsem({"limit", "tls", "3"}, env).exit_code == 0);
    CHECK(run_redsem({"release", "tls", token}, env).exit_code == 0);

    // A 600ms lease renewed every 200ms for 2s: lost (76) unless the renewals get through.
    const auto ran =
        run_redsem({"run", "tls", "--ttl", "600ms", "--", "sh", "-c", "sleep 2; echo done"}, env);
    INFO(ran.err);
    CHECK(ran.exit_code == 0);
    CHECK(ran.out == "done\n");

    // Expired leases, collected over TLS.
    const auto old = run_redsem({"acquire", "gone", "--ttl", "100ms"}, env);
    REQUIRE(old.exit_code == 0);
    Connection admin = server.server().admin();
    const Keys keys = Keys::make("redsem", "gone");
    admin.call({"ZADD", keys.holders, "XX", "1", old.out.substr(0, old.out.size() - 1)});
    const auto gc = run_redsem({"gc", "--json"}, env);
    INFO(gc.err);
    CHECK(gc.exit_code == 0);
    CHECK(contains(gc.out, "gone"));

    // The same by host name, with the CA given as an option.
    CHECK(run_redsem({"acquire", "byname", "-u", server.url("localhost"), "--cacert",
                      files.path("ca.crt")},
                     {{"REDSEM_LOSS_GRACE", "0"}})
              .exit_code == 0);
}

TEST_CASE("a run's TLS settings are read once: its heartbeat reconnects with them after the CA "
          "file is gone") {
    const TlsFiles files;
    const TlsServer server(files);
    Scratch scratch;
    // A copy of the CA that the command removes: a connection made after that can only use
    // what was read before (one TLS context per process).
    const std::string ca = scratch.path("ca.crt");
    std::filesystem::copy_file(files.path("ca.crt"), ca);
    EnvChanges env = tls_env(files, server);
    env["REDSEM_CACERT"] = ca;
    env["CA"] = ca;
    env["REMOVED"] = scratch.path("removed");
    Child run({"run", "once", "--ttl", "600ms", "--", "sh", "-c",
               "rm \"$CA\" && touch \"$REMOVED\" && sleep 2 && echo done"},
              env);
    REQUIRE(wait_for_file(scratch.path("removed"), 20s));
    // Every TLS client is cut off: the heartbeat must connect anew to renew the 600ms lease.
    Connection admin = server.server().admin();
    admin.call({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    const ProcessResult ran = run.wait();
    INFO(ran.err);
    CHECK(ran.exit_code == 0);
    CHECK(ran.out == "done\n");
}

TEST_CASE("big pipelined replies over TLS arrive whole") {
    const TlsFiles files;
    const TlsServer server(files);
    // 300 semaphores with a long label each: status reads them in pipelined batches of 100,
    // whose replies span many TLS records.
    Connection admin = server.server().admin();
    const std::string label(2000, 'x');
    for (int i = 0; i < 300; ++i) {
        const Keys keys = Keys::make("redsem", "s" + std::to_string(i));
        acquire_by_script(admin, keys, std::string(32, 'a'), 600s, false);
        admin.call({"HSET", keys.info, "pad", label});
    }
    const auto status = run_redsem({"status", "--json"}, tls_env(files, server));
    INFO(status.err);
    REQUIRE(status.exit_code == 0);
    const auto listed = nlohmann::json::parse(status.out);
    CHECK(listed.size() == 300);
}

TEST_CASE("a TLS reply that stops half-way fails within the command timeout, for a waiter and "
          "for run's heartbeat") {
    const TlsFiles files;
    const TlsServer server(files);
    Connection admin = server.server().admin();
    const std::string label(2000, 'x');
    for (int i = 0; i < 100; ++i) {
        const Keys keys = Keys::make("redsem", "s" + std::to_string(i));
        acquire_by_script(admin, keys, std::string(32, 'a'), 600s, false);
        admin.call({"HSET", keys.info, "pad", label});
    }
    // The handshake and the first replies get through; the listing (about 200 KB) does not.
    const StallingProxy proxy(server.port(), 20'000);
    EnvChanges env = tls_env(files, server);
    env["REDSEM_URL"] = "rediss://127.0.0.1:" + std::to_string(proxy.port());
    const auto start = std::chrono::steady_clock::now();
    const auto status = run_redsem({"status"}, env);
    check_one_error(status, 69, "did not answer in time");
    CHECK(since(start) < 15s); // the 5s command timeout, on a loaded machine

    // run: once the command runs, the heartbeat's next renewal stalls mid-record; the lease
    // is lost, the command stopped, and redsem exits 76 rather than spinning in the heartbeat.
    StallingProxy heartbeat_proxy(server.port(), -1);
    env["REDSEM_URL"] = "rediss://127.0.0.1:" + std::to_string(heartbeat_proxy.port());
    Child run({"run", "hb", "--ttl", "2s", "--", "sh", "-c", "echo started; exec sleep 60"}, env);
    // (A deadline against a hang only: under a sanitizer on a loaded machine, a start through
    // the TLS proxy once took longer than 20s. What the run said, if it never started, is
    // shown.)
    if (!run.wait_for_line(120s)) {
        run.signal(SIGKILL);
        FAIL("run never started its command: " << run.wait(10s).err);
    }
    heartbeat_proxy.stall_after(7); // a record header and two bytes of it
    const auto stalled_at = std::chrono::steady_clock::now();
    const ProcessResult ran = run.wait(40s);
    INFO(ran.err);
    CHECK(ran.exit_code == 76);
    CHECK(since(stalled_at) < 25s);
}

TEST_CASE("the command run over TLS inherits no connection to Redis") {
    const TlsFiles files;
    const TlsServer server(files);
    const auto result =
        run_redsem({"run", "fds", "--", "sh", "-c", "ls -l /proc/$$/fd"}, tls_env(files, server));
    REQUIRE(result.exit_code == 0);
    CHECK(!contains(result.out, "socket:"));
}

TEST_CASE("certificates that must not be trusted are refused, each with its reason") {
    const TlsFiles files;
    const EnvChanges grace{{"REDSEM_LOSS_GRACE", "0"}};

    const TlsServer good(files);
    // No --cacert: the system's CAs do not know the test CA.
    check_one_error(run_redsem({"acquire", "t", "-u", good.url()}, grace), 69, "unknown CA");
    check_one_error(
        run_redsem({"acquire", "t", "-u", good.url(), "--cacert", files.path("other-ca.crt")},
                   grace),
        69, "failed verification");

    // A --cacert that did not sign the server's certificate is named, not "give --cacert".
    const TlsServer other(files, {.cert = "other-server"});
    const ProcessResult wrong_ca =
        run_redsem({"acquire", "t", "-u", other.url(), "--cacert", files.path("ca.crt")}, grace);
    check_one_error(wrong_ca, 69, "no CA in --cacert '" + files.path("ca.crt") + "' signed it");
    CHECK_FALSE(contains(wrong_ca.err, "give the server's CA"));

    // Without libfaketime there is no expired certificate: --insecure below then meets the
    // other CA's, and the test reports itself skipped.
    const TlsServer expired(files, {.cert = files.have_expired() ? "expired" : "other-server"});
    if (files.have_expired()) {
        check_one_error(
            run_redsem({"acquire", "t", "-u", expired.url(), "--cacert", files.path("ca.crt")},
                       grace),
            69, "expired");
    } else {
        skip_part("libfaketime (Debian package faketime), for an expired certificate,");
    }

    // A name mismatch says which names the certificate holds: what --sni would need.
    const TlsServer wrong_name(files, {.cert = "wrong-name"});
    check_one_error(
        run_redsem({"acquire", "t", "-u", wrong_name.url(), "--cacert", files.path("ca.crt")},
                   grace),
        69, "mismatch (it is for other.example; --sni NAME checks one of them instead)");
    // --sni names the server the certificate is for.
    CHECK(run_redsem({"acquire", "t", "-u", wrong_name.url(), "--cacert", files.path("ca.crt"),
                      "--sni", "other.example"},
                     grace)
              .exit_code == 0);
    CHECK(run_redsem({"acquire", "t2", "-u", wrong_name.url()},
                     {{"REDSEM_CACERT", files.path("ca.crt")},
                      {"REDSEM_SNI", "other.example"},
                      {"REDSEM_LOSS_GRACE", "0"}})
              .exit_code == 0);

    // A certificate that names its server only in the subject's CN is refused: only the
    // subjectAltName counts (RFC 6125).
    const TlsServer cn_only(files, {.cert = "cn-only"});
    const auto by_cn = run_redsem(
        {"acquire", "t", "-u", cn_only.url("localhost"), "--cacert", files.path("ca.crt")}, grace);
    CHECK(by_cn.exit_code == 69);
    CHECK(contains(by_cn.err, "mismatch (it names no server in a subjectAltName"));

    // --insecure connects anyway, and says so every time.
    for (int i = 0; i < 2; ++i) {
        const auto insecure =
            run_redsem({"acquire", "t3", "-n", "2", "-u", expired.url(), "--insecure"}, grace);
        CHECK(insecure.exit_code == 0);
        CHECK(insecure.err.rfind("redsem: warning: ", 0) == 0);
        CHECK(contains(insecure.err, "--insecure"));
        CHECK(line_count(insecure.err) == 1);
    }
    const auto from_env = run_redsem({"acquire", "t4", "-u", expired.url()},
                                     {{"REDSEM_INSECURE", "1"}, {"REDSEM_LOSS_GRACE", "0"}});
    CHECK(from_env.exit_code == 0);
    CHECK(contains(from_env.err, "warning"));
}

TEST_CASE("mutual TLS: without a client certificate 77, with one it works") {
    const TlsFiles files;
    const TlsServer server(files, {.auth_clients = true});
    const EnvChanges env = tls_env(files, server);

    check_one_error(run_redsem({"acquire", "m"}, env), 77, "client certificate");
    CHECK(run_redsem({"acquire", "m", "--cert", files.path("client.crt"), "--key",
                      files.path("client.key")},
                     env)
              .exit_code == 0);
    EnvChanges with_cert = env;
    with_cert["REDSEM_CERT"] = files.path("client.crt");
    with_cert["REDSEM_KEY"] = files.path("client.key");
    CHECK(run_redsem({"acquire", "m2"}, with_cert).exit_code == 0);
    // A certificate the server's CA did not sign is refused: 77 as well.
    check_one_error(run_redsem({"acquire", "m3", "--cert", files.path("other-server.crt"), "--key",
                                files.path("other-server.key")},
                               env),
                    77, "refused our client certificate");
    // A certificate without its key is a usage error, found before connecting.
    check_one_error(run_redsem({"acquire", "m4", "--cert", files.path("client.crt")}, env), 64,
                    "--key");
    check_one_error(run_redsem({"acquire", "m4", "--cert", files.path("client.crt"), "--key",
                                files.path("server.key")},
                               env),
                    64, "--key");
}

TEST_CASE("plain and TLS mixed up, and a handshake that never ends: clear errors, no hang") {
    const TlsFiles files;
    const TlsServer tls(files);
    RedisServer::Options plain_options;
    plain_options.tcp = true;
    const RedisServer plain(plain_options);

    // With -w 0, no time to ride out what might have been a restart (4.5s before).
    auto start = std::chrono::steady_clock::now();
    check_one_error(run_redsem({"acquire", "x", "-w", "0", "-u",
                                "redis://127.0.0.1:" + std::to_string(tls.port())}),
                    69, "rediss://");
    CHECK(since(start) < 2s);

    start = std::chrono::steady_clock::now();
    check_one_error(
        run_redsem({"acquire", "x", "-u", "redis://127.0.0.1:" + std::to_string(tls.port())}), 69,
        "rediss://");
    // acquire retries a connection broken at first contact (a CLIENT KILL or a restart may
    // have cut it after the request ran) for its reconnect window, then gives up.
    CHECK(since(start) < 10s);
    check_one_error(run_redsem({"status", "-u", "redis://127.0.0.1:" + std::to_string(tls.port())}),
                    69, "rediss://");

    const std::string plain_port = std::to_string(plain.port());
    start = std::chrono::steady_clock::now();
    check_one_error(run_redsem({"acquire", "x", "-u", "rediss://127.0.0.1:" + plain_port,
                                "--cacert", files.path("ca.crt"), "--connect-timeout", "1s"}),
                    69, "use redis://");
    CHECK(since(start) < 4s);

    const SilentListener silent;
    for (const char* command : {"acquire", "status"}) {
        start = std::chrono::steady_clock::now();
        std::vector<std::string> args{command};
        if (std::string(command) == "acquire") {
            args.emplace_back("x");
        }
        args.insert(args.end(), {"-u", "rediss://127.0.0.1:" + std::to_string(silent.port()),
                                 "--cacert", files.path("ca.crt"), "--connect-timeout", "1s"});
        check_one_error(run_redsem(args), 69, "no TLS handshake");
        CHECK(since(start) < 4s);
    }

    // TLS options are for rediss:// URLs.
    check_one_error(run_redsem({"acquire", "x", "-u", "redis://127.0.0.1:" + plain_port, "--cacert",
                                files.path("ca.crt")}),
                    64, "rediss://");
}

TEST_CASE("password files: read, warned about when others may read them, handed to nested "
          "redsem by path only") {
    const TlsFiles files;
    const TlsServer server(files, {.password = k_password});
    EnvChanges env = tls_env(files, server);
    const std::string dir = server.server().dir();

    const std::string path = write_password_file(dir, k_password + "\n", 0600);
    const auto quiet = run_redsem({"acquire", "p", "--password-file", path}, env);
    CHECK(quiet.exit_code == 0);
    CHECK(quiet.err.empty());

    chmod(path.c_str(), 0644);
    const auto warned = run_redsem({"acquire", "p2", "--password-file", path}, env);
    CHECK(warned.exit_code == 0);
    CHECK(warned.err.rfind("redsem: warning: ", 0) == 0);
    CHECK(contains(warned.err, "chmod 600"));
    chmod(path.c_str(), 0600);

    EnvChanges by_env = env;
    by_env["REDSEM_PASSWORD_FILE"] = path;
    CHECK(run_redsem({"acquire", "p3"}, by_env).exit_code == 0);
    EnvChanges redis_cli = env;
    redis_cli["REDISCLI_AUTH"] = k_password;
    CHECK(run_redsem({"acquire", "p4"}, redis_cli).exit_code == 0);
    // REDSEM_PASSWORD comes before REDISCLI_AUTH.
    redis_cli["REDSEM_PASSWORD"] = "Wrong-" + k_password;
    CHECK(run_redsem({"acquire", "p5"}, redis_cli).exit_code == 77);

    // Nested: the command gets the file's path, so redsem inside it can renew, look and
    // queue, with the password in no environment and no output.
    const std::string inner = redsem_binary();
    const std::string script = "env; " + inner + " renew outer \"$REDSEM_TOKEN\" && " + inner +
                               " status outer --json && " + inner +
                               " run inner -- sh -c 'echo inner ran; env'";
    const auto nested =
        run_redsem({"run", "outer", "--password-file", path, "--", "sh", "-c", script}, env);
    INFO(nested.err);
    CHECK(nested.exit_code == 0);
    CHECK(contains(nested.out, "REDSEM_PASSWORD_FILE=" + path));
    CHECK(contains(nested.out, "inner ran"));
    CHECK(contains(nested.out, "\"holders\""));
    CHECK(!contains(nested.out, k_password));
    CHECK(!contains(nested.err, k_password));

    // A password given in REDISCLI_AUTH or REDSEM_PASSWORD is not passed on.
    EnvChanges secret = env;
    secret["REDISCLI_AUTH"] = k_password;
    const auto scrubbed = run_redsem({"run", "scrub", "--", "env"}, secret);
    CHECK(scrubbed.exit_code == 0);
    CHECK(!contains(scrubbed.out, k_password));
    CHECK(!contains(scrubbed.out, "REDISCLI_AUTH"));
}

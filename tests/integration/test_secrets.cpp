// Secrets kept and hostile servers bounded: the password out of reach of run's command and of
// the user's other processes (as an unprivileged user: root reads every process), strict
// password files, and replies from a fake server that declare too much.
#include <catch2/catch.hpp>

#include "support/helpers.hpp"
#include "support/loopback_proxy.hpp"
#include "support/skip.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace redsem;
using namespace redsem::test;
using namespace std::chrono_literals;

namespace {

const std::string k_password = "S3cretPw-29";
constexpr uid_t k_nobody = 65534;

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// A copy of the redsem binary that an unprivileged user can run (the build tree may sit under
// a directory that user cannot enter), and the words that start a command as that user: as
// nobody when the tests run as root (setpriv), else as the user the tests run as.
class Unprivileged {
public:
    Unprivileged() {
        // Like /tmp: the unprivileged user may leave files there too.
        std::filesystem::permissions(m_scratch.dir(), std::filesystem::perms(01777));
        m_binary = m_scratch.path("redsem");
        std::filesystem::copy_file(redsem_binary(), m_binary);
        std::filesystem::permissions(m_binary, std::filesystem::perms(0755));
        if (geteuid() == 0) {
            m_prefix = fmt::format("setpriv --reuid={0} --regid={0} --clear-groups -- ", k_nobody);
        }
    }
    // Whether commands can be run unprivileged here.
    bool available() const {
        return geteuid() != 0 || std::system("setpriv --version >/dev/null 2>&1") == 0;
    }
    // A shell line that runs redsem with `args` as the unprivileged user, from /.
    std::string redsem(const std::string& args) const {
        return "cd / && exec " + m_prefix + m_binary + " " + args;
    }
    // A shell line that runs `script` (no single quotes) in sh as the unprivileged user.
    std::string shell(const std::string& script) const {
        return "cd / && exec " + m_prefix + "sh -c '" + script + "'";
    }
    const std::string& binary() const { return m_binary; }
    const Scratch& scratch() const { return m_scratch; }

private:
    Scratch m_scratch;
    std::string m_binary;
    std::string m_prefix;
};

RedisServer::Options password_server() {
    RedisServer::Options options;
    options.tcp = true;
    options.extra_args = {"--requirepass", k_password};
    options.admin_password = k_password;
    return options;
}

// What a command under `run` prints when it tries every way to find the password in its
// parent, redsem: its environment, its command line and its memory.
// What a command under `run` prints when it tries every way to find the password in its
// parent, redsem: its environment, its command line and its memory. (The quotes keep the
// markers it prints out of the command line it shows.)
const std::string k_snoop = "'cat /proc/$PPID/environ; cat /proc/$PPID/cmdline; "
                            "(exec 3</proc/$PPID/mem) && echo MEM-\"OPENED\"; echo SNOOP\"ED\"'";

// The uid that owns /proc/PID/environ: root's for a process that cannot be inspected.
uid_t proc_owner(int pid) {
    struct stat status {};
    return ::stat(fmt::format("/proc/{}/environ", pid).c_str(), &status) == 0 ? status.st_uid
                                                                              : k_nobody;
}

// A fake server: every connection it takes gets `answer` to its first request, then
// `stream` (when set) written over and over until the client goes away or `stream_limit`
// bytes went out. It counts what it wrote.
class HostileServer {
public:
    HostileServer(std::string answer, std::string stream = {}, std::size_t stream_limit = 0)
        : m_answer(std::move(answer)), m_stream(std::move(stream)), m_limit(stream_limit) {
        m_fd = listen_on_loopback(m_port);
        m_thread = std::thread([this] { serve(); });
    }
    ~HostileServer() {
        m_stop = true;
        shutdown(m_fd, SHUT_RDWR);
        close(m_fd);
        m_thread.join();
    }
    std::string url() const { return fmt::format("redis://127.0.0.1:{}", m_port); }
    std::size_t streamed() const { return m_streamed.load(); }

private:
    void serve() {
        while (!m_stop) {
            const int client = accept(m_fd, nullptr, nullptr);
            if (client < 0) {
                return;
            }
            char request[4096];
            if (read(client, request, sizeof(request)) > 0 && send_all(client, m_answer)) {
                while (!m_stream.empty() && m_streamed < m_limit && send_all(client, m_stream)) {
                    m_streamed += m_stream.size();
                }
                // Then hold the connection until the client gives up on it.
                while (read(client, request, sizeof(request)) > 0) {
                }
            }
            close(client);
        }
    }
    static bool send_all(int fd, const std::string& data) {
        for (std::size_t sent = 0; sent < data.size();) {
            const ssize_t wrote = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (wrote <= 0) {
                return false;
            }
            sent += static_cast<std::size_t>(wrote);
        }
        return true;
    }

    std::string m_answer;
    std::string m_stream;
    std::size_t m_limit;
    int m_fd = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::atomic<std::size_t> m_streamed{0};
    std::thread m_thread;
};

// What redsem says when it refuses a reply of 128 MiB: `message`. A sanitized binary may take
// longer than the command timeout (5s) to read that much; then it gives up on the reply as
// unanswered first (still 69, and no further than the bound, which the callers check).
std::string refused_as([[maybe_unused]] const std::string& message) {
#ifdef REDSEM_SANITIZED
    return "127.0.0.1";
#else
    return message;
#endif
}

} // namespace

TEST_CASE("run's command finds no password in redsem: not in its environment, command line or "
          "memory (an unprivileged user)") {
    Unprivileged user;
    if (!user.available()) {
        REDSEM_SKIP("setpriv (util-linux), to run redsem as an unprivileged user,");
    }
    const RedisServer server(password_server());
    const std::string plain_url = server.tcp_url();
    const std::string url_with_password =
        "redis://:" + k_password + "@" + plain_url.substr(std::string("redis://").size());
    // The password on the command line, in REDSEM_PASSWORD and in REDSEM_URL.
    const std::vector<std::pair<std::string, EnvChanges>> ways{
        {"-u " + url_with_password, {}},
        {"-u " + plain_url, {{"REDSEM_PASSWORD", k_password}}},
        {"", {{"REDSEM_URL", url_with_password}}},
        {"-u " + plain_url, {{"REDISCLI_AUTH", k_password}}}};
    for (const auto& [url_option, env] : ways) {
        EnvChanges with_grace = env;
        with_grace["REDSEM_LOSS_GRACE"] = "0";
        auto child =
            Child::shell(user.redsem(url_option + " run secrets -- sh -c " + k_snoop), with_grace);
        const ProcessResult result = child->wait();
        INFO(url_option << " " << result.out << result.err);
        CHECK(result.exit_code == 0);
        CHECK(contains(result.out, "SNOOPED")); // the command ran
        CHECK_FALSE(contains(result.out + result.err, k_password));
        if (geteuid() == 0) {
            // Not only cut out: out of reach. (As another non-root user, this user's own
            // test process could not show it either way.)
            CHECK_FALSE(contains(result.out, "MEM-OPENED"));
            CHECK(contains(result.err, "Permission denied"));
        }
    }
}

TEST_CASE("acquire --while-pid: the keeper shows no password and cannot be inspected, for hours") {
    Unprivileged user;
    if (!user.available()) {
        REDSEM_SKIP("setpriv (util-linux), to run redsem as an unprivileged user,");
    }
    const RedisServer server(password_server());
    const std::string url_with_password =
        "redis://:" + k_password + "@" + server.tcp_url().substr(std::string("redis://").size());
    // The process the slot is held for lives until the test ends it.
    const std::string pid_file = user.scratch().path("pid");
    auto holder =
        Child::shell(user.shell("sleep 300 & echo $! >" + pid_file + "; " + user.binary() + " -u " +
                                url_with_password + " acquire kept --while-pid $! >/dev/null"),
                     {{"REDSEM_LOSS_GRACE", "0"}, {"REDSEM_PASSWORD", k_password}});
    REQUIRE(holder->wait().exit_code == 0);
    const int sleeper = std::stoi(read_file(pid_file));
    // The keeper: the process left with "--while-pid" among its arguments.
    int keeper = 0;
    REQUIRE(wait_until(
        [&] {
            for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
                const std::string pid = entry.path().filename();
                if (std::all_of(pid.begin(), pid.end(), ::isdigit) &&
                    contains(read_file(entry.path().string() + "/cmdline"), "kept")) {
                    const std::string cmdline = read_file(entry.path().string() + "/cmdline");
                    if (contains(cmdline, "--while-pid") &&
                        contains(cmdline, user.scratch().dir())) {
                        keeper = std::stoi(pid);
                        return true;
                    }
                }
            }
            return false;
        },
        10s));
    // What ps shows, and (read as root) the environment it was given: no password.
    CHECK_FALSE(contains(read_file(fmt::format("/proc/{}/cmdline", keeper)), k_password));
    if (geteuid() == 0) {
        CHECK_FALSE(contains(read_file(fmt::format("/proc/{}/environ", keeper)), k_password));
        // A process nobody but root may inspect: /proc/PID/{environ,mem} are root's.
        CHECK(proc_owner(keeper) == 0);
    }
    // The process ends: the keeper releases and goes.
    kill(sleeper, SIGKILL);
    CHECK(wait_until([&] { return process_gone(keeper); }, 30s));
}

TEST_CASE("a password file is opened once and refused unless it is a regular file, this "
          "user's or root's, that nobody else may write") {
    const RedisServer server(password_server());
    Scratch scratch;
    const std::string file = scratch.path("password");
    std::ofstream(file) << k_password << "\n";
    auto attempt = [&](const std::string& path) {
        return run_redsem({"status", "--password-file", path}, env_for(server));
    };
    auto refused = [&](const std::string& path, const std::string& why) {
        const ProcessResult result = attempt(path);
        INFO(result.err);
        CHECK(result.exit_code == 64);
        CHECK(result.err.rfind("redsem: error: the password file '" + path + "'", 0) == 0);
        CHECK(contains(result.err, why));
        CHECK_FALSE(contains(result.out + result.err, k_password));
    };

    chmod(file.c_str(), 0600);
    const ProcessResult good = attempt(file);
    CHECK(good.exit_code == 0);
    CHECK_FALSE(contains(good.err, "warning"));
    // Readable by others: used, with a warning (as before).
    chmod(file.c_str(), 0644);
    const ProcessResult readable = attempt(file);
    CHECK(readable.exit_code == 0);
    CHECK(contains(readable.err, "can be read by other users; chmod 600 it"));
    // Writable by others: someone else's password may be in it.
    chmod(file.c_str(), 0622);
    refused(file, "can be written by other users: chmod 600 it");
    chmod(file.c_str(), 0620);
    refused(file, "can be written by other users");
    chmod(file.c_str(), 0600);
    // A FIFO would block for ever, /dev/zero fill memory: neither is read.
    const std::string fifo = scratch.path("fifo");
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    refused(fifo, "is not a regular file");
    refused("/dev/zero", "is not a regular file");
    refused(scratch.dir(), "is a directory");
    // Larger than any password.
    const std::string big = scratch.path("big");
    std::ofstream(big) << k_password << "\n" << std::string(70 * 1024, 'x');
    chmod(big.c_str(), 0600);
    refused(big, "is larger than 64 KiB");
    // Another user's file.
    if (geteuid() == 0) {
        REQUIRE(chown(file.c_str(), k_nobody, k_nobody) == 0);
        refused(file, "is owned by another user (nobody, uid 65534), who could change it: run "
                      "redsem as nobody, or give it a copy of your own (install -m 600 FILE "
                      "COPY)");
    }
}

TEST_CASE("a TLS client key others may read earns a warning") {
    Scratch scratch;
    const std::string key = scratch.path("client.key");
    const std::string cert = scratch.path("client.crt");
    std::ofstream(key) << "not read before connecting\n";
    std::ofstream(cert) << "not read before connecting\n";
    chmod(key.c_str(), 0644);
    // Nothing listens on port 1: the warning comes before connecting.
    const ProcessResult readable =
        run_redsem({"status", "-u", "rediss://127.0.0.1:1", "--cert", cert, "--key", key});
    CHECK(contains(readable.err, "redsem: warning: the TLS client key '" + key +
                                     "' can be read by other users; chmod 600 it"));
    chmod(key.c_str(), 0600);
    const ProcessResult private_key =
        run_redsem({"status", "-u", "rediss://127.0.0.1:1", "--cert", cert, "--key", key});
    CHECK_FALSE(contains(private_key.err, "warning"));
    CHECK(private_key.exit_code != 0);
}

TEST_CASE("a URL whose '@' is forgotten never shows the password as a port") {
    const ProcessResult result = run_redsem({"status", "-u", "redis://u:12345678/0"});
    CHECK(result.exit_code == 64);
    CHECK(contains(result.err, "the port is not a number from 1 to 65535 (not shown"));
    CHECK_FALSE(contains(result.err, "12345678"));
}

TEST_CASE("a reply that declares a huge string is refused once it passes 128 MiB, not "
          "buffered until the timeout") {
    // 2 GiB promised and streamed as fast as the client reads it.
    const HostileServer server("$4000000000\r\n", std::string(1 << 20, 'x'), 2048ull << 20);
    // (Reading 128 MiB takes ThreadSanitizer's build over 30s on a loaded machine; the bound
    // below is what says it stopped there.)
    Child limit({"limit", "x", "-u", server.url(), "--connect-timeout", "60s"});
    const ProcessResult result = limit.wait(std::chrono::seconds(120));
    CHECK(result.exit_code == 69);
    CHECK(contains(result.err, refused_as("sent a reply of more than 128 MiB")));
    CHECK(line_count(result.err) == 1);
    // Read no further than the bound (and the socket buffers).
    CHECK(server.streamed() < 256ull << 20);
}

TEST_CASE("a reply of many large strings is refused once they pass 128 MiB together") {
    const std::string string = "$41943040\r\n" + std::string(40 << 20, 'x') + "\r\n";
    const HostileServer server("*10\r\n", string, 10 * string.size());
    const ProcessResult result =
        run_redsem({"limit", "x", "-u", server.url(), "--connect-timeout", "60s"});
    CHECK(result.exit_code == 69);
    CHECK(contains(result.err, refused_as("sent a reply of more than 128 MiB")));
    CHECK(server.streamed() < 256ull << 20);
}

TEST_CASE("a reply line that never ends is refused at 1 MiB, not scanned again and again") {
    // hiredis looks for the end of a line from its start at every read: without the bound,
    // 64 MiB of one line costs minutes of CPU.
    const HostileServer server("+", std::string(1 << 20, 'x'), 64ull << 20);
    const ProcessResult result =
        run_redsem({"limit", "x", "-u", server.url(), "--connect-timeout", "60s"});
    CHECK(result.exit_code == 69);
    CHECK(contains(result.err, "sent a reply of a line longer than 1 MiB"));
    CHECK(server.streamed() < 32ull << 20);
}

TEST_CASE("replies that declare billions of elements are refused at once") {
    std::string nested;
    for (int level = 0; level < 7; ++level) {
        nested += "*2147483647\r\n";
    }
    for (const std::string& answer : {nested, std::string("*2000000\r\n:1\r\n")}) {
        const HostileServer server(answer);
        for (const std::vector<std::string>& command :
             {std::vector<std::string>{"limit", "x"},
              std::vector<std::string>{"acquire", "x", "-w", "0"}}) {
            std::vector<std::string> args = command;
            args.insert(args.end(), {"-u", server.url(), "--connect-timeout", "60s"});
            const ProcessResult result = run_redsem(args);
            INFO(result.err);
            CHECK(result.exit_code == 69);
            CHECK(contains(result.err, "sent a reply of more than 2000000 elements"));
        }
    }
}

TEST_CASE("host names in a server's redirects are escaped, and one that is not a host name is "
          "not followed") {
    const HostileServer server("-MOVED 1 \x1b[31mred\x1b[0m:7000\r\n");
    const ProcessResult result = run_redsem({"limit", "x", "-u", server.url()});
    INFO(result.err);
    CHECK(result.exit_code != 0);
    CHECK_FALSE(contains(result.err, "\x1b"));
    CHECK(contains(result.err, "\\x1b[31mred"));
}

#pragma once

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/wire.hpp"
#include "support/build_paths.hpp"
#include "support/clock.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace redsem::test {

// A scratch directory for files the test and its children write: a fresh temporary
// directory, removed with everything in it by the destructor.
class Scratch {
public:
    Scratch() {
        std::string pattern =
            (std::filesystem::temp_directory_path() / "redsem-scratch-XXXXXX").string();
        if (mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        m_dir = pattern;
    }
    ~Scratch() {
        std::error_code ignored;
        std::filesystem::remove_all(m_dir, ignored);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;

    const std::string& dir() const { return m_dir; }
    std::string path(const std::string& name) const { return m_dir + "/" + name; }

private:
    std::string m_dir;
};

// Runs lua/acquire.lua for `token` on limit 1 of `keys`, waiting if busy: a client at the
// script level, which can do what a process cannot (stall between two calls on purpose).
// `args` may change what is sent: the token and ttl are set here.
inline Reply acquire_by_script(Connection& client, const Keys& keys, const std::string& token,
                               Milliseconds ttl, bool known, wire::AcquireArgs args = {}) {
    args.token = token;
    args.ttl = ttl;
    args.known = known;
    args.limit = args.limit.value_or(1);
    if (args.liveness.count() == 0) {
        args.liveness = Milliseconds{60'000};
    }
    if (args.meta_json.empty()) {
        args.meta_json = R"({"host":"h","pid":1,"user":"u","label":""})";
    }
    return client.eval({scripts::k_acquire_script, keys.script_keys(),
                        keys.script_args(wire::acquire_args(args))});
}

// Runs lua/release.lua for `token`, as somebody else would (`redsem release`): a waiter is
// told that its place was released.
inline ReleaseOutcome release_by_script(Connection& client, const Keys& keys,
                                        const std::string& token) {
    return wire::decode_release(
        client.eval({scripts::k_release_script, keys.script_keys(),
                     keys.script_args(wire::release_args(token, false, std::nullopt, false))}));
}

// The kind of a script's reply ("ok", "wait", ...; see semaphore/wire.hpp).
inline std::string reply_kind(const Reply& reply) {
    return wire::Fields(reply, "a script").kind();
}

// The environment that points redsem at `server`.
inline EnvChanges env_for(const RedisServer& server) {
    return {{"REDSEM_URL", server.socket_url()}};
}

// `err` without the lines that tell of a wait off a terminal ("redsem: waiting for ...").
inline std::string without_wait_lines(const std::string& err) {
    std::string kept;
    std::size_t start = 0;
    while (start < err.size()) {
        const std::size_t end = std::min(err.find('\n', start), err.size());
        const std::string line = err.substr(start, end - start);
        if (line.rfind("redsem: waiting for '", 0) != 0) {
            kept += line + (end < err.size() ? "\n" : "");
        }
        start = end + 1;
    }
    return kept;
}

// The lines of `text`, without their newlines.
inline std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

// The number of lines in `text` (a final line without newline counts).
inline std::size_t line_count(const std::string& text) {
    std::size_t lines = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\n' || i + 1 == text.size()) {
            ++lines;
        }
    }
    return lines;
}

// Acquires `name` through the binary with --json and returns the parsed object.
inline nlohmann::json acquire_json(const RedisServer& server,
                                   const std::vector<std::string>& args) {
    std::vector<std::string> all{"acquire"};
    all.insert(all.end(), args.begin(), args.end());
    all.emplace_back("--json");
    const ProcessResult result = run_redsem(all, env_for(server));
    if (result.exit_code != 0) {
        throw std::runtime_error("acquire failed: " + result.err);
    }
    return nlohmann::json::parse(result.out);
}

// One JSON value per line of `text` (`log --json`, `log -f --json`).
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
    std::vector<nlohmann::json> values;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
        values.push_back(nlohmann::json::parse(line));
    }
    return values;
}

// The history of `name`, one object per event, as `redsem log NAME --json` prints it.
inline std::vector<nlohmann::json> history_events(const RedisServer& server,
                                                  const std::string& name) {
    const ProcessResult result = run_redsem({"log", name, "--json"}, env_for(server));
    if (result.exit_code != 0) {
        throw std::runtime_error("log failed: " + result.err);
    }
    return json_lines(result.out);
}

// The Redis key of `part` ("state", "holders", "queue", ...) of semaphore `name` under the
// default prefix.
inline std::string semaphore_key(const std::string& name, const std::string& part) {
    return "redsem:{" + name + "}:" + part;
}

// Polls until `path` exists; false when `timeout` passes first.
inline bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (!std::filesystem::exists(path)) {
        if (std::chrono::steady_clock::now() > give_up) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

// Whether `pid` is gone or a zombie (killed, not yet reaped by its parent).
inline bool process_gone(int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    if (!stat) {
        return true;
    }
    std::string content;
    try {
        content.assign(std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>());
    } catch (const std::exception&) {
        return true; // reaped between the open and the read (libstdc++ throws on ESRCH)
    }
    const auto close = content.rfind(')');
    return close != std::string::npos && content.size() > close + 2 && content[close + 2] == 'Z';
}

// Polls until `done()` or `timeout` passes; returns the final done().
template <typename Condition> bool wait_until(Condition done, std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() > give_up) {
            return done();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
}

// The server's clock (TIME) in epoch milliseconds: the clock lease deadlines are on.
inline long long server_time_ms(Connection& admin) {
    const Reply time = admin.call({"TIME"});
    return std::stoll(time.at(0).as_string()) * 1000 + std::stoll(time.at(1).as_string()) / 1000;
}

// The first line of `text` (a token that acquire printed), without its newline.
inline std::string first_line(const std::string& text) {
    return text.substr(0, text.find('\n'));
}

inline long long zcard(Connection& admin, const std::string& key) {
    return admin.call({"ZCARD", key}).as_integer();
}

// How many times the server ran `command` ("fcall", "function|load") since its statistics were
// reset (scripts' inner calls included), from INFO commandstats; with `field`
// "failed_calls", how many of those failed (NOSCRIPT, an error inside a script).
inline long long command_calls(Connection& admin, const std::string& command,
                               const std::string& field = "calls") {
    const std::string stats = admin.call({"INFO", "commandstats"}).as_string();
    const std::size_t line = stats.find("cmdstat_" + command + ":");
    if (line == std::string::npos) {
        return 0;
    }
    const std::size_t at = stats.find(field + "=", line);
    return at == std::string::npos ? 0 : std::stoll(stats.substr(at + field.size() + 1));
}

// How many scripts the server ran to their end: as functions (FCALL) or by EVALSHA or EVAL
// (an EVALSHA answered NOSCRIPT, or FCALL "Function not found", ran nothing).
inline long long script_calls(Connection& admin) {
    long long ran = 0;
    for (const char* command : {"fcall", "evalsha", "eval"}) {
        ran += command_calls(admin, command) - command_calls(admin, command, "failed_calls");
    }
    return ran;
}

// One field of INFO `section` ("blocked_clients" of "clients"), or "" when it is not there.
inline std::string info_field(Connection& admin, const std::string& section,
                              const std::string& field) {
    const std::string info = admin.call({"INFO", section}).as_string();
    const std::string wanted = "\n" + field + ":";
    const std::size_t at = info.find(wanted);
    if (at == std::string::npos) {
        return "";
    }
    const std::size_t from = at + wanted.size();
    return info.substr(from, info.find_first_of("\r\n", from) - from);
}

// How many keys the server evicted since it started (INFO stats), from any database.
inline long long evicted_keys(Connection& admin) {
    return std::stoll(info_field(admin, "stats", "evicted_keys"));
}

// A shell script for `redsem run ... -- sh SCRIPT` that logs its entry and exit to `log` with
// the machine's real clock ("S PID NS", "E PID NS"), holding the slot for `hold` (sleep's
// syntax); a command stopped because its lease was lost logs its exit from its TERM trap.
inline std::string logging_body(const std::string& log, const std::string& hold = "0.05") {
    return "trap 'echo \"E $$ $(date +%s%N)\" >> " + log + "; exit 143' TERM\n" +
           "echo \"S $$ $(date +%s%N)\" >> " + log + "\n" + "sleep " + hold + "\n" +
           "echo \"E $$ $(date +%s%N)\" >> " + log + "\n";
}

// What an observer that trusts only the commands' own log (logging_body()) saw.
struct InsideLog {
    int most_inside = 0;         // the most commands inside at once
    long long entries = 0;       // entries in all
    long long entries_after = 0; // entries after the time given to observe_inside()
};

// Replays logs of logging_body() lines in time order, each log's commands holding `weight`
// slots (the second of each pair): most_inside counts slots. A command whose exit was never
// logged counts as inside until the end.
inline InsideLog observe_inside(const std::vector<std::pair<std::string, int>>& logs,
                                long long after_ns = 0) {
    struct Event {
        long long at;
        int delta;
    };
    std::vector<Event> events;
    InsideLog seen;
    for (const auto& [text, weight] : logs) {
        std::map<std::string, int> open;
        std::istringstream lines(text);
        std::string kind;
        std::string id;
        long long at = 0;
        while (lines >> kind >> id >> at) {
            if (kind == "S") {
                events.push_back({at, +weight});
                ++open[id];
                ++seen.entries;
                seen.entries_after += at > after_ns ? 1 : 0;
            } else if (kind == "E" && open[id] > 0) {
                events.push_back({at, -weight});
                --open[id];
            }
        }
    }
    std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
        return a.at != b.at ? a.at < b.at : a.delta < b.delta;
    });
    int inside = 0;
    for (const Event& event : events) {
        inside += event.delta;
        seen.most_inside = std::max(seen.most_inside, inside);
    }
    return seen;
}

// The same for one log whose commands hold one slot each.
inline InsideLog observe_inside(const std::string& text, long long after_ns = 0) {
    return observe_inside({{text, 1}}, after_ns);
}

// `clients` shells that each run `redsem run NAME RUN_ARGS -q -- sh BODY` in a loop until
// stopped, BODY logging the command's entry and exit (logging_body()) and the loop appending
// each exit status of redsem run to a file; all in a temporary directory of its own, removed
// with it by the destructor. `binary` is the redsem they run (another release's, say).
class RunLoops {
public:
    RunLoops(int clients, const std::string& name, const std::string& run_args, EnvChanges env,
             const std::string& binary = redsem_binary())
        : m_dir(m_scratch.dir()) {
        std::ofstream(m_dir + "/body.sh") << logging_body(m_dir + "/inside.log");
        const std::string loop = "while [ ! -e " + m_dir + "/stop ]; do \"$REDSEM\" run " + name +
                                 " " + run_args + " -q -- sh " + m_dir + "/body.sh; echo $? >> " +
                                 m_dir + "/exits; done";
        env["REDSEM"] = binary;
        for (int i = 0; i < clients; ++i) {
            m_loops.push_back(Child::shell(loop, env));
        }
    }
    ~RunLoops() {
        m_loops.clear(); // SIGKILLs any still running, before the directory goes
    }
    RunLoops(const RunLoops&) = delete;
    RunLoops& operator=(const RunLoops&) = delete;

    // Commands that entered so far.
    long long entries() const { return observe_inside(read_file(m_dir + "/inside.log")).entries; }
    // Tells every loop to stop after its current run, and waits for them.
    void stop() {
        std::ofstream(m_dir + "/stop").put('\n');
        for (auto& loop : m_loops) {
            loop->wait(std::chrono::seconds(90));
        }
    }
    InsideLog seen(long long after_ns = 0) const {
        return observe_inside(read_file(m_dir + "/inside.log"), after_ns);
    }
    // The exit statuses of redsem run, one per line.
    std::string exits() const { return read_file(m_dir + "/exits"); }
    // The commands' own log (logging_body() lines).
    std::string inside_log() const { return read_file(m_dir + "/inside.log"); }

private:
    Scratch m_scratch;
    std::string m_dir;
    std::vector<std::unique_ptr<Child>> m_loops;
};

// The rules of the README's "Least privilege" ACL SETUSER lines: [0] one server, [1] Cluster.
inline std::vector<std::vector<std::string>> readme_acl_rules() {
    std::istringstream readme(read_file(source_dir() + "/README.md"));
    std::vector<std::vector<std::string>> lines;
    const std::string start = "ACL SETUSER redsem on >PASSWORD ";
    for (std::string line; std::getline(readme, line);) {
        if (line.rfind(start, 0) != 0) {
            continue;
        }
        std::istringstream words(line.substr(std::string("ACL SETUSER redsem ").size()));
        std::vector<std::string> rules;
        for (std::string word; words >> word;) {
            rules.push_back(word == ">PASSWORD" ? ">redsem-pw" : word);
        }
        lines.push_back(rules);
    }
    return lines;
}

} // namespace redsem::test

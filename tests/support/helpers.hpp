#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "semaphore/keys.hpp"
#include "support/process.hpp"
#include "support/redis_server.hpp"

namespace redsem::test {

// Runs lua/acquire.lua for `token` on limit 1 of `keys`, waiting if busy: a client at the
// script level, which can do what a process cannot (stall between two calls on purpose).
inline Reply acquire_by_script(Connection& client, const Keys& keys, const std::string& token,
                               const char* ttl_ms, const char* known) {
    return client.eval({scripts::k_acquire_script,
                        keys.script_keys(),
                        {keys.wake_prefix, token, "1", ttl_ms, "wait", "60000",
                         R"({"host":"h","pid":1,"user":"u","label":""})", known, ""}});
}

// Runs lua/release.lua for `token`.
inline Reply release_by_script(Connection& client, const Keys& keys, const std::string& token) {
    return client.eval({scripts::k_release_script, keys.script_keys(), {keys.wake_prefix, token}});
}

// The environment that points redsem at `server`.
inline EnvChanges env_for(const RedisServer& server) {
    return {{"REDSEM_URL", server.socket_url()}};
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

inline long long zcard(Connection& admin, const std::string& key) {
    return admin.call({"ZCARD", key}).as_integer();
}

} // namespace redsem::test

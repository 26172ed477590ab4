#pragma once

// For the tests of `run --once-per`: a job that writes down who ran it (the observer of how
// many runs an occurrence had), the history's events of one kind, and the claim as stored.

#include "support/helpers.hpp"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace redsem::test {

// `redsem run [options] NAME -- sh -c 'echo WHO >> FILE; BODY'`.
inline std::vector<std::string> job(std::vector<std::string> options, const std::string& name,
                                    const std::string& who, const std::string& file,
                                    const std::string& body = "true") {
    options.insert(options.begin(), "run");
    options.insert(options.end(),
                   {name, "--", "sh", "-c", "echo " + who + " >> " + file + "; " + body});
    return options;
}

// Creates the empty file `path` (a job's go-ahead).
inline void touch(const std::string& path) {
    std::fclose(std::fopen(path.c_str(), "w"));
}

// A job body that says it started (creates `up`) and runs until `go` exists.
inline std::string until_go(const std::string& up, const std::string& go) {
    return "touch " + up + "; while [ ! -e " + go + " ]; do sleep 0.05; done";
}

// The events of `name` of one kind, as `redsem log NAME --json` prints them.
inline std::vector<nlohmann::json> events_of(const RedisServer& server, const std::string& name,
                                             const std::string& kind) {
    std::vector<nlohmann::json> found;
    for (const nlohmann::json& event : history_events(server, name)) {
        if (event["event"] == kind) {
            found.push_back(event);
        }
    }
    return found;
}

// The claim of `name`'s occurrence as stored: "SINCE UNTIL TOKEN STAGE JSON", "" for none.
inline std::string claim_of(Connection& admin, const std::string& name) {
    const Reply field = admin.call({"HGET", semaphore_key(name, "state"), "occurrence"});
    return field.is_nil() ? std::string() : field.as_string();
}

// The server time at which the claim of `name`'s occurrence ends (0: none).
inline long long claim_ends_ms(Connection& admin, const std::string& name) {
    const std::string claim = claim_of(admin, name);
    return claim.empty() ? 0 : std::atoll(claim.c_str() + claim.find(' ') + 1);
}

} // namespace redsem::test

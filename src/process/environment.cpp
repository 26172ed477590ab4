#include "process/environment.hpp"

#include "redis/url.hpp"
#include "util/errors.hpp"

#include <algorithm>
#include <array>
#include <string_view>

extern char** environ;

namespace redsem {

namespace {

// Secrets the command must not see, and what this function sets itself.
constexpr std::array<std::string_view, 9> k_replaced{"REDSEM_PASSWORD", "REDSEM_SENTINEL_PASSWORD",
                                                     "REDISCLI_AUTH",   "REDSEM_NAME",
                                                     "REDSEM_TOKEN",    "REDSEM_FENCE",
                                                     "REDSEM_SLOT",     "REDSEM_SLOTS",
                                                     "REDSEM_LIMIT"};

// The entry with any password taken out of the URL; nothing when it does not parse (it might
// hold a password we cannot find).
std::optional<std::string> without_password(std::string_view variable, std::string_view url) {
    try {
        RedisUrl parsed = parse_redis_url(url);
        if (!parsed.password) {
            return std::string(variable) + "=" + std::string(url);
        }
        return std::string(variable) + "=" + parsed.describe();
    } catch (const UsageError&) {
        return std::nullopt;
    }
}

} // namespace

std::vector<std::string> child_environment(const std::string& name, const Lease& lease,
                                           const std::vector<std::string>& connection) {
    auto set_by_connection = [&](std::string_view variable) {
        return std::any_of(connection.begin(), connection.end(), [&](const std::string& entry) {
            return entry.size() > variable.size() &&
                   entry.compare(0, variable.size(), variable) == 0 &&
                   entry[variable.size()] == '=';
        });
    };
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string_view text(*entry);
        const std::string_view variable = text.substr(0, text.find('='));
        const std::string_view value = text.substr(std::min(text.size(), variable.size() + 1));
        bool replaced = false;
        for (const std::string_view name_to_drop : k_replaced) {
            replaced = replaced || variable == name_to_drop;
        }
        if (replaced || set_by_connection(variable)) {
            continue;
        }
        if (variable == "REDSEM_URL" || variable == "REDIS_URL") {
            if (auto cleaned = without_password(variable, value)) {
                env.push_back(std::move(*cleaned));
            }
            continue;
        }
        env.emplace_back(text);
    }
    env.insert(env.end(), connection.begin(), connection.end());
    env.push_back("REDSEM_NAME=" + name);
    env.push_back("REDSEM_TOKEN=" + lease.token);
    env.push_back("REDSEM_FENCE=" + std::to_string(lease.fence));
    env.push_back("REDSEM_SLOT=" + std::to_string(lease.slot));
    std::string slots;
    for (const long long slot : lease.slots.empty() ? std::vector{lease.slot} : lease.slots) {
        slots += (slots.empty() ? "" : " ") + std::to_string(slot);
    }
    env.push_back("REDSEM_SLOTS=" + slots);
    env.push_back("REDSEM_LIMIT=" + std::to_string(lease.limit));
    return env;
}

} // namespace redsem

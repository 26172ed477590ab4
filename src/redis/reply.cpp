#include "redis/reply.hpp"

#include "util/name.hpp"

#include <array>
#include <fmt/format.h>

namespace redsem {

namespace {

constexpr std::string_view type_name(Reply::Type type) {
    switch (type) {
    case Reply::Type::nil:
        return "nil";
    case Reply::Type::status:
        return "status";
    case Reply::Type::error:
        return "error";
    case Reply::Type::integer:
        return "integer";
    case Reply::Type::string:
        return "string";
    case Reply::Type::array:
        return "array";
    }
    return "unknown";
}

[[noreturn]] void unexpected(const Reply& reply, std::string_view wanted) {
    std::string detail = reply.is_error() ? ": " + printable(reply.text, 200) : std::string();
    throw InternalError(fmt::format("unexpected reply from Redis: wanted {}, got {}{}", wanted,
                                    type_name(reply.type), detail));
}

} // namespace

long long Reply::as_integer() const {
    if (type != Type::integer) {
        unexpected(*this, "integer");
    }
    return integer;
}

const std::string& Reply::as_string() const {
    if (type != Type::string && type != Type::status) {
        unexpected(*this, "string");
    }
    return text;
}

const std::vector<Reply>& Reply::as_array() const {
    if (type != Type::array) {
        unexpected(*this, "array");
    }
    return elements;
}

const Reply& Reply::at(std::size_t index) const {
    const auto& all = as_array();
    if (index >= all.size()) {
        throw InternalError(fmt::format(
            "unexpected reply from Redis: array of {} has no element {}", all.size(), index));
    }
    return all[index];
}

ReplyErrorMeaning classify_reply_error(std::string_view error) {
    // Redis 6.2 wraps an error raised inside a script: "ERR Error running script (call to
    // f_...): @user_script:12: WRONGTYPE ...". Classify the error inside.
    if (error.rfind("ERR Error running script", 0) == 0) {
        const std::size_t inner = error.find("@user_script:");
        const std::size_t colon = inner == std::string_view::npos ? inner : error.find(": ", inner);
        if (colon != std::string_view::npos) {
            auto meaning = classify_reply_error(error.substr(colon + 2));
            if (meaning.code != ExitCode::internal) {
                return meaning;
            }
        }
    }
    const std::string_view code = error.substr(0, error.find(' '));
    const std::string shown = printable(error, 200);

    struct Known {
        std::string_view code;
        ExitCode exit;
        std::string_view explanation;
        Transience transience = Transience::permanent;
    };
    constexpr Transience passes = Transience::transient;
    static constexpr std::array<Known, 17> k_known{{
        {"NOAUTH", ExitCode::denied,
         "Redis requires a password: use --password-file, set REDSEM_PASSWORD, or put it in "
         "the URL"},
        {"WRONGPASS", ExitCode::denied, "Redis rejected the user name or password"},
        {"NOPERM", ExitCode::denied, "Redis denied permission (ACL)"},
        {"DENIED", ExitCode::unavailable,
         "Redis refuses clients from other hosts (protected mode, no password set): give it a "
         "password or bind it to the address used"},
        {"WRONGTYPE", ExitCode::conflict, "a key holds the wrong kind of value"},
        {"LOADING", ExitCode::unavailable, "Redis is loading its data set; try again shortly",
         passes},
        {"READONLY", ExitCode::unavailable,
         "Redis is a read-only replica; point --url at the primary"},
        {"OOM", ExitCode::unavailable, "Redis is out of memory (maxmemory reached)"},
        {"MASTERDOWN", ExitCode::unavailable, "the Redis replica has lost its primary", passes},
        {"UNBLOCKED", ExitCode::unavailable,
         "Redis ended a blocked command because it stopped being the primary", passes},
        {"MISCONF", ExitCode::unavailable, "Redis refuses writes because it cannot save to disk"},
        {"NOREPLICAS", ExitCode::unavailable,
         "Redis refuses writes: fewer good replicas are connected than its "
         "min-replicas-to-write asks",
         passes},
        {"BUSY", ExitCode::unavailable, "Redis is busy running a long script", passes},
        {"TRYAGAIN", ExitCode::unavailable, "Redis Cluster is resharding; try again", passes},
        {"CLUSTERDOWN", ExitCode::unavailable, "Redis Cluster is down", passes},
        {"MOVED", ExitCode::unavailable,
         "Redis Cluster kept redirecting the command (its slots are being reconfigured)", passes},
        {"ASK", ExitCode::unavailable,
         "Redis Cluster kept redirecting the command (its slots are being migrated)", passes},
    }};
    if (code == "EVICTING") {
        // redsem's own refusal (lua/lib/eviction.lua), which says it all.
        return {ExitCode::unavailable,
                fmt::format("redsem admits nobody on this Redis: {}",
                            printable(error.substr(std::min(error.size(), code.size() + 1)), 300))};
    }
    if (code == "NOPERM") {
        // "NOPERM this user has no permissions to run the 'xadd' command": name the rule too.
        const std::size_t open = error.find('\'');
        const std::size_t close =
            open == std::string_view::npos ? open : error.find('\'', open + 1);
        if (close != std::string_view::npos && error.find(" command") != std::string_view::npos) {
            const std::string_view command = error.substr(open + 1, close - open - 1);
            return {ExitCode::denied,
                    fmt::format("Redis denied permission (ACL) to '{}': add +{} to the user's "
                                "ACL rules (see Least privilege in redsem(1)) ({})",
                                printable(command), printable(command), shown)};
        }
    }
    for (const Known& known : k_known) {
        if (code == known.code) {
            return {known.exit, fmt::format("{} ({})", known.explanation, shown), known.transience};
        }
    }
    if (code == "ERR" && error.find("password") != std::string_view::npos &&
        (error.find("invalid") != std::string_view::npos ||
         error.find("without any password") != std::string_view::npos)) {
        return {ExitCode::denied, fmt::format("Redis rejected the password ({})", shown)};
    }
    // Redis 7 refuses long commands from a client that has not authenticated this way: the
    // same refusal as NOAUTH, told the same way (not as a protocol error).
    if (code == "ERR" && error.find("unauthenticated") != std::string_view::npos) {
        return {ExitCode::denied,
                "Redis requires a password: use --password-file, set REDSEM_PASSWORD, or put it "
                "in the URL (NOAUTH)"};
    }
    if (code == "ERR" && error.find("max number of clients reached") != std::string_view::npos) {
        return {ExitCode::unavailable,
                fmt::format("Redis refused this client: it has as many as its maxclients allows "
                            "({})",
                            shown)};
    }
    // Redis 7 refuses a command that a script runs for a user whose ACL lacks it.
    if (code == "ERR" && error.find("can't run this command") != std::string_view::npos) {
        return {ExitCode::denied,
                fmt::format("Redis denied permission (ACL) to a command redsem's script runs "
                            "({})",
                            shown)};
    }
    if (code == "ERR" && error.find("unknown command") != std::string_view::npos) {
        // Not the arguments Redis quotes after the name: a script's keys, or anything else.
        return {ExitCode::unavailable,
                fmt::format("the server does not support a command redsem needs (renamed away, "
                            "or older than Redis 6.2) ({})",
                            printable(error.substr(0, error.find(", with args")), 200))};
    }
    return {ExitCode::internal, fmt::format("Redis replied with an error: {}", shown)};
}

void throw_reply_error(std::string_view error) {
    auto meaning = classify_reply_error(error);
    throw Error(meaning.code, meaning.message, meaning.transience);
}

} // namespace redsem

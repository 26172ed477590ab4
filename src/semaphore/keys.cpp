#include "semaphore/keys.hpp"

#include "semaphore/wire.hpp"

#include "redis/connection.hpp"
#include "semaphore/protocol.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <fmt/format.h>

namespace redsem {

Keys Keys::make(std::string_view prefix, std::string_view name) {
    const std::string base = fmt::format("{}:{{{}}}:", prefix, name);
    return Keys{.state = base + "state",
                .holders = base + "holders",
                .info = base + "info",
                .queue = base + "queue",
                .alive = base + "alive",
                .slots = base + "slots",
                .epoch = fmt::format("{}:epoch", prefix),
                .own_epoch = base + "epoch",
                .log = base + "log",
                .wake_prefix = base + std::string(k_wake_part)};
}

std::string Keys::wake(std::string_view token) const {
    return wake_prefix + std::string(token);
}

std::string Keys::nudge(std::string_view token) const {
    return wake(token) + std::string(k_nudge_suffix);
}

std::string Keys::left(std::string_view token) const {
    return wake(token) + std::string(k_left_suffix);
}

std::string Keys::too_large(std::string_view token) const {
    return wake(token) + std::string(k_too_large_suffix);
}

std::string Keys::released(std::string_view token) const {
    return wake(token) + std::string(k_released_suffix);
}

std::string Keys::drained() const {
    return wake_prefix + std::string(k_drained_list);
}

std::vector<std::string> Keys::every_key(std::string_view token) const {
    return {state,
            holders,
            info,
            queue,
            alive,
            slots,
            log,
            wake(token),
            nudge(token),
            left(token),
            too_large(token),
            released(token),
            drained()};
}

std::vector<std::string> Keys::script_keys() const {
    return {state, holders, info, queue, alive, slots, epoch, log};
}

std::vector<std::string> Keys::script_args(std::vector<std::string> args, std::string proof) const {
    args.insert(args.begin(), {wake_prefix, std::move(proof)});
    return args;
}

std::vector<std::string> Keys::cluster_script_keys() const {
    return {state, holders, info, queue, alive, slots, own_epoch, log};
}

void check_readable(const Reply& reply, std::string_view name, std::string_view consequence) {
    if (const std::optional<long long> format = wire::newer_format(reply)) {
        // (Not `consequence`: its advice is for a foreign key.)
        throw ConflictError(fmt::format("semaphore '{}' was stored by a newer redsem (state format "
                                        "{}; this one reads up to {}); nothing was changed: use "
                                        "that redsem for it",
                                        printable(name), *format, k_state_format));
    }
    const std::optional<wire::WrongType> wrong = wire::wrong_type(reply);
    if (!wrong) {
        return;
    }
    throw ConflictError(fmt::format("key '{}' of semaphore '{}' holds a {}, not the {} redsem "
                                    "keeps there; {}",
                                    printable(wrong->key, 300), printable(name), wrong->found,
                                    wrong->wanted, consequence));
}

std::optional<wire::WrongType> find_foreign_key(Connection& connection, const Keys& keys) {
    const std::pair<const std::string*, std::string_view> expected[] = {
        {&keys.state, "hash"}, {&keys.holders, "zset"}, {&keys.info, "hash"}, {&keys.queue, "zset"},
        {&keys.alive, "zset"}, {&keys.slots, "string"}, {&keys.log, "stream"}};
    std::vector<Command> types;
    for (const auto& [key, type] : expected) {
        types.push_back(Command{*key, {"TYPE", *key}});
    }
    const std::vector<Reply> found = connection.pipeline(types);
    for (std::size_t i = 0; i < found.size(); ++i) {
        const Reply& type = found[i];
        if (type.type == Reply::Type::status && type.text != "none" &&
            type.text != expected[i].second) {
            return wire::WrongType{.key = *expected[i].first,
                                   .found = type.text,
                                   .wanted = std::string(expected[i].second)};
        }
    }
    return std::nullopt;
}

void throw_foreign_key(Connection& connection, const Keys& keys, std::string_view name,
                       std::string_view consequence) {
    if (const std::optional<wire::WrongType> wrong = find_foreign_key(connection, keys)) {
        throw ConflictError(fmt::format("key '{}' of semaphore '{}' holds a {}, not the {} "
                                        "redsem keeps there (made by hand?); {}",
                                        printable(wrong->key, 300), printable(name),
                                        printable(wrong->found), wrong->wanted, consequence));
    }
    throw ConflictError(fmt::format("a key of semaphore '{}' held the wrong kind of value; {}",
                                    printable(name), consequence));
}

} // namespace redsem

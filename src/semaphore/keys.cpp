#include "semaphore/keys.hpp"

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
                .wake_prefix = base + "wake:"};
}

std::vector<std::string> Keys::script_keys() const {
    return {state, holders, info, queue, alive, slots, epoch, log};
}

std::vector<std::string> Keys::cluster_script_keys() const {
    return {state, holders, info, queue, alive, slots, own_epoch, log};
}

void check_key_types(const Reply& reply, std::string_view name, std::string_view consequence) {
    if (reply.type != Reply::Type::array || reply.elements.empty() ||
        reply.elements[0].type != Reply::Type::string || reply.elements[0].text != "wrongtype") {
        return;
    }
    throw ConflictError(fmt::format("key '{}' of semaphore '{}' holds a {}, not the {} redsem "
                                    "keeps there; {}",
                                    printable(reply.at(1).as_string(), 300), printable(name),
                                    reply.at(2).as_string(), reply.at(3).as_string(), consequence));
}

} // namespace redsem

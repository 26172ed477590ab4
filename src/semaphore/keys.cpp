#include "semaphore/keys.hpp"

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
                .wake_prefix = base + "wake:"};
}

std::vector<std::string> Keys::script_keys() const {
    return {state, holders, info, queue, alive, slots, epoch};
}

} // namespace redsem

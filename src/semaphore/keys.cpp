#include "semaphore/keys.hpp"

#include <fmt/format.h>

namespace redsem {

Keys Keys::make(std::string_view prefix, std::string_view name) {
    const std::string base = fmt::format("{}:{{{}}}:", prefix, name);
    return Keys{base + "state", base + "holders", base + "info", base + "queue",
                base + "alive", base + "slots",   base + "wake:"};
}

std::vector<std::string> Keys::script_keys() const {
    return {state, holders, info, queue, alive, slots};
}

} // namespace redsem

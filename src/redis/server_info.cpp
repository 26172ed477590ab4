#include "redis/server_info.hpp"

#include <charconv>

namespace redsem {

ServerInfo::ServerInfo(std::string_view text) {
    while (!text.empty()) {
        const std::size_t end = text.find('\n');
        std::string_view line = text.substr(0, end);
        text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
        if (!line.empty() && line.back() == '\r') {
            line.remove_suffix(1);
        }
        const std::size_t colon = line.find(':');
        if (line.empty() || line.front() == '#' || colon == std::string_view::npos) {
            continue;
        }
        m_fields.emplace(std::string(line.substr(0, colon)), std::string(line.substr(colon + 1)));
    }
}

std::optional<std::string> ServerInfo::get(std::string_view field) const {
    const auto found = m_fields.find(field);
    if (found == m_fields.end()) {
        return std::nullopt;
    }
    return found->second;
}

std::optional<long long> ServerInfo::number(std::string_view field) const {
    const auto found = m_fields.find(field);
    if (found == m_fields.end()) {
        return std::nullopt;
    }
    long long value = 0;
    const std::string& text = found->second;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end != text.data() + text.size()) {
        return std::nullopt;
    }
    return value;
}

} // namespace redsem

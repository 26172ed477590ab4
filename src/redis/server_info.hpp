#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace redsem {

// The fields of an INFO reply ("redis_version" -> "7.0.15"), section headers and blank lines
// left out. Works for HELLO's and CLUSTER INFO's "field:value" text as well.
class ServerInfo {
public:
    ServerInfo() = default;
    explicit ServerInfo(std::string_view text);

    // The value of `field`, or nullopt when the reply had none.
    std::optional<std::string> get(std::string_view field) const;
    // The value of `field` as a whole number, or nullopt when missing or not a number.
    std::optional<long long> number(std::string_view field) const;
    bool empty() const noexcept { return m_fields.empty(); }
    const std::map<std::string, std::string, std::less<>>& fields() const noexcept {
        return m_fields;
    }

private:
    std::map<std::string, std::string, std::less<>> m_fields;
};

} // namespace redsem

#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace redsem {

// Writes the Prometheus text exposition format (version 0.0.4): each metric family's HELP and
// TYPE lines once, then its samples. Families must be given whole, one after the other.
class PrometheusWriter {
public:
    using Labels = std::vector<std::pair<std::string, std::string>>;

    // Starts family `name` ("gauge" or "counter"); `help` is one line.
    void family(std::string_view name, std::string_view type, std::string_view help);
    // One sample of the current family.
    void sample(const Labels& labels, double value);
    void sample(const Labels& labels, long long value);

    const std::string& text() const noexcept { return m_text; }

private:
    void labels_and_name(const Labels& labels);

    std::string m_family;
    std::string m_text;
};

// A label value as the format quotes it, terminal_safe() (control characters and invalid
// UTF-8 as \xNN, as the tables show them), then backslash and double quote escaped.
std::string prometheus_label_value(std::string_view value);

// HELP text: backslash and line feed escaped.
std::string prometheus_help(std::string_view text);

} // namespace redsem

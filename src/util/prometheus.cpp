#include "util/prometheus.hpp"

#include "util/name.hpp"

#include <cmath>
#include <fmt/format.h>

namespace redsem {

namespace {

// Backslash and line feed escaped, and double quotes too when `quotes`.
std::string escape(std::string_view text, bool quotes) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && quotes) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
    return out;
}

} // namespace

std::string prometheus_label_value(std::string_view value) {
    // Shown as the tables show it: a name from hand-made keys may hold escape sequences.
    return escape(terminal_safe(value), true);
}

std::string prometheus_help(std::string_view text) {
    return escape(text, false);
}

void PrometheusWriter::family(std::string_view name, std::string_view type, std::string_view help) {
    m_family = name;
    m_text += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, prometheus_help(help), name, type);
}

void PrometheusWriter::labels_and_name(const Labels& labels) {
    m_text += m_family;
    if (labels.empty()) {
        m_text += ' ';
        return;
    }
    m_text += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
        m_text += fmt::format("{}{}=\"{}\"", i > 0 ? "," : "", labels[i].first,
                              prometheus_label_value(labels[i].second));
    }
    m_text += "} ";
}

void PrometheusWriter::sample(const Labels& labels, double value) {
    labels_and_name(labels);
    if (std::isnan(value)) {
        m_text += "NaN\n";
    } else if (std::isinf(value)) {
        m_text += value > 0 ? "+Inf\n" : "-Inf\n";
    } else {
        m_text += fmt::format("{}\n", value);
    }
}

void PrometheusWriter::sample(const Labels& labels, long long value) {
    labels_and_name(labels);
    m_text += fmt::format("{}\n", value);
}

} // namespace redsem

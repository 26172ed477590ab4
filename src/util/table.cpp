#include "util/table.hpp"

#include "util/name.hpp"

#include <algorithm>

namespace redsem {

namespace {

constexpr std::string_view k_gap = "  ";
constexpr std::string_view k_ellipsis = "\xe2\x80\xa6"; // …

} // namespace

std::size_t display_width(const std::string& text) {
    return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    }));
}

std::string cut_to_width(const std::string& text, std::size_t width) {
    if (display_width(text) <= width) {
        return text;
    }
    if (width == 0) {
        return "";
    }
    std::string out;
    std::size_t points = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const bool starts_point = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
        if (starts_point && ++points == width) {
            break;
        }
        out += text[i];
    }
    return out + std::string(k_ellipsis);
}

std::string render_table(std::vector<std::vector<std::string>> rows, std::size_t max_width,
                         std::size_t shrink) {
    for (auto& row : rows) {
        for (auto& cell : row) {
            cell = terminal_safe(cell);
        }
    }
    std::vector<std::size_t> widths;
    for (const auto& row : rows) {
        widths.resize(std::max(widths.size(), row.size()), 0);
        for (std::size_t c = 0; c < row.size(); ++c) {
            widths[c] = std::max(widths[c], display_width(row[c]));
        }
    }
    std::size_t total = 0;
    for (std::size_t c = 0; c < widths.size(); ++c) {
        total += widths[c] + (c > 0 ? k_gap.size() : 0);
    }
    if (max_width > 0 && total > max_width && shrink < widths.size()) {
        const std::size_t others = total - widths[shrink];
        constexpr std::size_t k_min_shrunk = 8;
        widths[shrink] = std::max(k_min_shrunk, max_width > others ? max_width - others : 0);
    }
    std::string out;
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            const std::string cell = c == shrink ? cut_to_width(row[c], widths[c]) : row[c];
            if (c > 0) {
                line += k_gap;
            }
            line += cell;
            if (c + 1 < row.size()) {
                line.append(widths[c] - display_width(cell), ' ');
            }
        }
        // No padding after the last cell that has text (an empty LABEL, say).
        line.erase(line.find_last_not_of(' ') + 1);
        out += line + "\n";
    }
    return out;
}

} // namespace redsem

#pragma once

#include <string>
#include <vector>

namespace redsem {

// Renders rows (the first is the header) as columns aligned on two spaces, one line each.
// When `max_width` > 0 and the table is wider, the cells of column `shrink` are cut to fit
// and end in "…". Widths count UTF-8 code points. Every cell is made terminal_safe() first:
// cells hold what other users wrote.
std::string render_table(std::vector<std::vector<std::string>> rows, std::size_t max_width = 0,
                         std::size_t shrink = 0);

// The number of UTF-8 code points in `text`.
std::size_t display_width(const std::string& text);

// `text` when it is at most `width` code points wide, else its start ending in "…", `width`
// code points in all.
std::string cut_to_width(const std::string& text, std::size_t width);

} // namespace redsem

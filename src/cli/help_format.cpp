#include "cli/help_format.hpp"

#include "util/table.hpp"

#include <algorithm>
#include <sstream>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

namespace redsem::cli {

namespace {

// The width help is written for: the terminal's, within reason, or 80 off a terminal.
std::size_t help_width() {
    winsize size{};
    if (isatty(STDOUT_FILENO) != 0 && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
        size.ws_col > 0) {
        return std::clamp<std::size_t>(size.ws_col, 60, 160);
    }
    return 80;
}

// `word` in pieces of at most `width` columns, each cut before a '[' (a URL's form, such as
// "host[:port][,host[:port]...]"), where it has one to cut at; one piece when it fits.
std::vector<std::string> pieces_of(std::string word, std::size_t width) {
    std::vector<std::string> pieces;
    while (display_width(word) > width) {
        const std::size_t cut = word.rfind('[', width);
        if (cut == std::string::npos || cut == 0) {
            break;
        }
        pieces.push_back(word.substr(0, cut));
        word.erase(0, cut);
    }
    pieces.push_back(std::move(word));
    return pieces;
}

} // namespace

std::string wrap(const std::string& text, std::size_t width) {
    std::string out;
    std::istringstream lines(text);
    bool first_line = true;
    for (std::string line; std::getline(lines, line);) {
        if (!first_line) {
            out += '\n';
        }
        first_line = false;
        std::istringstream words(line);
        std::size_t column = 0;
        for (std::string word; words >> word;) {
            bool continued = false; // the pieces of one word go on, each on a line of its own
            for (const std::string& piece : pieces_of(word, width)) {
                const std::size_t length = display_width(piece);
                if (column > 0 && (continued || column + 1 + length > width)) {
                    out += '\n';
                    column = 0;
                } else if (column > 0) {
                    out += ' ';
                    ++column;
                }
                out += piece;
                column += length;
                continued = true;
            }
        }
    }
    return out;
}

HelpFormatter::HelpFormatter(std::string usage) : m_width(help_width()), m_usage(std::move(usage)) {
    column_width(30);
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
    const std::string description = CLI::Formatter::make_description(app);
    return description.empty() ? description : wrap(description, m_width) + "\n";
}

std::string HelpFormatter::make_usage(const CLI::App* app, std::string name) const {
    if (m_usage.empty()) {
        return CLI::Formatter::make_usage(app, std::move(name));
    }
    return m_usage + "\n";
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
    const std::string footer = CLI::Formatter::make_footer(app);
    return footer.empty() ? footer : wrap(footer, m_width) + "\n";
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
    std::string summary = sub->get_description();
    if (const std::size_t end = summary.find(". "); end != std::string::npos) {
        summary.resize(end + 1);
    }
    std::ostringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true),
                             wrap(summary, m_width - get_column_width()), get_column_width());
    return out.str();
}

std::string HelpFormatter::make_option_desc(const CLI::Option* option) const {
    // Beside the option's name, in the columns CLI11 leaves after column_width.
    return wrap(CLI::Formatter::make_option_desc(option), m_width - get_column_width());
}

} // namespace redsem::cli

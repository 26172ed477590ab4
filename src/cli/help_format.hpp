#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

namespace redsem::cli {

// `text` wrapped at spaces to lines of at most `width` columns; a word longer than that is
// cut before a '[' that lets it fit, else gets a line of its own. Its own line breaks are kept.
std::string wrap(const std::string& text, std::size_t width);

// CLI11's help, wrapped to the terminal's width (80 columns off a terminal): descriptions and
// footers as paragraphs, each option's description beside its name. `usage`, when given,
// replaces CLI11's usage line (for forms it cannot tell, such as run's -c).
class HelpFormatter : public CLI::Formatter {
public:
    explicit HelpFormatter(std::string usage = "");

    std::string make_description(const CLI::App* app) const override;
    std::string make_usage(const CLI::App* app, std::string name) const override;
    std::string make_footer(const CLI::App* app) const override;
    std::string make_option_desc(const CLI::Option* option) const override;
    // In `redsem --help`'s list: the first sentence of the subcommand's description.
    std::string make_subcommand(const CLI::App* sub) const override;

private:
    std::size_t m_width;
    std::string m_usage;
};

} // namespace redsem::cli

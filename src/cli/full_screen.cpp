#include "cli/full_screen.hpp"

#include "util/errors.hpp"

#include <csignal>
#include <fmt/format.h>
#include <poll.h>
#include <string>
#include <sys/ioctl.h>
#include <unistd.h>
#include <vector>

namespace redsem {

namespace {

// Writes all of `text` to the terminal, ignoring errors: a terminal that went away leaves
// nothing to show anything on.
void write_all(std::string_view text) {
    while (!text.empty()) {
        const ssize_t written = ::write(STDOUT_FILENO, text.data(), text.size());
        if (written <= 0) {
            return;
        }
        text.remove_prefix(static_cast<std::size_t>(written));
    }
}

constexpr std::string_view k_enter = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"; // alternate screen
constexpr std::string_view k_leave = "\x1b[?25h\x1b[?1049l";              // cursor, main screen

// The start of `line` that takes at most `width` columns, counting a UTF-8 character as one
// (the frame's text is terminal_safe(): no control characters).
std::string_view cut_to_width(std::string_view line, std::size_t width) {
    std::size_t characters = 0;
    for (std::size_t i = 0; i < line.size(); ++i) {
        const auto byte = static_cast<unsigned char>(line[i]);
        if ((byte & 0xC0) != 0x80 && characters++ == width) {
            return line.substr(0, i);
        }
    }
    return line;
}

} // namespace

FullScreen::FullScreen() {
    if (isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0 ||
        tcgetattr(STDIN_FILENO, &m_saved) != 0) {
        throw UsageError("--watch needs a terminal (stdin and stdout); to follow changes from a "
                         "script, use 'redsem log --follow'");
    }
    enter();
}

FullScreen::~FullScreen() {
    leave();
}

void FullScreen::enter() {
    termios raw = m_saved;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    write_all(k_enter);
}

void FullScreen::leave() const {
    write_all(k_leave);
    tcsetattr(STDIN_FILENO, TCSANOW, &m_saved);
}

void FullScreen::suspend() {
    leave();
    ::kill(::getpid(), SIGSTOP);
    enter();
}

void FullScreen::draw(std::string_view frame) const {
    std::vector<std::string_view> lines;
    while (!frame.empty()) {
        const std::size_t end = frame.find('\n');
        lines.push_back(frame.substr(0, end));
        frame = end == std::string_view::npos ? std::string_view() : frame.substr(end + 1);
    }
    const auto height = static_cast<std::size_t>(rows());
    const auto width = static_cast<std::size_t>(columns());
    std::string more;
    if (lines.size() > height) {
        more = fmt::format("... {} more lines (a taller terminal shows them)",
                           lines.size() - height + 1);
        lines.resize(height - 1);
        lines.emplace_back(more);
    }
    std::string out = "\x1b[H";
    for (std::size_t i = 0; i < lines.size(); ++i) {
        // A line wider than the screen would wrap and push the top off: cut it.
        out += cut_to_width(lines[i], width);
        out += "\x1b[K";
        if (i + 1 < lines.size()) {
            out += "\r\n";
        }
    }
    out += "\x1b[J";
    write_all(out);
}

char FullScreen::read_key() const {
    char key = 0;
    pollfd input{STDIN_FILENO, POLLIN, 0};
    if (poll(&input, 1, 0) > 0 && ::read(STDIN_FILENO, &key, 1) == 1) {
        return key;
    }
    return 0;
}

int FullScreen::rows() const {
    winsize size{};
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 ? size.ws_row : 24;
}

int FullScreen::columns() const {
    winsize size{};
    return ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 ? size.ws_col : 80;
}

} // namespace redsem

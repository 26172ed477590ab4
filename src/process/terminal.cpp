#include "process/terminal.hpp"

#include "util/errors.hpp"

#include <csignal>
#include <poll.h>
#include <string>
#include <sys/ioctl.h>
#include <unistd.h>

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
constexpr std::string_view k_leave = "\x1b[?25h\x1b[?1049l";               // cursor, main screen

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
    const int height = rows();
    std::string out = "\x1b[H";
    int line = 0;
    while (!frame.empty() && line < height) {
        const std::size_t end = frame.find('\n');
        out += frame.substr(0, end);
        out += "\x1b[K";
        frame = end == std::string_view::npos ? std::string_view() : frame.substr(end + 1);
        if (++line < height) {
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

#pragma once

#include <string_view>
#include <termios.h>

namespace redsem {

// A full-screen view on the terminal for its lifetime: the alternate screen, no cursor, and
// keys read one at a time without echo (signals from keys, such as Ctrl-C, stay on). The
// destructor restores the terminal as it was, also when leaving by an exception.
class FullScreen {
public:
    // stdin and stdout must be a terminal (throws UsageError otherwise).
    FullScreen();
    ~FullScreen();
    FullScreen(const FullScreen&) = delete;
    FullScreen& operator=(const FullScreen&) = delete;

    // Shows `frame` (lines separated by '\n') from the top left, clearing what it does not
    // cover; lines beyond the screen's height are cut.
    void draw(std::string_view frame) const;

    // Restores the terminal, stops this process (as Ctrl-Z would, SIGSTOP), and takes the
    // screen again once it is continued.
    void suspend();

    // The key pressed, if one is waiting (non-blocking); 0 when none.
    char read_key() const;

    int rows() const;
    int columns() const;

private:
    void enter();
    void leave() const;

    termios m_saved{};
};

} // namespace redsem

#pragma once

// run --ping URL: the convention of healthchecks.io and Cronitor, for a monitor that alerts
// when a cron job did not run, failed, or ran too long. POST URL/start when the slot is
// granted; at the end POST URL when run exits 0 (a skip of --once-per included, its body
// naming the run it deferred to), else URL/STATUS with run's exit status. Pings go through
// the system's libcurl (loaded only when --ping is given: its libraries would slow every start
// of redsem), honour its proxy variables, and never carry redsem's password or tokens.

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "util/duration.hpp"

namespace redsem::cli {

// --ping's URL: http:// or https:// and a host; the trailing slash dropped. Throws UsageError
// naming `option`.
std::string parse_ping_url(const std::string& text, const char* option);

// --ping-timeout: above 0, at most k_max_ping_timeout.
inline constexpr Milliseconds k_default_ping_timeout{10'000};
inline constexpr Milliseconds k_max_ping_timeout{60'000};
Milliseconds parse_ping_timeout(const std::string& text, const char* option);

// The pings of one run. Each takes `timeout` at most; the start ping runs beside the command
// (it never delays it), and the end ping waits for it first. A ping that fails (no answer in
// time, a refused connection, an HTTP status of 400 or more) is told on stderr as a warning
// naming the URL's scheme and host only (its path may be a secret), and changes nothing else.
class Pinger {
public:
    Pinger(std::string url, Milliseconds timeout);
    ~Pinger();
    Pinger(const Pinger&) = delete;
    Pinger& operator=(const Pinger&) = delete;

    // URL/start, in the background: the slot was granted.
    void start();
    // URL (status 0) or URL/STATUS, with `body` (what happened, for people); waits for the
    // start ping first (its own timeout at most). Sent once: later calls do nothing.
    void finish(int status, const std::string& body);

private:
    std::string m_url;
    Milliseconds m_timeout;
    std::thread m_start;
    bool m_finished = false;
};

} // namespace redsem::cli

#include <catch2/catch.hpp>

#include "redis/retry_policy.hpp"
#include "util/stops.hpp"

#include <csignal>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace redsem;
using std::chrono::milliseconds;

TEST_CASE("RetryPolicy: what is worth another try") {
    CHECK(RetryPolicy::worth_retrying(Transience::transient, false));
    CHECK(RetryPolicy::worth_retrying(Transience::broken, false));
    CHECK_FALSE(RetryPolicy::worth_retrying(Transience::unreachable, false));
    CHECK(RetryPolicy::worth_retrying(Transience::unreachable, true));
    CHECK_FALSE(RetryPolicy::worth_retrying(Transience::permanent, true));
}

TEST_CASE("RetryPolicy: delays double to the schedule's last, and start over after an answer") {
    RetryPolicy policy;
    CHECK(policy.after(Transience::transient) == milliseconds{100});
    CHECK(policy.after(Transience::transient) == milliseconds{200});
    CHECK(policy.after(Transience::transient) == milliseconds{400});
    CHECK(policy.after(Transience::transient) == milliseconds{800});
    CHECK(policy.after(Transience::transient) == milliseconds{1000});
    CHECK(policy.after(Transience::transient) == milliseconds{1000});
    policy.answered();
    CHECK(policy.after(Transience::unreachable) == milliseconds{100});
    CHECK_FALSE(policy.after(Transience::permanent));

    RetryPolicy cluster(RetryPolicy::k_unlimited, RetryPolicy::k_cluster_pauses);
    CHECK(cluster.after(Transience::transient) == milliseconds{10});
    CHECK(cluster.next_delay() == milliseconds{20});
}

TEST_CASE("RetryPolicy: a failure after the window of unbroken failure stands") {
    RetryPolicy none(milliseconds{0});
    CHECK_FALSE(none.after(Transience::transient));

    RetryPolicy policy(milliseconds{60'000});
    CHECK(policy.after(Transience::transient) == milliseconds{100});
    CHECK(policy.after(Transience::broken) == milliseconds{200});
    policy.set_window(milliseconds{0}); // the window is read at each failure
    CHECK_FALSE(policy.after(Transience::transient));
    policy.answered(); // counted from the next failure: 0 leaves no retry
    CHECK_FALSE(policy.after(Transience::transient));
}

TEST_CASE("RetryPolicy: time the loop did not run is not counted against the window") {
    RetryPolicy stopped(milliseconds{50});
    stopped.not_running(std::chrono::hours{1}); // no failure yet: nothing to take out
    CHECK(stopped.after(Transience::broken) == milliseconds{100});
    std::this_thread::sleep_for(milliseconds{60}); // past the window
    RetryPolicy counted = stopped;
    CHECK_FALSE(counted.after(Transience::broken));
    stopped.not_running(std::chrono::hours{1}); // all of it spent stopped
    CHECK(stopped.after(Transience::broken) == milliseconds{200});
}

namespace {

// Stops this process for at least `duration` with a real SIGSTOP, and continues it with
// SIGCONT from a child that waits until it is stopped.
void stop_this_process_for(milliseconds duration) {
    const pid_t self = getpid();
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const std::string stat_path = "/proc/" + std::to_string(self) + "/stat";
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{30};
        for (;;) {
            std::ifstream stat(stat_path);
            std::string pid, name, state;
            stat >> pid >> name >> state; // (the test binary's name has no spaces)
            if (state == "T" || std::chrono::steady_clock::now() > give_up) {
                break;
            }
            std::this_thread::sleep_for(milliseconds{1});
        }
        std::this_thread::sleep_for(duration);
        kill(self, SIGCONT);
        _exit(0);
    }
    raise(SIGSTOP);
    int status = 0;
    waitpid(child, &status, 0);
}

} // namespace

TEST_CASE("RetryPolicy: a stop in the middle of a try is not counted against the window") {
    watch_stops();
    RetryPolicy policy(milliseconds{500});
    REQUIRE(policy.after(Transience::broken)); // the failures begin
    const auto stopped_at = BootClock::now();
    stop_this_process_for(milliseconds{1'000}); // as in a try: no sleep of the loop's sees it
    REQUIRE(BootClock::now() - stopped_at >= milliseconds{1'000});
    CHECK(last_continued() >= stopped_at);
    // The outage found on waking is given its window, and no more.
    CHECK(policy.after(Transience::broken));
    std::this_thread::sleep_for(milliseconds{600});
    CHECK_FALSE(policy.after(Transience::broken));
}

TEST_CASE("RetryPolicy: a SIGCONT moves a streak's window once, so that a stream of them "
          "cannot keep a loop retrying for ever") {
    watch_stops();
    RetryPolicy policy(milliseconds{1'000});
    REQUIRE(policy.after(Transience::broken));
    std::this_thread::sleep_for(milliseconds{600});
    REQUIRE(kill(getpid(), SIGCONT) == 0); // no stop came before it
    REQUIRE(policy.after(Transience::broken));
    std::this_thread::sleep_for(milliseconds{600});
    REQUIRE(kill(getpid(), SIGCONT) == 0);
    // 1.2s since the window was moved: the second one is not counted.
    std::this_thread::sleep_for(milliseconds{600});
    CHECK_FALSE(policy.after(Transience::broken));
}

TEST_CASE("RetryPolicy: unreachable is retried once the server was reached, never before") {
    RetryPolicy never;
    CHECK_FALSE(never.after(Transience::unreachable)); // a wrong address: reported at once

    // The first request's connection was accepted, then closed by a server shutting down:
    // the address is right, and the restart is ridden out.
    RetryPolicy broken;
    CHECK(broken.after(Transience::broken) == milliseconds{100});
    CHECK(broken.after(Transience::unreachable) == milliseconds{200});

    // A server loading its data at the first request, then restarting again.
    RetryPolicy loading;
    CHECK(loading.after(Transience::transient) == milliseconds{100});
    CHECK(loading.after(Transience::unreachable) == milliseconds{200});

    // A refusal proves nothing worth waiting for.
    RetryPolicy refused;
    CHECK_FALSE(refused.after(Transience::permanent));
    CHECK_FALSE(refused.after(Transience::unreachable));
}

#include <catch2/catch.hpp>

#include "redis/retry_policy.hpp"

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
    CHECK_FALSE(policy.after(Transience::unreachable)); // never answered
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

// The pure parts of history and metrics: events as the scripts write them, points in time,
// the Prometheus text format.
#include <catch2/catch.hpp>

#include "semaphore/history.hpp"
#include "util/prometheus.hpp"
#include "util/time_format.hpp"

#include <cstdlib>
#include <ctime>

using namespace redsem;

TEST_CASE("parse_event reads each shape the scripts write, and keeps anything else raw") {
    const Event granted = parse_event(
        "deploy", "1795435438012-3", "acquired",
        R"(e2dd0c8c91be3f84ad1aba61f8760c62 2 1795435438012490 503 {"host":"vm","label":"a b","pid":7,"pid_of":"run","user":"root"})");
    CHECK(granted.raw.empty());
    CHECK(granted.name == "deploy");
    CHECK(granted.time_ms == 1795435438012);
    CHECK(granted.token == "e2dd0c8c91be3f84ad1aba61f8760c62");
    CHECK(granted.slot == 2);
    CHECK(granted.fence == 1795435438012490);
    CHECK(granted.duration_ms == 503);
    REQUIRE(granted.meta);
    CHECK(granted.meta->label == "a b");
    CHECK(granted.meta->pid == 7);

    const Event queued = parse_event("q", "5-0", "queued", R"(abc - - - {"host":"h"})");
    CHECK(queued.raw.empty());
    CHECK(!queued.slot);
    CHECK(!queued.fence);
    CHECK(!queued.duration_ms);
    CHECK(queued.meta->host == "h");

    // How a run's command ended: "signal" since issue 52 (0: it exited); an event without it
    // (a run --once-per's, an earlier build's) says the status only.
    const Event exited = parse_event("q", "5-2", "released",
                                     R"(abc 0 7 900 {"host":"h","pid":7,"exit":143,"signal":0})");
    CHECK(exited.exit_status == 143);
    CHECK(exited.signal == 0);
    CHECK(exited.meta->pid == 7);
    const Event killed =
        parse_event("q", "5-3", "released", R"(abc 0 7 900 {"host":"h","exit":143,"signal":15})");
    CHECK(killed.signal == 15);
    const Event unsaid =
        parse_event("q", "5-4", "released", R"(abc 0 7 900 {"host":"h","exit":143})");
    CHECK(unsaid.exit_status == 143);
    CHECK(!unsaid.signal);

    const Event lost = parse_event("q", "5-1", "lost", "abc - - - {}");
    CHECK(lost.token == "abc");
    CHECK(!lost.meta);

    const Event limit = parse_event("q", "6-0", "limit", "- 3");
    CHECK(!limit.limit_from);
    CHECK(limit.limit_to == 3);
    CHECK(parse_event("q", "6-1", "limit", "2 5").limit_from == 2);

    for (const char* odd : {"", "abc", "abc x - - {}", "- 3 4", "abc 1 2 3"}) {
        const Event raw = parse_event("q", "7-0", "acquired", odd);
        CHECK(raw.raw == odd);
        CHECK(raw.token.empty());
    }
    CHECK(parse_event("q", "7-0", "limit", "- -").raw == "- -");

    const Event paused = parse_event("q", "8-0", "paused", R"(- {"host":"h","label":"freeze"})");
    CHECK(paused.raw.empty());
    CHECK(!paused.until_ms);
    REQUIRE(paused.meta);
    CHECK(paused.meta->label == "freeze");
    CHECK(parse_event("q", "8-1", "paused", "1795741448134 {}").until_ms == 1795741448134);
    const Event resumed = parse_event("q", "9-0", "resumed", R"(3526 {"user":"u"})");
    CHECK(resumed.duration_ms == 3526);
    REQUIRE(resumed.meta);
    CHECK(resumed.meta->user == "u");
    const Event ran_out = parse_event("q", "9-1", "resumed", "60000 {}");
    CHECK(ran_out.duration_ms == 60000);
    CHECK(!ran_out.meta);
    for (const char* odd : {"-", "- x", "x {}", "- - {}"}) {
        CHECK(parse_event("q", "9-2", "resumed", odd).raw == odd);
    }
    CHECK(parse_event("q", "9-3", "paused", "soon {}").raw == "soon {}");
}

TEST_CASE("sort_by_time merges histories by time, keeping each stream's order") {
    std::vector<Event> events{
        parse_event("b", "10-0", "limit", "- 1"), parse_event("a", "10-10", "limit", "- 2"),
        parse_event("a", "10-9", "limit", "- 3"), parse_event("a", "9-0", "limit", "- 4")};
    sort_by_time(events);
    CHECK(events[0].id == "9-0");
    CHECK(events[1].id == "10-9"); // sequence 9 before 10, not as text
    CHECK(events[2].id == "10-10");
    CHECK(events[3].name == "b");
}

TEST_CASE("parse_time_point: epoch seconds, dates, times and zones, and nothing else") {
    CHECK(parse_time_point("@0") == 0);
    CHECK(parse_time_point("@1700000000") == 1'700'000'000'000);
    CHECK(parse_time_point("2026-11-23T03:12:00Z") == 1'795'403'520'000);
    CHECK(parse_time_point("2026-11-23 03:12Z") == 1'795'403'520'000);
    CHECK(parse_time_point("2026-11-23T03:12:00.250Z") == 1'795'403'520'250);
    CHECK(parse_time_point("2026-11-23T04:12:00+01:00") == 1'795'403'520'000);
    CHECK(parse_time_point("2026-11-22T22:12:00-05:00") == 1'795'403'520'000);
    CHECK(parse_time_point(iso8601_utc(1'795'403'520'123)) == 1'795'403'520'123);
    {
        // Without a zone: local time.
        const char* saved = std::getenv("TZ");
        const std::string old = saved != nullptr ? saved : "";
        setenv("TZ", "Europe/Berlin", 1);
        tzset();
        CHECK(parse_time_point("2026-11-23 04:12") == 1'795'403'520'000);
        CHECK(parse_time_point("2026-11-23") == 1'795'388'400'000);
        CHECK(local_time(1'795'403'520'000) == "2026-11-23 04:12:00.000");
        if (saved != nullptr) {
            setenv("TZ", old.c_str(), 1);
        } else {
            unsetenv("TZ");
        }
        tzset();
    }
    for (const char* bad :
         {"", "@", "@-1", "@1e3", "@12x", "2026", "2026-11", "2026-11-23T", "2026-11-23 3:12",
          "2026-02-30", "2026-13-01", "2026-11-23 24:00", "2026-11-23 23:60", "2026-11-23Z1",
          "2026-11-23T03:12:00.5Z", "2026-11-23T03:12+1", "1969-12-31", "yesterday", "24h"}) {
        INFO(bad);
        CHECK(!parse_time_point(bad));
    }
}

TEST_CASE("Prometheus text format: HELP and TYPE once per family, label values escaped") {
    CHECK(prometheus_label_value(R"(a"b\c)") == R"(a\"b\\c)");
    // Control characters as the tables show them (\x1b), the backslash then escaped.
    CHECK(prometheus_label_value("line\nbreak") == R"(line\\x0abreak)");
    CHECK(prometheus_label_value("esc\x1b]0;T\a") == R"(esc\\x1b]0;T\\x07)");
    CHECK(prometheus_label_value("caf\xc3\xa9") == "caf\xc3\xa9");
    CHECK(prometheus_help("a\\b\nc") == R"(a\\b\nc)");

    PrometheusWriter out;
    out.family("redsem_holders", "gauge", "Holders.");
    out.sample({{"name", "x\"y"}}, 2LL);
    out.sample({{"prefix", "p"}, {"name", "z"}}, 0.5);
    out.family("redsem_lost_total", "counter", "Lost.");
    out.sample({}, 3LL);
    CHECK(out.text() == "# HELP redsem_holders Holders.\n"
                        "# TYPE redsem_holders gauge\n"
                        "redsem_holders{name=\"x\\\"y\"} 2\n"
                        "redsem_holders{prefix=\"p\",name=\"z\"} 0.5\n"
                        "# HELP redsem_lost_total Lost.\n"
                        "# TYPE redsem_lost_total counter\n"
                        "redsem_lost_total 3\n");
}

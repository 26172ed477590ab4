// The scripts' replies decoded by name (src/semaphore/wire.cpp), without a server: a reply
// of every kind each script sends, as Redis hands it over (Lua strings and numbers become
// bulk strings and integers), and what a reply of another shape does. Every name a reply
// here carries is one its script writes, so these replies cannot drift from the scripts.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "semaphore/wire.hpp"

#include <string>
#include <utility>
#include <vector>

using namespace redsem;
using namespace redsem::wire;

namespace {

// A reply element: a string, an integer or a list.
Reply s(std::string text) {
    Reply reply;
    reply.type = Reply::Type::string;
    reply.text = std::move(text);
    return reply;
}

Reply n(long long value) {
    Reply reply;
    reply.type = Reply::Type::integer;
    reply.integer = value;
    return reply;
}

Reply list(std::vector<Reply> elements) {
    Reply reply;
    reply.type = Reply::Type::array;
    reply.elements = std::move(elements);
    return reply;
}

// A reply of names and values, as `script` sends it; checks that the script's text writes
// each name.
Reply sent_by(const Script& script, std::vector<std::pair<std::string, Reply>> fields) {
    const std::string body = script.body;
    std::vector<Reply> elements;
    for (auto& [name, value] : fields) {
        INFO(script.name << " writes '" << name << "'");
        CHECK(body.find("'" + name + "'") != std::string::npos);
        elements.push_back(s(name));
        elements.push_back(std::move(value));
    }
    return list(std::move(elements));
}

const std::string k_pause_json = R"({"host":"ops","label":"migration","pid":7,"user":"ann"})";

} // namespace

TEST_CASE("acquire's replies of every kind") {
    const Script& acquire = scripts::k_acquire_script;
    SECTION("ok: the slots held, and the lease") {
        const auto reply = decode_acquire(sent_by(acquire, {{"kind", s("ok")},
                                                            {"fence", n(41)},
                                                            {"slot", n(2)},
                                                            {"deadline_ms", n(1'800'000'060'000)},
                                                            {"limit", n(5)},
                                                            {"now_ms", n(1'800'000'000'000)},
                                                            {"slots", s("2,3,4")}}));
        const auto& granted = std::get<Granted>(reply);
        CHECK(granted.fence == 41);
        CHECK(granted.slot == 2);
        CHECK(granted.slots == std::vector<long long>{2, 3, 4});
        CHECK(granted.deadline_ms == 1'800'000'060'000);
        CHECK(granted.limit == 5);
        CHECK(granted.server_now_ms == 1'800'000'000'000);
    }
    SECTION("wait: the place, with admission open, and closed after a loss") {
        const auto wait = [&](std::vector<std::pair<std::string, Reply>> closed) {
            std::vector<std::pair<std::string, Reply>> fields{{"kind", s("wait")},
                                                              {"position", n(3)},
                                                              {"held", n(2)},
                                                              {"limit", n(2)},
                                                              {"next_expiry_in_ms", n(-1)},
                                                              {"queued", n(4)},
                                                              {"now_ms", n(1'800'000'000'000)},
                                                              {"refresh_extra_ms", n(1000)}};
            fields.insert(fields.end(), closed.begin(), closed.end());
            return std::get<QueuedReply>(decode_acquire(sent_by(acquire, std::move(fields))));
        };
        const QueuedReply open = wait({});
        CHECK(open.position.ahead == 3);
        CHECK(open.position.held == 2);
        CHECK(open.position.limit == 2);
        CHECK(open.position.queued == 4);
        CHECK(open.next_expiry_in_ms == -1);
        CHECK(open.server_now_ms == 1'800'000'000'000);
        CHECK(open.refresh_extra == Milliseconds{1000});
        CHECK_FALSE(open.closed.closed());
        CHECK(open.closed.cause.empty());

        const QueuedReply closed = wait(
            {{"closed_for_ms", n(42'000)}, {"cause", s("evicted")}, {"lost_ms_ago", n(18'000)}});
        CHECK(closed.closed.opens_in == Milliseconds{42'000});
        CHECK(closed.closed.cause == "evicted");
        CHECK(closed.closed.lost_ago == Milliseconds{18'000});
        CHECK_FALSE(closed.closed.pause.has_value());
        CHECK(closed.closed.closed());
    }
    SECTION("busy while paused until resumed, and paused for a while") {
        for (const long long ends_in : {-1LL, 90'000LL}) {
            const auto reply = decode_acquire(sent_by(acquire, {{"kind", s("busy")},
                                                                {"held", n(1)},
                                                                {"limit", n(1)},
                                                                {"queued", n(0)},
                                                                {"pause", s(k_pause_json)},
                                                                {"paused_ms_ago", n(5000)},
                                                                {"pause_ends_in_ms", n(ends_in)}}));
            const AdmissionClosed& closed = std::get<Busy>(reply).closed;
            CHECK(closed.opens_in == Milliseconds{0});
            REQUIRE(closed.pause.has_value());
            CHECK(closed.pause->by.host == "ops");
            CHECK(closed.pause->by.label == "migration");
            CHECK(closed.pause->age == Milliseconds{5000});
            if (ends_in < 0) {
                CHECK_FALSE(closed.pause->ends_in.has_value());
            } else {
                CHECK(closed.pause->ends_in == Milliseconds{ends_in});
            }
            CHECK(closed.closed());
        }
    }
    SECTION("conflict, toolarge and released") {
        const auto conflict = decode_acquire(sent_by(
            acquire,
            {{"kind", s("conflict")}, {"stored_limit", n(-2)}, {"held", n(3)}, {"queued", n(1)}}));
        CHECK(std::get<ConflictReply>(conflict).stored_limit == -2);
        CHECK(std::get<ConflictReply>(conflict).held == 3);
        CHECK(std::get<ConflictReply>(conflict).queued == 1);
        const auto too_large =
            decode_acquire(sent_by(acquire, {{"kind", s("toolarge")}, {"limit", n(2)}}));
        CHECK(std::get<TooLarge>(too_large).limit == 2);
        CHECK(std::holds_alternative<Released>(
            decode_acquire(sent_by(acquire, {{"kind", s("released")}}))));
    }
}

TEST_CASE("what every script may answer: a foreign key, or a proof it asks for") {
    for (const Script* script : {&scripts::k_acquire_script, &scripts::k_release_script,
                                 &scripts::k_limit_script, &scripts::k_pause_script}) {
        const Reply wrong = sent_by(*script, {{"kind", s("wrongtype")},
                                              {"key", s("redsem:{x}:queue")},
                                              {"found", s("string")},
                                              {"wanted", s("zset")}});
        const auto found = wrong_type(wrong);
        REQUIRE(found.has_value());
        CHECK(found->key == "redsem:{x}:queue");
        CHECK(found->found == "string");
        CHECK(found->wanted == "zset");
        CHECK_FALSE(demanded_proof(wrong).has_value());

        const Reply prove = sent_by(*script, {{"kind", s("prove")}, {"marker", s("")}});
        CHECK(demanded_proof(prove) == std::optional<std::string>(""));
        CHECK_FALSE(wrong_type(prove).has_value());
    }
    // Neither, for any other reply, of whatever shape.
    for (const Reply& other :
         {n(1), s("prove"), list({}), list({s("prove"), s("m")}), list({s("limit"), n(1)})}) {
        CHECK_FALSE(wrong_type(other).has_value());
        CHECK_FALSE(demanded_proof(other).has_value());
    }
}

TEST_CASE("renew, release, limit, pause, admission, lost and gc replies") {
    SECTION("renew") {
        const Script& renew = scripts::k_renew_script;
        const auto renewed = decode_renew(sent_by(renew, {{"kind", s("renewed")},
                                                          {"deadline_ms", n(1'800'000'030'000)},
                                                          {"now_ms", n(1'800'000'000'000)},
                                                          {"ttl_ms", n(30'000)}}));
        CHECK(std::get<Renewal>(renewed).deadline_ms == 1'800'000'030'000);
        CHECK(std::get<Renewal>(renewed).server_now_ms == 1'800'000'000'000);
        CHECK(std::get<Renewal>(renewed).ttl == Milliseconds{30'000});
        const auto lost = decode_renew(sent_by(renew, {{"kind", s("lost")},
                                                       {"why", s("expired")},
                                                       {"now_ms", n(1'800'000'000'000)},
                                                       {"lost_at_ms", n(1'799'999'990'000)},
                                                       {"cause", s("change")}}));
        const LeaseLoss& loss = std::get<Lost>(lost).loss;
        CHECK(loss.why == "expired");
        CHECK(loss.lost_at_ms == 1'799'999'990'000);
        CHECK(loss.cause == "change");
        // A loss of data after the grant is the reason; before it, the lease's own end.
        CHECK(loss.describe(1'799'999'980'000)
                  .starts_with("Redis restarted or another server "
                               "took over since the grant"));
        CHECK(loss.describe(1'799'999'995'000)
                  .starts_with("its lease ran out by the server's "
                               "clock"));
        CHECK(std::holds_alternative<StillQueued>(
            decode_renew(sent_by(renew, {{"kind", s("queued")}}))));
    }
    SECTION("release") {
        const Script& release = scripts::k_release_script;
        CHECK(decode_release(sent_by(release, {{"kind", s("released")}})) ==
              ReleaseOutcome::released);
        CHECK(decode_release(sent_by(release, {{"kind", s("left_queue")}})) ==
              ReleaseOutcome::left_queue);
        CHECK(decode_release(sent_by(release, {{"kind", s("not_found")}})) ==
              ReleaseOutcome::not_found);
    }
    SECTION("limit") {
        const LimitInfo info =
            decode_limit(sent_by(scripts::k_limit_script, {{"limit", n(4)},
                                                           {"stored", n(1)},
                                                           {"held", n(2)},
                                                           {"queued", n(7)},
                                                           {"history", n(0)},
                                                           {"set_by", s("operator")}}));
        CHECK(info.limit == 4);
        CHECK(info.stored);
        CHECK(info.held == 2);
        CHECK(info.queued == 7);
        CHECK(info.history == 0);
        CHECK(info.set_by == "operator");
    }
    SECTION("pause: in force, none, and a limit this redsem cannot read") {
        const Script& pause = scripts::k_pause_script;
        const auto reply = [&](const std::string& json, long long since) {
            return sent_by(pause, {{"kind", s("ok")},
                                   {"held", n(1)},
                                   {"queued", n(2)},
                                   {"limit", n(3)},
                                   {"now_ms", n(1'800'000'000'000)},
                                   {"pause", s(json)},
                                   {"since_ms", n(since)},
                                   {"until_ms", n(0)},
                                   {"due_in_ms", n(-1)}});
        };
        const auto paused = decode_pause(reply(k_pause_json, 1'799'999'990'000));
        REQUIRE(paused.has_value());
        REQUIRE(paused->pause.has_value());
        CHECK(paused->pause->by.user == "ann");
        CHECK(paused->pause->since_ms == 1'799'999'990'000);
        CHECK(paused->pause->until_ms == 0);
        CHECK(paused->held == 1);
        CHECK(paused->queued == 2);
        CHECK(paused->limit == 3);
        CHECK(paused->due_in_ms == -1);
        const auto none = decode_pause(reply("", 0));
        REQUIRE(none.has_value());
        CHECK_FALSE(none->pause.has_value());
        CHECK_FALSE(decode_pause(sent_by(pause, {{"kind", s("conflict")}})).has_value());
    }
    SECTION("lost") {
        const LossDeclared lost = decode_lost(
            sent_by(scripts::k_lost_script, {{"lost_at_ms", n(1000)}, {"opens_at_ms", n(61000)}}));
        CHECK(lost.lost_at_ms == 1000);
        CHECK(lost.opens_at_ms == 61000);
    }
    SECTION("view: the counts, admission, entries of each kind, and a pause") {
        const Script& view = scripts::k_view_script;
        const Reply holder_record = sent_by(view, {{"since_ms", n(1000)},
                                                   {"ttl_ms", n(60000)},
                                                   {"meta", s(k_pause_json)},
                                                   {"slots", list({n(0), n(3)})},
                                                   {"fence", n(77)}});
        const Reply waiter_record = sent_by(
            view, {{"since_ms", n(1200)}, {"ttl_ms", n(5000)}, {"meta", s("{}")}, {"wants", n(0)}});
        const Reply holder = sent_by(view, {{"token", s("h1")},
                                            {"dead", n(0)},
                                            {"deadline_ms", n(61000)},
                                            {"record", holder_record}});
        const Reply waiter = sent_by(
            view,
            {{"token", s("w1")}, {"dead", n(1)}, {"position", n(1)}, {"record", waiter_record}});
        const Reply unreadable =
            sent_by(view, {{"token", s("w2")}, {"dead", n(0)}, {"position", n(2)}});
        const View decoded =
            decode_view(sent_by(view, {{"kind", s("view")},
                                       {"now_ms", n(1500)},
                                       {"limit", n(4)},
                                       {"exclusive", s("")},
                                       {"paused", s(k_pause_json)},
                                       {"paused_since_ms", n(1100)},
                                       {"paused_until_ms", n(0)},
                                       {"holders", n(1)},
                                       {"held", n(2)},
                                       {"expired", n(0)},
                                       {"waiting", n(1)},
                                       {"stale", n(1)},
                                       {"history", n(100)},
                                       {"acquired_total", n(9)},
                                       {"expired_total", n(2)},
                                       {"lost_total", n(1)},
                                       {"oldest", holder},
                                       {"oldest_wait_since_ms", n(1200)},
                                       {"opens_at_ms", n(2000)},
                                       {"cause", s("change")},
                                       {"lost_at_ms", n(1000)},
                                       {"noticed", n(0)},
                                       {"holder_entries", list({holder})},
                                       {"waiter_entries", list({waiter, unreadable})}}));
        CHECK(decoded.server_now_ms == 1500);
        CHECK(decoded.limit == 4);
        REQUIRE(decoded.pause.has_value());
        CHECK(decoded.pause->by.user == "ann");
        CHECK(decoded.pause->since_ms == 1100);
        CHECK(decoded.held == 2);
        CHECK(decoded.stale == 1);
        CHECK(decoded.lost_total == 1);
        REQUIRE(decoded.admission.has_value());
        CHECK(decoded.admission->closed());
        CHECK(decoded.admission->cause == "change");
        CHECK_FALSE(decoded.admission->noticed);
        CHECK(decoded.admission->server_now_ms == 1500);
        REQUIRE(decoded.oldest.has_value());
        CHECK(decoded.oldest->token == "h1");
        REQUIRE(decoded.holder_entries.size() == 1);
        const ViewEntry& h = decoded.holder_entries.front();
        CHECK(h.deadline_ms == 61000);
        REQUIRE(h.record.has_value());
        CHECK(h.record->kind == Record::Kind::holder);
        CHECK(h.record->slots == std::vector<long long>{0, 3});
        CHECK(h.record->slot == 0);
        CHECK(h.record->fence == 77);
        CHECK(h.record->meta.host == "ops");
        REQUIRE(decoded.waiter_entries.size() == 2);
        const ViewEntry& w = decoded.waiter_entries.front();
        CHECK(w.dead);
        CHECK(w.position == 1);
        REQUIRE(w.record.has_value());
        CHECK(w.record->kind == Record::Kind::waiter);
        CHECK(w.record->wants == 0);
        CHECK(w.record->since_ms == 1200);
        CHECK_FALSE(decoded.waiter_entries.back().record.has_value());
        CHECK(decoded.waiter_entries.back().position == 2);
        // Only what was asked for: no counts, no admission (without INFO it is unproven).
        const View bare = decode_view(sent_by(
            view,
            {{"kind", s("view")}, {"now_ms", n(1500)}, {"exclusive", s("")}, {"unproven", n(1)}}));
        CHECK_FALSE(bare.limit.has_value());
        CHECK_FALSE(bare.pause.has_value());
        CHECK_FALSE(bare.admission.has_value());
        CHECK(bare.holder_entries.empty());
        // A holder's record without slots is the scripts' mistake, said as such.
        const Reply no_slots = sent_by(view, {{"token", s("h2")},
                                              {"dead", n(0)},
                                              {"deadline_ms", n(1)},
                                              {"record", sent_by(view, {{"since_ms", n(1)},
                                                                        {"ttl_ms", n(1)},
                                                                        {"meta", s("{}")},
                                                                        {"slots", list({})},
                                                                        {"fence", n(1)}})}});
        CHECK_THROWS_AS(decode_view(sent_by(view, {{"kind", s("view")},
                                                   {"now_ms", n(1)},
                                                   {"holder_entries", list({no_slots})},
                                                   {"waiter_entries", list({})}})),
                        InternalError);
        CHECK_THROWS_AS(decode_view(sent_by(view, {{"kind", s("prove")}, {"marker", s("")}})),
                        InternalError);
    }
    SECTION("gc: a step with what it removed, and the last one") {
        const Script& gc = scripts::k_gc_script;
        const Reply removed = sent_by(gc, {{"kind", s("waiter")},
                                           {"token", s("ab12")},
                                           {"record", s("w - - 1 30000 {}")},
                                           {"dead_for_ms", n(2500)}});
        const GcStep step = decode_gc(sent_by(gc, {{"next_phase", s("holders")},
                                                   {"next_position", s("100")},
                                                   {"deleted", n(0)},
                                                   {"holders", n(4)},
                                                   {"queued", n(1)},
                                                   {"removed", list({removed})}}));
        CHECK(step.next.phase == "holders");
        CHECK(step.next.position == "100");
        CHECK(step.holders == 4);
        CHECK(step.queued == 1);
        REQUIRE(step.removed.size() == 1);
        CHECK(step.removed[0].kind == "waiter");
        CHECK(step.removed[0].token == "ab12");
        CHECK(step.removed[0].record == "w - - 1 30000 {}");
        CHECK(step.removed[0].dead_for_ms == 2500);
        const GcStep last = decode_gc(sent_by(gc, {{"next_phase", s("")},
                                                   {"next_position", s("0")},
                                                   {"deleted", n(-1)},
                                                   {"holders", n(0)},
                                                   {"queued", n(0)},
                                                   {"removed", list({})}}));
        CHECK(last.next.phase.empty());
        CHECK(last.deleted == -1);
        CHECK(last.removed.empty());
    }
}

TEST_CASE("a hand-over note, from this release and from an older one") {
    const HandOver now = decode_hand_over("12 3 1800000060000 1800000000000 5 3,4");
    CHECK(now.fence == 12);
    CHECK(now.slot == 3);
    CHECK(now.slots == std::vector<long long>{3, 4});
    CHECK(now.deadline_ms == 1'800'000'060'000);
    CHECK(now.limit == 5);
    // 0.1.0 pushes neither the limit nor the slots.
    const HandOver older = decode_hand_over("12 3 1800000060000 1800000000000");
    CHECK_FALSE(older.limit.has_value());
    CHECK(older.slots == std::vector<long long>{3});
    CHECK_THROWS_AS(decode_hand_over("12 3"), InternalError);
}

TEST_CASE("a reply of another shape is an internal error naming what is wrong") {
    const Script& acquire = scripts::k_acquire_script;
    // Positional, as an earlier build sent it.
    CHECK_THROWS_WITH(decode_acquire(list({s("ok"), n(1), n(0), n(2), n(1), n(3), s("0")})),
                      Catch::Contains("acquire.lua answered something other than names"));
    // A name whose value is missing.
    CHECK_THROWS_AS(decode_renew(list({s("kind"), s("renewed"), s("deadline_ms")})), InternalError);
    // A field left out.
    CHECK_THROWS_WITH(decode_acquire(sent_by(acquire, {{"kind", s("toolarge")}})),
                      Catch::Contains("acquire.lua answered without 'limit'"));
    // A kind nobody sends.
    CHECK_THROWS_WITH(decode_acquire(sent_by(acquire, {{"kind", s("later")}})),
                      Catch::Contains("unexpected acquire reply 'later'"));
    // A field of another type.
    CHECK_THROWS_AS(decode_lost(list({s("lost_at_ms"), s("soon"), s("opens_at_ms"), n(1)})),
                    InternalError);
}

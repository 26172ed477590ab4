// The scripts' replies decoded by name (src/semaphore/wire.cpp), without a server: a reply
// of every kind each script sends, as Redis hands it over (Lua strings and numbers become
// bulk strings and integers), and what a reply of another shape does. Every name a reply
// here carries is one its script writes, so these replies cannot drift from the scripts.
#include <catch2/catch.hpp>

#include "lua_scripts.hpp"
#include "replies.hpp"
#include "semaphore/wire.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

using namespace redsem;
using namespace redsem::wire;
using redsem::replies::array;
using redsem::replies::bulk;
using redsem::replies::integer;

namespace {

// A reply of names and values, as `script` sends it; checks that the script's text writes
// each name.
Reply sent_by(const Script& script, std::vector<std::pair<std::string, Reply>> fields) {
    const std::string body = script.body;
    std::vector<Reply> elements;
    for (auto& [name, value] : fields) {
        INFO(script.name << " writes '" << name << "'");
        CHECK(body.find("'" + name + "'") != std::string::npos);
        elements.push_back(bulk(name));
        elements.push_back(std::move(value));
    }
    return array(std::move(elements));
}

const std::string k_pause_json = R"({"host":"ops","label":"migration","pid":7,"user":"ann"})";

} // namespace

TEST_CASE("acquire's replies of every kind") {
    const Script& acquire = scripts::k_acquire_script;
    SECTION("ok: the slots held, and the lease") {
        const auto reply =
            decode_acquire(sent_by(acquire, {{"kind", bulk("ok")},
                                             {"fence", integer(41)},
                                             {"slot", integer(2)},
                                             {"deadline_ms", integer(1'800'000'060'000)},
                                             {"limit", integer(5)},
                                             {"now_ms", integer(1'800'000'000'000)},
                                             {"slots", bulk("2,3,4")}}));
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
            std::vector<std::pair<std::string, Reply>> fields{
                {"kind", bulk("wait")},
                {"position", integer(3)},
                {"held", integer(2)},
                {"limit", integer(2)},
                {"next_expiry_in_ms", integer(-1)},
                {"queued", integer(4)},
                {"now_ms", integer(1'800'000'000'000)},
                {"refresh_extra_ms", integer(1000)}};
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

        const QueuedReply closed = wait({{"closed_for_ms", integer(42'000)},
                                         {"cause", bulk("evicted")},
                                         {"lost_ms_ago", integer(18'000)}});
        CHECK(closed.closed.opens_in == Milliseconds{42'000});
        CHECK(closed.closed.cause == "evicted");
        CHECK(closed.closed.lost_ago == Milliseconds{18'000});
        CHECK_FALSE(closed.closed.pause.has_value());
        CHECK(closed.closed.closed());
    }
    SECTION("busy while paused until resumed, and paused for a while") {
        for (const long long ends_in : {-1LL, 90'000LL}) {
            const auto reply =
                decode_acquire(sent_by(acquire, {{"kind", bulk("busy")},
                                                 {"held", integer(1)},
                                                 {"limit", integer(1)},
                                                 {"queued", integer(0)},
                                                 {"pause", bulk(k_pause_json)},
                                                 {"paused_ms_ago", integer(5000)},
                                                 {"pause_ends_in_ms", integer(ends_in)}}));
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
        const auto conflict = decode_acquire(sent_by(acquire, {{"kind", bulk("conflict")},
                                                               {"stored_limit", integer(-2)},
                                                               {"held", integer(3)},
                                                               {"queued", integer(1)}}));
        CHECK(std::get<ConflictReply>(conflict).stored_limit == -2);
        CHECK(std::get<ConflictReply>(conflict).held == 3);
        CHECK(std::get<ConflictReply>(conflict).queued == 1);
        const auto too_large =
            decode_acquire(sent_by(acquire, {{"kind", bulk("toolarge")}, {"limit", integer(2)}}));
        CHECK(std::get<TooLarge>(too_large).limit == 2);
        CHECK(std::holds_alternative<Left>(
            decode_acquire(sent_by(acquire, {{"kind", bulk("left")}}))));
        const auto full = decode_acquire(
            sent_by(acquire,
                    {{"kind", bulk("full")}, {"queued", integer(3)}, {"max_waiting", integer(3)}}));
        CHECK(std::get<Full>(full).queued == 3);
        CHECK(std::get<Full>(full).max_waiting == 3);
    }
}

TEST_CASE("what every script may answer: a foreign key, or a proof it asks for") {
    for (const Script* script : {&scripts::k_acquire_script, &scripts::k_release_script,
                                 &scripts::k_limit_script, &scripts::k_pause_script}) {
        const Reply wrong = sent_by(*script, {{"kind", bulk("wrongtype")},
                                              {"key", bulk("redsem:{x}:queue")},
                                              {"found", bulk("string")},
                                              {"wanted", bulk("zset")}});
        const auto found = wrong_type(wrong);
        REQUIRE(found.has_value());
        CHECK(found->key == "redsem:{x}:queue");
        CHECK(found->found == "string");
        CHECK(found->wanted == "zset");
        CHECK_FALSE(demanded_proof(wrong).has_value());

        const Reply prove = sent_by(*script, {{"kind", bulk("prove")}, {"marker", bulk("")}});
        CHECK(demanded_proof(prove) == std::optional<std::string>(""));
        CHECK_FALSE(wrong_type(prove).has_value());
    }
    // Neither, for any other reply, of whatever shape.
    for (const Reply& other :
         {integer(1), bulk("prove"), array({}), array({bulk("prove"), bulk("m")}),
          array({bulk("limit"), integer(1)})}) {
        CHECK_FALSE(wrong_type(other).has_value());
        CHECK_FALSE(demanded_proof(other).has_value());
    }
}

TEST_CASE("renew, release, limit, pause, admission, lost and gc replies") {
    SECTION("renew") {
        const Script& renew = scripts::k_renew_script;
        const auto renewed =
            decode_renew(sent_by(renew, {{"kind", bulk("renewed")},
                                         {"deadline_ms", integer(1'800'000'030'000)},
                                         {"now_ms", integer(1'800'000'000'000)},
                                         {"ttl_ms", integer(30'000)}}));
        CHECK(std::get<Renewal>(renewed).deadline_ms == 1'800'000'030'000);
        CHECK(std::get<Renewal>(renewed).server_now_ms == 1'800'000'000'000);
        CHECK(std::get<Renewal>(renewed).ttl == Milliseconds{30'000});
        const auto lost = decode_renew(sent_by(renew, {{"kind", bulk("lost")},
                                                       {"why", bulk("expired")},
                                                       {"now_ms", integer(1'800'000'000'000)},
                                                       {"lost_at_ms", integer(1'799'999'990'000)},
                                                       {"cause", bulk("change")}}));
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
            decode_renew(sent_by(renew, {{"kind", bulk("queued")}}))));
    }
    SECTION("release") {
        const Script& release = scripts::k_release_script;
        CHECK(decode_release(sent_by(release, {{"kind", bulk("released")}})) ==
              ReleaseOutcome::released);
        CHECK(decode_release(sent_by(release, {{"kind", bulk("left_queue")}})) ==
              ReleaseOutcome::left_queue);
        CHECK(decode_release(sent_by(release, {{"kind", bulk("not_found")}})) ==
              ReleaseOutcome::not_found);
        // A late release of a successful run --once-per: what became of its claim.
        for (const auto& [claim, outcome] : {std::pair{"done", ReleaseOutcome::late_done},
                                             {"taken", ReleaseOutcome::late_taken},
                                             {"gone", ReleaseOutcome::late_gone}}) {
            CHECK(decode_release(sent_by(release, {{"kind", bulk("not_found")},
                                                   {"occurrence", bulk(claim)}})) == outcome);
        }
        CHECK_THROWS_AS(decode_release(sent_by(
                            release, {{"kind", bulk("not_found")}, {"occurrence", bulk("later")}})),
                        InternalError);
    }
    SECTION("limit") {
        const LimitInfo info =
            decode_limit(sent_by(scripts::k_limit_script, {{"limit", integer(4)},
                                                           {"stored", integer(1)},
                                                           {"held", integer(2)},
                                                           {"queued", integer(7)},
                                                           {"history", integer(0)},
                                                           {"set_by", bulk("operator")}}));
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
            return sent_by(pause, {{"kind", bulk("ok")},
                                   {"held", integer(1)},
                                   {"queued", integer(2)},
                                   {"limit", integer(3)},
                                   {"now_ms", integer(1'800'000'000'000)},
                                   {"pause", bulk(json)},
                                   {"since_ms", integer(since)},
                                   {"until_ms", integer(0)},
                                   {"due_in_ms", integer(-1)}});
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
        CHECK_FALSE(decode_pause(sent_by(pause, {{"kind", bulk("conflict")}})).has_value());
    }
    SECTION("lost") {
        const LossDeclared lost =
            decode_lost(sent_by(scripts::k_lost_script,
                                {{"lost_at_ms", integer(1000)}, {"opens_at_ms", integer(61000)}}));
        CHECK(lost.lost_at_ms == 1000);
        CHECK(lost.opens_at_ms == 61000);
    }
    SECTION("view: the counts, admission, entries of each kind, and a pause") {
        const Script& view = scripts::k_view_script;
        // Records as the info hash stores them (lua/lib/records.lua), parsed by the client.
        const Reply holder =
            sent_by(view, {{"token", bulk("h1")},
                           {"dead", integer(0)},
                           {"deadline_ms", integer(61000)},
                           {"record", bulk("h 0,3 77 1000 60000 " + k_pause_json)}});
        const Reply waiter = sent_by(view, {{"token", bulk("w1")},
                                            {"dead", integer(1)},
                                            {"position", integer(1)},
                                            {"record", bulk("w x - 1200 5000 {}")}});
        const Reply unreadable =
            sent_by(view, {{"token", bulk("w2")}, {"dead", integer(0)}, {"position", integer(2)}});
        const View decoded =
            decode_view(sent_by(view, {{"kind", bulk("view")},
                                       {"now_ms", integer(1500)},
                                       {"limit", integer(4)},
                                       {"exclusive", bulk("")},
                                       {"paused", bulk(k_pause_json)},
                                       {"paused_since_ms", integer(1100)},
                                       {"paused_until_ms", integer(0)},
                                       {"holders", integer(1)},
                                       {"held", integer(2)},
                                       {"expired", integer(0)},
                                       {"waiting", integer(1)},
                                       {"stale", integer(1)},
                                       {"history", integer(100)},
                                       {"acquired_total", integer(9)},
                                       {"expired_total", integer(2)},
                                       {"lost_total", integer(1)},
                                       {"oldest", holder},
                                       {"oldest_wait_since_ms", integer(1200)},
                                       {"opens_at_ms", integer(2000)},
                                       {"cause", bulk("change")},
                                       {"lost_at_ms", integer(1000)},
                                       {"noticed", integer(0)},
                                       {"holder_entries", array({holder})},
                                       {"waiter_entries", array({waiter, unreadable})}}));
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
        const View bare = decode_view(sent_by(view, {{"kind", bulk("view")},
                                                     {"now_ms", integer(1500)},
                                                     {"exclusive", bulk("")},
                                                     {"unproven", integer(1)}}));
        CHECK_FALSE(bare.limit.has_value());
        CHECK_FALSE(bare.pause.has_value());
        CHECK_FALSE(bare.admission.has_value());
        CHECK(bare.holder_entries.empty());
        // A record edited by hand, or of the other kind, is no record: the entry stays.
        const auto holder_with = [&](const std::string& record) {
            return sent_by(view, {{"token", bulk("h2")},
                                  {"dead", integer(0)},
                                  {"deadline_ms", integer(1)},
                                  {"record", bulk(record)}});
        };
        const View odd = decode_view(sent_by(
            view,
            {{"kind", bulk("view")},
             {"now_ms", integer(1)},
             {"holder_entries", array({holder_with("h  1 1 1 {}"), holder_with("h x 1 1 1 {}"),
                                       holder_with("w - - 1 30000 {}"), holder_with("h 2")})},
             {"waiter_entries", array({})}}));
        REQUIRE(odd.holder_entries.size() == 4);
        for (const ViewEntry& entry : odd.holder_entries) {
            CHECK(entry.token == "h2");
            CHECK_FALSE(entry.record.has_value());
        }
        CHECK_THROWS_AS(decode_view(sent_by(view, {{"kind", bulk("prove")}, {"marker", bulk("")}})),
                        InternalError);
    }
    SECTION("gc: a step with what it removed, and the last one") {
        const Script& gc = scripts::k_gc_script;
        const Reply removed = sent_by(gc, {{"kind", bulk("waiter")},
                                           {"token", bulk("ab12")},
                                           {"record", bulk("w - - 1 30000 {}")},
                                           {"dead_for_ms", integer(2500)}});
        const GcStep step = decode_gc(sent_by(gc, {{"next_phase", bulk("holders")},
                                                   {"next_position", bulk("100")},
                                                   {"deleted", integer(0)},
                                                   {"holders", integer(4)},
                                                   {"queued", integer(1)},
                                                   {"removed", array({removed})}}));
        CHECK(step.next.phase == "holders");
        CHECK(step.next.position == "100");
        CHECK(step.holders == 4);
        CHECK(step.queued == 1);
        REQUIRE(step.removed.size() == 1);
        CHECK(step.removed[0].kind == "waiter");
        CHECK(step.removed[0].token == "ab12");
        CHECK(step.removed[0].record == "w - - 1 30000 {}");
        CHECK(step.removed[0].dead_for_ms == 2500);
        const GcStep last = decode_gc(sent_by(gc, {{"next_phase", bulk("")},
                                                   {"next_position", bulk("0")},
                                                   {"deleted", integer(-1)},
                                                   {"holders", integer(0)},
                                                   {"queued", integer(0)},
                                                   {"removed", array({})}}));
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
    CHECK_THROWS_WITH(decode_acquire(array({bulk("ok"), integer(1), integer(0), integer(2),
                                            integer(1), integer(3), bulk("0")})),
                      Catch::Contains("acquire.lua answered something other than names"));
    // A name whose value is missing.
    CHECK_THROWS_AS(decode_renew(array({bulk("kind"), bulk("renewed"), bulk("deadline_ms")})),
                    InternalError);
    // A field left out.
    CHECK_THROWS_WITH(decode_acquire(sent_by(acquire, {{"kind", bulk("toolarge")}})),
                      Catch::Contains("acquire.lua answered without 'limit'"));
    // A kind nobody sends.
    CHECK_THROWS_WITH(decode_acquire(sent_by(acquire, {{"kind", bulk("later")}})),
                      Catch::Contains("unexpected acquire reply 'later'"));
    // A field of another type.
    CHECK_THROWS_AS(
        decode_lost(array({bulk("lost_at_ms"), bulk("soon"), bulk("opens_at_ms"), integer(1)})),
        InternalError);
}

namespace {

// The names of `argv` (names and values), in order; fails the test when it is not names and
// values.
std::vector<std::string> names_of(const std::vector<std::string>& argv) {
    REQUIRE(argv.size() % 2 == 0);
    std::vector<std::string> names;
    for (std::size_t i = 0; i < argv.size(); i += 2) {
        names.push_back(argv[i]);
    }
    return names;
}

// The names `script` declares, from the header the build generated (its `--- @args` line).
std::vector<std::string> declared(const Script& script) {
    return {script.params.begin(), script.params.end()};
}

} // namespace

TEST_CASE("each builder sends its script the names the script declares, in their order") {
    // The declared lists come from the scripts' own text, so a name added to, renamed in or
    // dropped from either end fails here; the order is the one the scripts' readers take at
    // the cost of one comparison each (cmake/embed_lua.cmake).
    const std::string token(32, 'a');
    const std::vector<std::pair<std::vector<std::string>, const Script*>> built = {
        {acquire_args({.token = token}), &scripts::k_acquire_script},
        {acquire_args({.token = token,
                       .limit = 3,
                       .ttl = Milliseconds{1000},
                       .queue = false,
                       .known = true,
                       .loss_grace = Milliseconds{0},
                       .exclusive = true,
                       .first_answer_ms = 5,
                       .supersede = true,
                       .max_waiting = 2}),
         &scripts::k_acquire_script},
        {release_args(token, true, std::nullopt, false), &scripts::k_release_script},
        {release_args(token, false,
                      CommandEnd{.status = 143, .signal = 15, .timed_out_after = Milliseconds{9}},
                      true),
         &scripts::k_release_script},
        {renew_args(token, std::nullopt, false, false), &scripts::k_renew_script},
        {renew_args(token, Milliseconds{5000}, true, true), &scripts::k_renew_script},
        {limit_args(std::nullopt, std::nullopt), &scripts::k_limit_script},
        {limit_args(4, 100), &scripts::k_limit_script},
        {unset_limit_args(), &scripts::k_limit_script},
        {pause_args(PauseAction::pause, "{}", Milliseconds{60'000}), &scripts::k_pause_script},
        {pause_args(PauseAction::look, "{}", std::nullopt), &scripts::k_pause_script},
        {lost_args(), &scripts::k_lost_script},
        {view_args({.counts = true, .oldest = true, .admission = true, .page = 10}),
         &scripts::k_view_script},
        {admission_args(), &scripts::k_view_script},
        {gc_args(true, GcCursor{}, 50), &scripts::k_gc_script},
    };
    for (const auto& [argv, script] : built) {
        INFO(script->name);
        CHECK(names_of(argv) == declared(*script));
    }
    // Every script has a builder above.
    for (const Script* script :
         {&scripts::k_acquire_script, &scripts::k_release_script, &scripts::k_renew_script,
          &scripts::k_limit_script, &scripts::k_pause_script, &scripts::k_lost_script,
          &scripts::k_view_script, &scripts::k_gc_script}) {
        INFO(script->name);
        CHECK(std::any_of(built.begin(), built.end(),
                          [&](const auto& entry) { return entry.second == script; }));
    }
}

#include "semaphore/wire.hpp"

#include "semaphore/record.hpp"
#include "util/name.hpp"
#include "util/number.hpp"

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <initializer_list>

namespace redsem::wire {

namespace {

const std::string k_none;

std::string number_or_empty(const std::optional<long long>& value) {
    return value ? std::to_string(*value) : "";
}

// A script's arguments: each name and its value, in the order its `--- @args` line declares
// them (see lua/lib/call.lua), which tests/unit/test_wire.cpp holds each builder to.
std::vector<std::string>
named(std::initializer_list<std::pair<std::string_view, std::string>> args) {
    std::vector<std::string> argv;
    argv.reserve(2 * args.size());
    for (const auto& [name, value] : args) {
        argv.emplace_back(name);
        argv.push_back(value);
    }
    return argv;
}

// A reply of names and values whose first name is "kind": its kind, else nullptr.
const std::string* kind_of(const Reply& reply) {
    if (reply.type != Reply::Type::array || reply.elements.size() < 2) {
        return nullptr;
    }
    const Reply& name = reply.elements[0];
    const Reply& value = reply.elements[1];
    if (name.type != Reply::Type::string || name.text != "kind" ||
        value.type != Reply::Type::string) {
        return nullptr;
    }
    return &value.text;
}

// The admission fields of a 'wait' or 'busy' reply (see lua/acquire.lua), sent only while
// admission is closed or paused.
AdmissionClosed admission_closed(const Fields& fields) {
    AdmissionClosed closed;
    if (fields.has("closed_for_ms")) {
        closed.opens_in = std::max(fields.ms("closed_for_ms"), Milliseconds{0});
        closed.cause = fields.string("cause");
        closed.lost_ago = std::max(fields.ms("lost_ms_ago"), Milliseconds{0});
    }
    if (fields.has("pause") && !fields.string("pause").empty()) {
        const std::string& pause = fields.string("pause");
        const long long ends_in = fields.integer("pause_ends_in_ms");
        closed.pause = PauseSeen{.by = parse_meta(pause),
                                 .age = std::max(fields.ms("paused_ms_ago"), Milliseconds{0}),
                                 .ends_in = ends_in >= 0 ? std::optional(Milliseconds{ends_in})
                                                         : std::nullopt};
    }
    return closed;
}

std::vector<long long> slot_list(const std::string& listed, long long slot) {
    return parse_slot_list(listed).value_or(std::vector<long long>{slot});
}

} // namespace

Fields::Fields(const Reply& reply, std::string_view script) : m_reply(reply), m_script(script) {
    bool named = reply.type == Reply::Type::array && reply.elements.size() % 2 == 0;
    for (std::size_t i = 0; named && i < reply.elements.size(); i += 2) {
        named = reply.elements[i].type == Reply::Type::string;
    }
    if (!named) {
        throw InternalError(
            fmt::format("{} answered something other than names and values", script));
    }
}

const Reply* Fields::find(std::string_view name) const {
    const auto& items = m_reply.elements;
    for (std::size_t i = 0; i < items.size(); i += 2) {
        if (items[i].text == name) {
            return &items[i + 1];
        }
    }
    return nullptr;
}

const Reply& Fields::value(std::string_view name) const {
    const Reply* value = find(name);
    if (value == nullptr) {
        throw InternalError(fmt::format("{} answered without '{}'", m_script, name));
    }
    return *value;
}

const std::string& Fields::kind() const {
    const Reply* value = find("kind");
    return value != nullptr && value->type == Reply::Type::string ? value->text : k_none;
}

bool Fields::has(std::string_view name) const {
    return find(name) != nullptr;
}

long long Fields::integer(std::string_view name) const {
    return value(name).as_integer();
}

const std::string& Fields::string(std::string_view name) const {
    return value(name).as_string();
}

const std::vector<Reply>& Fields::array(std::string_view name) const {
    return value(name).as_array();
}

std::optional<WrongType> wrong_type(const Reply& reply) {
    const std::string* kind = kind_of(reply);
    if (kind == nullptr || *kind != "wrongtype") {
        return std::nullopt;
    }
    const Fields fields(reply, "a script");
    return WrongType{.key = fields.string("key"),
                     .found = fields.string("found"),
                     .wanted = fields.string("wanted")};
}

std::optional<long long> newer_format(const Reply& reply) {
    const std::string* kind = kind_of(reply);
    if (kind == nullptr || *kind != "newer") {
        return std::nullopt;
    }
    return Fields(reply, "a script").integer("format");
}

std::optional<std::string> demanded_proof(const Reply& reply) {
    const std::string* kind = kind_of(reply);
    if (kind == nullptr || *kind != "prove") {
        return std::nullopt;
    }
    return Fields(reply, "a script").string("marker");
}

// ---- acquire.lua --------------------------------------------------------------------------

std::vector<std::string> acquire_args(const AcquireArgs& args) {
    return named({{"token", args.token},
                  {"limit", number_or_empty(args.limit)},
                  {"ttl_ms", std::to_string(args.ttl.count())},
                  {"mode", args.queue ? "wait" : "try"},
                  {"liveness_ms", std::to_string(args.liveness.count())},
                  {"meta", args.meta_json},
                  {"known", args.known ? "1" : "0"},
                  {"grace_ms", args.loss_grace ? std::to_string(args.loss_grace->count()) : ""},
                  {"wants", args.exclusive ? "x" : std::to_string(args.slots)},
                  {"first_answer_ms", number_or_empty(args.first_answer_ms)},
                  {"once_per_ms", args.once_per ? std::to_string(args.once_per->window_ms) : ""},
                  {"at_most_once", args.once_per && args.once_per->at_most_once ? "1" : ""},
                  {"attempts", args.once_per ? std::to_string(args.once_per->attempts) : ""},
                  {"keeper", args.keeper ? "1" : ""},
                  {"max_hold_ms", args.max_hold ? std::to_string(args.max_hold->count()) : ""},
                  {"collects", args.collects ? "1" : ""},
                  {"supersede", args.supersede ? "1" : ""},
                  {"max_waiting", number_or_empty(args.max_waiting)}});
}

AcquireReply decode_acquire(const Reply& reply) {
    const Fields fields(reply, "acquire.lua");
    const std::string& kind = fields.kind();
    if (kind == "ok") {
        const long long slot = fields.integer("slot");
        return Granted{.fence = fields.integer("fence"),
                       .slot = slot,
                       .slots = slot_list(fields.string("slots"), slot),
                       .deadline_ms = fields.integer("deadline_ms"),
                       .limit = fields.integer("limit"),
                       .server_now_ms = fields.integer("now_ms")};
    }
    if (kind == "wait") {
        return QueuedReply{.position = {.ahead = fields.integer("position"),
                                        .held = fields.integer("held"),
                                        .limit = fields.integer("limit"),
                                        .queued = fields.integer("queued")},
                           .next_expiry_in_ms = fields.integer("next_expiry_in_ms"),
                           .server_now_ms = fields.integer("now_ms"),
                           .closed = admission_closed(fields),
                           .refresh_extra = fields.ms("refresh_extra_ms")};
    }
    if (kind == "busy") {
        return Busy{.closed = admission_closed(fields)};
    }
    if (kind == "toolarge") {
        return TooLarge{.limit = fields.integer("limit")};
    }
    if (kind == "conflict") {
        return ConflictReply{.stored_limit = fields.integer("stored_limit"),
                             .held = fields.integer("held"),
                             .queued = fields.integer("queued")};
    }
    if (kind == "left") {
        return Left{};
    }
    if (kind == "full") {
        return Full{.queued = fields.integer("queued"),
                    .max_waiting = fields.integer("max_waiting")};
    }
    if (kind == "skipped") {
        return Skip{.done = fields.string("why") == "ran",
                    .why = fields.string("why"),
                    .cause = fields.string("cause"),
                    .token = fields.string("token"),
                    .by = parse_meta(fields.string("by")),
                    .since_ms = fields.integer("since_ms"),
                    .until_ms = fields.integer("until_ms"),
                    .server_now_ms = fields.integer("now_ms")};
    }
    throw InternalError(fmt::format("unexpected acquire reply '{}'", printable(kind)));
}

std::optional<Skip> decode_left_note(const std::string& payload) {
    // "skipped WHY SINCE_MS UNTIL_MS TOKEN JSON"
    const auto parts = split_spaces(payload, 6);
    if (parts.size() != 6 || parts[0] != k_skipped_note) {
        return std::nullopt;
    }
    const auto since = parse_integer(parts[2]);
    const auto until = parse_integer(parts[3]);
    if (!since || !until) {
        return std::nullopt;
    }
    return Skip{.done = parts[1] == "ran",
                .why = std::string(parts[1]),
                .token = std::string(parts[4]),
                .by = parse_meta(parts[5]),
                .since_ms = *since,
                .until_ms = *until};
}

std::optional<Milliseconds> decode_nudge(const std::string& payload) {
    const std::optional<long long> due_in = parse_integer(payload, 0);
    return due_in ? std::optional(Milliseconds{*due_in}) : std::nullopt;
}

long long decode_too_large(const std::string& payload) {
    const std::optional<long long> limit = parse_integer(payload, 0);
    if (!limit) {
        throw InternalError(fmt::format("malformed limit '{}'", printable(payload)));
    }
    return *limit;
}

HandOver decode_hand_over(const std::string& payload) {
    HandOver grant;
    long long granted_at_ms = 0;
    long long limit = 0;
    char listed[1024] = "";
    const int fields = std::sscanf(payload.c_str(), "%lld %lld %lld %lld %lld %1023s", &grant.fence,
                                   &grant.slot, &grant.deadline_ms, &granted_at_ms, &limit, listed);
    if (fields < 4) {
        throw InternalError(fmt::format("malformed hand-over '{}'", printable(payload)));
    }
    if (fields >= 5) {
        grant.limit = limit;
    }
    grant.slots = slot_list(listed, grant.slot);
    return grant;
}

// ---- release.lua, renew.lua ---------------------------------------------------------------

std::vector<std::string> release_args(const std::string& token, bool own,
                                      const std::optional<CommandEnd>& end, bool once) {
    std::string status, signal, timed_out;
    if (end) {
        status = std::to_string(end->status);
        if (end->signal) {
            signal = std::to_string(*end->signal);
        }
        if (end->timed_out_after) {
            timed_out = std::to_string(end->timed_out_after->count());
        }
    }
    return named({{"token", token},
                  {"who", own ? "own" : "other"},
                  {"status", status},
                  {"once", once ? "once" : ""},
                  {"signal", signal},
                  {"timed_out_ms", timed_out}});
}

ReleaseOutcome decode_release(const Reply& reply) {
    const Fields fields(reply, "release.lua");
    const std::string& kind = fields.kind();
    if (kind == "released") {
        return ReleaseOutcome::released;
    }
    if (kind == "left_queue") {
        return ReleaseOutcome::left_queue;
    }
    if (kind == "not_found" && fields.has("occurrence")) {
        const std::string& claim = fields.string("occurrence");
        if (claim == "done") {
            return ReleaseOutcome::late_done;
        }
        if (claim == "taken") {
            return ReleaseOutcome::late_taken;
        }
        if (claim == "gone") {
            return ReleaseOutcome::late_gone;
        }
        throw InternalError(
            fmt::format("unexpected claim '{}' in a release reply", printable(claim)));
    }
    if (kind == "not_found") {
        return ReleaseOutcome::not_found;
    }
    throw InternalError(fmt::format("unexpected release reply '{}'", printable(kind)));
}

std::vector<std::string> renew_args(const std::string& token, std::optional<Milliseconds> ttl,
                                    bool for_replicas, bool claimed) {
    return named({{"token", token},
                  {"ttl_ms", ttl ? std::to_string(ttl->count()) : ""},
                  {"replicas", for_replicas ? "1" : "0"},
                  {"claimed", claimed ? "claimed" : ""}});
}

RenewReply decode_renew(const Reply& reply) {
    const Fields fields(reply, "renew.lua");
    const std::string& kind = fields.kind();
    if (kind == "renewed") {
        return Renewal{.deadline_ms = fields.integer("deadline_ms"),
                       .server_now_ms = fields.integer("now_ms"),
                       .ttl = fields.ms("ttl_ms"),
                       .capped = fields.has("capped")};
    }
    if (kind == "lost") {
        return Lost{.loss = {.why = fields.string("why"),
                             .lost_at_ms = fields.integer("lost_at_ms"),
                             .cause = fields.string("cause"),
                             .server_now_ms = fields.integer("now_ms")}};
    }
    if (kind == "queued") {
        return StillQueued{};
    }
    throw InternalError(fmt::format("unexpected renew reply '{}'", printable(kind)));
}

// ---- limit.lua, pause.lua, lost.lua -------------------------------------------------------

std::vector<std::string> limit_args(std::optional<long long> new_limit,
                                    std::optional<long long> history) {
    return named({{"limit", number_or_empty(new_limit)}, {"history", number_or_empty(history)}});
}

std::vector<std::string> unset_limit_args() {
    return named({{"limit", "unset"}, {"history", ""}});
}

LimitInfo decode_limit(const Reply& reply) {
    const Fields fields(reply, "limit.lua");
    return LimitInfo{.limit = fields.integer("limit"),
                     .stored = fields.integer("stored") == 1,
                     .held = fields.integer("held"),
                     .queued = fields.integer("queued"),
                     .history = fields.integer("history"),
                     .set_by = fields.string("set_by")};
}

std::vector<std::string> pause_args(PauseAction action, const std::string& by_json,
                                    std::optional<Milliseconds> duration) {
    const char* word = action == PauseAction::pause    ? "pause"
                       : action == PauseAction::resume ? "resume"
                                                       : "look";
    return named({{"action", word},
                  {"by", by_json},
                  {"duration_ms", duration ? std::to_string(duration->count()) : ""}});
}

std::optional<PauseInfo> decode_pause(const Reply& reply) {
    const Fields fields(reply, "pause.lua");
    if (fields.kind() == "conflict") {
        return std::nullopt;
    }
    PauseInfo info{.held = fields.integer("held"),
                   .queued = fields.integer("queued"),
                   .limit = fields.integer("limit"),
                   .server_now_ms = fields.integer("now_ms"),
                   .due_in_ms = fields.integer("due_in_ms")};
    const std::string& pause = fields.string("pause");
    if (!pause.empty()) {
        info.pause = Pause{.by = parse_meta(pause),
                           .since_ms = fields.integer("since_ms"),
                           .until_ms = fields.integer("until_ms")};
    }
    return info;
}

std::vector<std::string> lost_args() {
    return named({});
}

LossDeclared decode_lost(const Reply& reply) {
    const Fields fields(reply, "lost.lua");
    return LossDeclared{.lost_at_ms = fields.integer("lost_at_ms"),
                        .opens_at_ms = fields.integer("opens_at_ms")};
}

// ---- view.lua -----------------------------------------------------------------------------

std::vector<std::string> view_args(const ViewRead& read) {
    std::string parts;
    for (const auto& [wanted, name] :
         {std::pair{read.counts, "counts"}, std::pair{read.oldest, "oldest"},
          std::pair{read.admission, "admission"}}) {
        if (wanted) {
            parts += parts.empty() ? name : fmt::format(",{}", name);
        }
    }
    if (parts == "admission") {
        parts = "admission,"; // ("admission" alone asks for a proof: admission_args())
    }
    return named({{"read", parts},
                  {"first_holder", std::to_string(read.first_holder)},
                  {"first_waiter", std::to_string(read.first_waiter)},
                  {"page", std::to_string(read.page)}});
}

std::vector<std::string> admission_args() {
    return named(
        {{"read", "admission"}, {"first_holder", "0"}, {"first_waiter", "0"}, {"page", "0"}});
}

namespace {

ViewEntry view_entry(const Reply& reply) {
    const Fields fields(reply, "view.lua");
    ViewEntry entry{.token = fields.string("token"), .dead = fields.integer("dead") == 1};
    Record::Kind kind = Record::Kind::holder;
    if (fields.has("deadline_ms")) {
        entry.deadline_ms = fields.integer("deadline_ms");
    } else {
        entry.position = fields.integer("position");
        kind = Record::Kind::waiter;
    }
    if (fields.has("record")) {
        // Its info entry as stored: readable when it is a record of the entry's kind.
        entry.record = parse_record(fields.string("record"));
        if (entry.record && entry.record->kind != kind) {
            entry.record.reset();
        }
    }
    return entry;
}

} // namespace

View decode_view(const Reply& reply) {
    const Fields fields(reply, "view.lua");
    if (fields.kind() != "view") {
        throw InternalError(fmt::format("unexpected view reply '{}'", printable(fields.kind())));
    }
    View view{.server_now_ms = fields.integer("now_ms")};
    if (fields.has("limit")) {
        view.limit = fields.integer("limit");
    }
    if (fields.has("exclusive")) {
        view.exclusive = fields.string("exclusive");
    }
    if (fields.has("paused")) {
        view.pause = Pause{.by = parse_meta(fields.string("paused")),
                           .since_ms = fields.integer("paused_since_ms"),
                           .until_ms = fields.integer("paused_until_ms")};
    }
    if (fields.has("claim_token")) {
        view.claim = Claim{.token = fields.string("claim_token"),
                           .stage = fields.string("claim_stage"),
                           .since_ms = fields.integer("claim_since_ms"),
                           .until_ms = fields.integer("claim_until_ms"),
                           .by = parse_meta(fields.string("claim_by"))};
        if (fields.has("claim_attempt")) {
            view.claim->attempt = fields.integer("claim_attempt");
        }
    }
    if (fields.has("held")) {
        view.holders = fields.integer("holders");
        view.held = fields.integer("held");
        view.expired = fields.integer("expired");
        view.waiting = fields.integer("waiting");
        view.stale = fields.integer("stale");
        view.history = fields.integer("history");
        view.acquired_total = fields.integer("acquired_total");
        view.expired_total = fields.integer("expired_total");
        view.lost_total = fields.integer("lost_total");
    }
    if (fields.has("oldest")) {
        view.oldest = view_entry(fields.value("oldest"));
    }
    if (fields.has("oldest_wait_since_ms")) {
        view.oldest_wait_since_ms = fields.integer("oldest_wait_since_ms");
    }
    if (fields.has("opens_at_ms")) {
        view.admission = AdmissionState{.opens_at_ms = fields.integer("opens_at_ms"),
                                        .cause = fields.string("cause"),
                                        .lost_at_ms = fields.integer("lost_at_ms"),
                                        .noticed = fields.integer("noticed") == 1,
                                        .server_now_ms = view.server_now_ms};
    }
    if (fields.has("recorded_opens_at_ms")) {
        view.recorded_admission =
            AdmissionState{.opens_at_ms = fields.integer("recorded_opens_at_ms"),
                           .cause = fields.string("recorded_cause"),
                           .lost_at_ms = fields.integer("recorded_lost_at_ms"),
                           .server_now_ms = view.server_now_ms};
    }
    if (fields.has("holder_entries")) {
        for (const Reply& entry : fields.array("holder_entries")) {
            view.holder_entries.push_back(view_entry(entry));
        }
        for (const Reply& entry : fields.array("waiter_entries")) {
            view.waiter_entries.push_back(view_entry(entry));
        }
    }
    return view;
}

// ---- gc.lua -------------------------------------------------------------------------------

std::vector<std::string> gc_args(bool dry_run, const GcCursor& cursor, long long budget) {
    return named({{"dry_run", dry_run ? "1" : "0"},
                  {"phase", cursor.phase},
                  {"position", cursor.position},
                  {"budget", std::to_string(budget)}});
}

GcStep decode_gc(const Reply& reply) {
    const Fields fields(reply, "gc.lua");
    GcStep step{
        .next = {.phase = fields.string("next_phase"), .position = fields.string("next_position")},
        .deleted = fields.integer("deleted"),
        .holders = fields.integer("holders"),
        .queued = fields.integer("queued")};
    for (const Reply& entry : fields.array("removed")) {
        const Fields removed(entry, "gc.lua");
        step.removed.push_back(GcRemoved{.kind = removed.kind(),
                                         .token = removed.string("token"),
                                         .record = removed.string("record"),
                                         .dead_for_ms = removed.integer("dead_for_ms")});
    }
    return step;
}

} // namespace redsem::wire

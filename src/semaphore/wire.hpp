#pragma once

// The wire between redsem and its scripts (lua/): the arguments of each script, sent as
// names and values (each script declares its names: lua/lib/call.lua), and its replies,
// decoded by name. Every script answers a flat list of names and
// values, {"kind", "ok", "fence", 12, ...}; no other file reads a reply by position.
// Each release calls only its own library and texts (lua_scripts.hpp), so both ends of this
// wire change together; what releases share is stored data (lua/lib/state.lua) and the
// notes pushed to waiters' lists (HandOver below).

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "redis/reply.hpp"
#include "semaphore/record.hpp"
#include "semaphore/values.hpp"

namespace redsem::wire {

// A script's reply as names and values. A reply of another shape, or without a field that
// is asked for, means redsem and its scripts disagree: InternalError.
class Fields {
public:
    // `script`: the script's name, for messages.
    Fields(const Reply& reply, std::string_view script);

    // The field "kind", "" when there is none.
    const std::string& kind() const;
    bool has(std::string_view name) const;
    long long integer(std::string_view name) const;
    const std::string& string(std::string_view name) const;
    const std::vector<Reply>& array(std::string_view name) const;
    // The value itself (a nested list of names and values, for one).
    const Reply& value(std::string_view name) const;
    Milliseconds ms(std::string_view name) const { return Milliseconds{integer(name)}; }

private:
    const Reply* find(std::string_view name) const;

    const Reply& m_reply;
    std::string_view m_script;
};

// ---- what every script may answer ---------------------------------------------------------

// A key in the semaphore's place holds another kind of value (load_state() in
// lua/lib/state.lua): {kind wrongtype, key, found, wanted}.
struct WrongType {
    std::string key;
    std::string found;  // its type
    std::string wanted; // the type redsem keeps there
};
std::optional<WrongType> wrong_type(const Reply& reply);

// A newer redsem stored the semaphore's state in a format this one does not read
// (k_state_format): {kind newer, format}. Nothing was changed.
std::optional<long long> newer_format(const Reply& reply);

// Where INFO is denied, a script that judges the epoch may ask to be called again proving the
// epoch marker the epoch key holds (demand_proof() in lua/lib/epoch.lua):
// {kind prove, marker}; "" when the key holds none.
std::optional<std::string> demanded_proof(const Reply& reply);

// ---- acquire.lua --------------------------------------------------------------------------

struct AcquireArgs {
    std::string token{};
    std::optional<long long> limit{}; // nullopt: the stored one (1 for a new semaphore)
    Milliseconds ttl{0};
    bool queue = true; // false: never queue (-w 0)
    Milliseconds liveness{0};
    std::string meta_json{};
    bool known = false; // the server may know the token (a retry, a waiter refreshing)
    std::optional<Milliseconds> loss_grace{};
    long long slots = 1;
    bool exclusive = false;
    // The server time of this caller's first answer, kept across a place it lost: it belongs
    // to the occurrence in force then (run --once-per). nullopt before any answer.
    std::optional<long long> first_answer_ms{};
    std::optional<OncePer> once_per{};      // run --once-per
    bool keeper = false;                    // a keeper process renews the lease (--while-pid)
    std::optional<Milliseconds> max_hold{}; // acquire --max-hold
    // The caller collects a hand-over itself, removing its claim deadline from the alive set
    // (Semaphore::wait_for_hand_over()); a caller of 0.1.0 did not.
    bool collects = false;
    bool supersede = false;                 // --supersede
    std::optional<long long> max_waiting{}; // --max-waiting N
};
// ARGV after the wake-list prefix.
std::vector<std::string> acquire_args(const AcquireArgs& args);

struct Granted {
    long long fence = 0;
    long long slot = 0;
    std::vector<long long> slots{};
    long long deadline_ms = 0;
    long long limit = 0;
    long long server_now_ms = 0;
};
struct Busy {
    AdmissionClosed closed;
};
// Queued, or its place refreshed.
struct QueuedReply {
    QueuePosition position;
    long long next_expiry_in_ms = -1; // when the next slot may free up; -1: unknown
    long long server_now_ms = 0;
    AdmissionClosed closed;
    Milliseconds refresh_extra{0}; // how much later than k_waiter_refresh to refresh
};
// Another limit is in force.
struct ConflictReply {
    long long stored_limit = 0; // -1: not a number; -2: the state key is gone while in use
    long long held = 0;
    long long queued = 0;
};
// The caller's place ended with a note in its ":left" list, which says why (decode_left_note()):
// released by somebody else, or superseded. It holds nothing.
struct Left {};
// As many wait as the caller's --max-waiting allows: it is refused, holding nothing.
struct Full {
    long long queued = 0;
    long long max_waiting = 0;
};
// The caller asks for more slots than the limit (or asked, and the limit was lowered while it
// waited).
struct TooLarge {
    long long limit = 0;
};
using AcquireReply =
    std::variant<Granted, Busy, QueuedReply, ConflictReply, Left, Full, TooLarge, Skip>;
AcquireReply decode_acquire(const Reply& reply);

// The payload of a waiter's ":left" list: nullopt for "1" (released by somebody else), the
// skip for k_skipped_note and its claim (skip_waiter() in lua/lib/queue.lua), or why
// "superseded" and the newer waiter (supersede() in lua/lib/supersede.lua).
std::optional<Skip> decode_left_note(const std::string& payload);

// The payload of a waiter's ":nudge" list (nudge_near_head_entrant() in lua/lib/queue.lua):
// the time until a lease may run out, nullopt for none ("-1") or a malformed one.
std::optional<Milliseconds> decode_nudge(const std::string& payload);

// The payload of a waiter's ":toolarge" list: the limit it asks for more slots than.
long long decode_too_large(const std::string& payload);

// What release() pushes to a waiter's wake list when it hands a slot over
// (hand_over() in lua/lib/queue.lua): "FENCE SLOT DEADLINE_MS NOW_MS LIMIT SLOTS". Any release
// of the fleet may push it, so it keeps its shape; an older one pushes neither LIMIT nor
// SLOTS (nullopt and {slot}).
struct HandOver {
    long long fence = 0;
    long long slot = 0;
    std::vector<long long> slots{};
    long long deadline_ms = 0;
    std::optional<long long> limit;
};
HandOver decode_hand_over(const std::string& payload);

// ---- release.lua, renew.lua ---------------------------------------------------------------

// `once`: the release of a `run --once-per`, whose success is kept with its claim even
// after its lease ran out. `end`: how `run`'s command ended, kept with the released event.
std::vector<std::string> release_args(const std::string& token, bool own,
                                      const std::optional<CommandEnd>& end, bool once);
ReleaseOutcome decode_release(const Reply& reply);

std::vector<std::string> renew_args(const std::string& token, std::optional<Milliseconds> ttl,
                                    bool for_replicas, bool claimed);
// The token holds nothing: its lease was lost.
struct Lost {
    LeaseLoss loss;
};
// The token waits in the queue: it holds nothing yet, and nothing is lost.
struct StillQueued {};
using RenewReply = std::variant<Renewal, Lost, StillQueued>;
RenewReply decode_renew(const Reply& reply);

// ---- limit.lua, pause.lua, lost.lua -------------------------------------------------------

std::vector<std::string> limit_args(std::optional<long long> new_limit,
                                    std::optional<long long> history);
std::vector<std::string> unset_limit_args();
LimitInfo decode_limit(const Reply& reply);

enum class PauseAction { pause, resume, look };
std::vector<std::string> pause_args(PauseAction action, const std::string& by_json,
                                    std::optional<Milliseconds> duration);
// nullopt: the stored limit is not one this redsem reads; nothing changed.
std::optional<PauseInfo> decode_pause(const Reply& reply);

std::vector<std::string> lost_args();
LossDeclared decode_lost(const Reply& reply);

// ---- view.lua -----------------------------------------------------------------------------

// What a view call reads (see lua/view.lua) besides the clock, the limit and the pause.
struct ViewRead {
    bool counts = false;    // live and dead holders and waiters, held slots, history counters
    bool oldest = false;    // the live holder that has held longest (reads every record)
    bool admission = false; // admission after a possible loss of data
    // `page` holders from rank `first_holder` and waiters from queue position `first_waiter`
    // (0: the first); none when `page` is 0.
    long long first_holder = 0;
    long long first_waiter = 0;
    long long page = 0;
};
std::vector<std::string> view_args(const ViewRead& read);
// Admission alone, proven where INFO is denied (Semaphore::admission()).
std::vector<std::string> admission_args();

// A holder or a waiter as view.lua judges it.
struct ViewEntry {
    std::string token;
    bool dead = false;              // lease ran out, hand-over lapsed, or stopped refreshing
    long long deadline_ms = 0;      // holders: the lease's end
    long long position = 0;         // waiters: 1 = next
    std::optional<Record> record{}; // nullopt: its info entry is missing or malformed
};

// One semaphore as view.lua sees it: what it was asked for (ViewRead), at server time
// `server_now_ms`. The counts are 0 where not asked for.
struct View {
    long long server_now_ms = 0;
    std::optional<long long> limit{}; // nullopt: none stored, or one this redsem cannot read
    std::string exclusive{};          // the token of an --exclusive holder ("": none)
    std::optional<Pause> pause{};     // in force now
    std::optional<Claim> claim{};     // the occurrence's, while its window lasts
    long long holders = 0;            // live ones
    long long held = 0;               // slots of live holders
    long long expired = 0;            // dead holders not pruned yet
    long long waiting = 0;            // live waiters
    long long stale = 0;              // waiters past their liveness
    long long history = 0;            // events its history keeps
    long long acquired_total = 0;
    long long expired_total = 0;
    long long lost_total = 0;
    std::optional<ViewEntry> oldest{}; // the live holder that has held longest
    std::optional<long long> oldest_wait_since_ms{};
    // Asked for, and proven (without INFO a call must prove the epoch: Semaphore::admission()).
    std::optional<AdmissionState> admission{};
    // Asked for and not proven: the closure a call that could tell recorded, while in force.
    std::optional<AdmissionState> recorded_admission{};
    std::vector<ViewEntry> holder_entries{}; // the pages asked for
    std::vector<ViewEntry> waiter_entries{};
};
// A reply of kind view (check wrong_type() and newer_format() first).
View decode_view(const Reply& reply);

// ---- gc.lua -------------------------------------------------------------------------------

// Where a gc of one semaphore goes on: a phase and a position in it ("" phase: done).
struct GcCursor {
    std::string phase = "alive";
    std::string position = "0";
};
std::vector<std::string> gc_args(bool dry_run, const GcCursor& cursor, long long budget);

// One entry a gc call removed (or would remove, in a dry run).
struct GcRemoved {
    std::string kind; // "holder", "waiter", "handover" or "orphan"
    std::string token;
    std::string record; // the raw record, "" if none
    long long dead_for_ms = 0;
};
struct GcStep {
    GcCursor next;
    long long deleted = 0; // last call: 1 deleted, -1 kept by an operator's settings
    long long holders = 0; // last call: what is there now
    long long queued = 0;
    std::vector<GcRemoved> removed{};
};
GcStep decode_gc(const Reply& reply);

} // namespace redsem::wire

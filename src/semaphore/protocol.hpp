#pragma once

// What redsem's C++ and its Lua scripts must agree on, written once. The build turns every
// declaration here into a Lua constant that every script sees (cmake/embed_lua.cmake, the
// module "protocol"): k_max_limit becomes MAX_LIMIT. So each is an integer, a string literal
// or an array of string literals, one `inline constexpr` declaration each, and the why of
// each stays in this file.

#include <string_view>

namespace redsem {

// The highest limit (and so the highest slot count); slots are numbered below it.
inline constexpr long long k_max_limit = 100'000;
// The lease of a holder whose record names none (keys changed by hand), and acquire's default.
inline constexpr long long k_default_ttl_ms = 60'000;
// After Redis may have lost data (a restart without it, a failover, a failback, an eviction),
// nobody new is admitted for this long, so that a holder whose lease it forgot has found out
// and stopped first: it renews at least every 20 s (src/process/heartbeat.cpp) and stops its
// command within --kill-after (10 s) of finding its lease gone. A caller's --loss-grace changes
// its own admission only, and is never stored.
inline constexpr long long k_loss_grace_ms = 60'000;
// How many events a semaphore's history (redsem log) keeps when it names no other length.
inline constexpr long long k_default_history = 10'000;
// A waiter handed a slot must collect it within this time, or the slot is taken back and
// handed on (the waiter died between its last refresh and the hand-over).
inline constexpr long long k_claim_ms = 3'000;
// The waiters that may take the next free slot, and this many behind them, refresh their place
// as often as the head: while one of them lives, somebody looks again within the head's
// refresh interval, so dead waiters in a row at the head are each passed over within about
// k_claim_ms (lua/acquire.lua).
inline constexpr long long k_near_head = 8;
// A queued waiter that has not refreshed its place for this long, plus the extra its place far
// back gives it (lua/acquire.lua), is dropped from the queue. So a waiter whose liveness deadline
// is at most this far off looks again within the head's refresh interval anyway, and only the
// others are nudged when they move up near the head (lib/queue.lua).
inline constexpr long long k_waiter_liveness_ms = 5'000;
// How long (server time) a function library trusts a sparing eviction policy it read last
// (INFO memory, the largest single step of a hand-over): an allkeys-* policy or a maxmemory
// set is seen by calls that admit within this time. A policy set to allkeys-* and back
// meanwhile goes unseen, but not its evictions: they come after a CONFIG SET, and so are not
// explained (lib/eviction.lua). An evicting policy is read again by every call, so one set back
// is seen at once.
inline constexpr long long k_policy_fresh_ms = 1'000;

// The latest time a record or a score may name, 9999-12-31 in epoch milliseconds: larger ones
// (edited by hand) are taken as this.
inline constexpr long long k_latest_time_ms = 253'402'300'799'999;

// The format of a semaphore's stored state (its keys and records, lua/lib/state.lua), kept in
// the state hash's field `format` whenever the limit is stored. 0.1.0 wrote none (format 1);
// this release reads 1 and 2. A release that changes what is stored in a way older ones
// cannot read raises it, and every call of an older release then refuses that semaphore
// rather than misread it.
inline constexpr long long k_state_format = 2;

// The fields a caller's record stores besides its metadata for people: lua/acquire.lua writes
// them from its arguments of the same names (wire::AcquireArgs), and an older release of the
// fleet reads them there. The window in ms of a caller that asks for one run per occurrence
// (run --once-per: lua/lib/occurrence.lua).
inline constexpr std::string_view k_once_per_field = "once_per";
// The field (true) of a --once-per caller that asks for at most one run per occurrence (run
// --at-most-once): it also skips an occurrence whose claim may have been lost.
inline constexpr std::string_view k_at_most_once_field = "at_most_once";
// The field of a --once-per caller that bounds the runs one occurrence may have (run
// --attempts N): after N runs that failed or left without finishing, the callers of that
// occurrence skip. Without it (an earlier build), no bound.
inline constexpr std::string_view k_attempts_field = "attempts";

// The field of a caller's record (true; lua/acquire.lua writes it from its argument
// "collects") that says the caller collects a hand-over itself: once its BLPOP took the grant
// off its wake list, it removes its claim deadline from the alive set (ZREM), within
// k_claim_ms. A BLPOP also takes a grant into the socket of a process that died or was stopped
// meanwhile; a claim deadline still there when it runs out shows that, and the slot goes on.
// Without it (an earlier build), the BLPOP counts as the collection.
inline constexpr std::string_view k_collects_field = "collects";

// While a semaphore is paused its queue holds this member behind every waiter, so that no gc
// (also one of a release before pauses) takes it for empty. It is nobody's token (those are 32
// hex digits), and every reader counts it as nobody.
inline constexpr std::string_view k_pause_mark = "paused";

// The lists a semaphore's clients block on, after "<prefix>:{<name>}:" (Keys::make()):
// "wake:" + token is a waiter's wake list (its grant); + token + a suffix, what it or its
// keeper is told besides; + "drained", a draining client's.
inline constexpr std::string_view k_wake_part = "wake:";
inline constexpr std::string_view k_nudge_suffix = ":nudge"; // moved near the head
inline constexpr std::string_view k_left_suffix = ":left";   // released while it waited: "1", or
                                                             // k_skipped_note and the claim
// What a hand-over pushes to a waiter's ":left" list when it passes the waiter over because
// another run claims the occurrence: followed by " WHY SINCE_MS UNTIL_MS TOKEN JSON". A waiter
// superseded by a newer one (lib/supersede.lua) is told the same way, WHY k_superseded_why,
// SINCE_MS when, UNTIL_MS 0, and the newer waiter's TOKEN and JSON; the history has it as
// skipped for that why.
inline constexpr std::string_view k_skipped_note = "skipped";
inline constexpr std::string_view k_superseded_why = "superseded";
inline constexpr std::string_view k_too_large_suffix = ":toolarge"; // the limit fell below it
inline constexpr std::string_view k_released_suffix = ":released";  // its keeper may stop
inline constexpr std::string_view k_drained_list = "drained";       // a holder left a pause

// The kinds of event a semaphore's history holds: lua/lib/history.lua writes them (its header
// says what each means), src/semaphore/history.cpp reads them and keeps an event of any other
// kind (a newer release's) as its stored text. tests/fixtures/events.txt has an example of
// each, and test_history.cpp's "every kind of event" makes each on a real server.
inline constexpr std::string_view k_event_kinds[] = {
    "acquired", "queued", "released", "expired", "unclaimed", "lost",    "left",
    "dropped",  "gc",     "skipped",  "limit",   "paused",    "resumed", "closed"};

// The commands the scripts run with redis.call, checked against the user's ACL before a
// script writes anything (lua/lib/main.lua): a script stopped half-way by a refusal would leave
// its first writes behind. `redsem doctor` probes the same list. INFO, XADD and XTRIM run by
// pcall (a refusal only turns off what they give), and CLUSTER MYID and NODES only on a Redis
// Cluster; tests/unit/test_protocol.cpp checks the scripts call nothing else.
inline constexpr std::string_view k_script_commands[] = {
    "bitpos",        "del",   "exists",  "hdel",    "hget",      "hincrby", "hmget",
    "hscan",         "hset",  "persist", "pexpire", "pexpireat", "pttl",    "rpush",
    "setbit",        "time",  "type",    "zadd",    "zcard",     "zpopmin", "zrange",
    "zrangebyscore", "zrank", "zrem",    "zscore"};

} // namespace redsem

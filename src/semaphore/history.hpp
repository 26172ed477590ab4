#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "semaphore/semaphore.hpp"

namespace redsem {

// One event of a semaphore's history, as lua/lib/history.lua writes it: a field of a
// stream entry (one entry per script call, its events in order) whose name is the kind and
// whose value is "TOKEN SLOT FENCE DURATION_MS JSON" ('-' where a part does not apply),
// "FROM TO" for a limit change, "CAUSE LOST_AT_MS OPENS_AT_MS" for admission closed after a
// possible loss of data, "UNTIL_MS JSON" for a pause ('-': until resumed; JSON: who paused,
// label the reason) and "PAUSED_FOR_MS JSON" for its end ('{}': its --for ran out).
// Who a caller that skipped found in its way: a holder (the semaphore was busy), or the run
// that claims the occurrence (run --once-per).
struct SkippedFor {
    std::string token;
    long long since_ms = 0;            // its grant (server clock)
    std::optional<long long> until_ms; // a claim: when its window ends
    HolderMeta meta{};
};

struct Event {
    std::string name;      // the semaphore
    std::string id;        // the stream entry's ID, "MS-SEQ" (shared by a script call's events)
    long long time_ms = 0; // server clock, from the ID
    std::string kind;      // acquired, queued, released, expired, unclaimed, lost, left, dropped,
                           // skipped, gc, limit, closed, paused, resumed (or a kind this
                           // redsem does not know)
    std::string token;
    std::optional<long long> slot;  // the lowest of `slots`
    std::vector<long long> slots{}; // every slot of the grant (--slots K)
    std::optional<long long> fence;
    std::optional<long long> duration_ms;  // waited (acquired, left, dropped), held, or paused
                                           // (resumed)
    std::optional<HolderMeta> meta;        // nullopt when unknown; paused, resumed: by whom
    std::optional<long long> until_ms;     // paused: when it ends (nullopt: until resumed)
    std::optional<long long> exit_status;  // released by `run`: its command's exit status
    std::optional<long long> signal;       // and the signal that ended it (0: it exited;
                                           // nullopt: not said, as by an earlier build)
    std::optional<long long> timed_out_ms; // released by `run --max-run` that stopped its
                                           // command after this long
    std::string late;    // released by `run --once-per` after its lease ran out: what became of
                         // the claim, "done" (marked done all the same), "taken" (another run
                         // claimed the occurrence since) or "gone" (lost, or cleared); else ""
    std::string skipped; // skipped: "busy" (-w 0), "closed" or "paused" (a
                         // slot was free, admission was not), "ran" or
                         // "running" (a claim of the occurrence: --once-per)
    std::vector<SkippedFor> skipped_for{}; // skipped: the holders, or the claim
    std::optional<long long> limit_from;   // limit: nullopt for a new semaphore
    std::optional<long long> limit_to;
    std::string cause; // closed, and skipped "closed": "start", "change", "unproven", "evicted"
                       // or "declared" (see AdmissionClosed)
    std::optional<long long> lost_at_ms;  // closed: the possible loss of data
    std::optional<long long> opens_at_ms; // closed: when admission opens (server clock)
    std::string raw;                      // the value as stored, when it is not in the format above
};

// Parses one stream entry of semaphore `name`; an entry in no known shape keeps its text in
// `raw` (history from a newer redsem, or keys edited by hand).
Event parse_event(std::string_view name, std::string_view id, std::string_view kind,
                  std::string_view value);

// The events of `name` from `from_ms` to `to_ms` (server clock, inclusive), oldest first,
// read in pages of entries with XRANGE. Changes nothing.
std::vector<Event> read_history(Connection& connection, std::string_view prefix,
                                std::string_view name, long long from_ms, long long to_ms);

// How long the last holders of `name` held their slots: the held time of each of the newest
// `count` releases at most (newest first), read back from its newest entry (XREVRANGE, in
// pages) through `scan` entries at most; `whole` says whether that was all its history.
// Empty when its history is off or has no release yet.
std::vector<Milliseconds> recent_holds(Connection& connection, std::string_view prefix,
                                       std::string_view name, std::size_t count, std::size_t scan,
                                       bool& whole);

// The runs of a semaphore as its history tells them: releases by `run`, which record how the
// command ended (exit_status).
struct RunHistory {
    std::optional<Event> last{};         // the newest
    std::optional<Event> last_success{}; // the newest that exited 0
};

// The newest run of `name` and its newest success, read back from the newest entry (XREVRANGE,
// in pages) until both are found or the history ends. Changes nothing.
RunHistory read_runs(Connection& connection, std::string_view prefix, std::string_view name);

// Follows the histories of `names` from the entries after `last_ids` (one per name; "$": only
// what comes next): waits up to `block` for new events (XREAD BLOCK, woken by the server) and
// returns them in order, updating `last_ids`; empty when none came. The names must all be on
// one server (on a Redis Cluster, one hash slot: else UsageError). `interrupt_fd` as for
// Connection::command().
std::vector<Event> follow_history(Connection& connection, std::string_view prefix,
                                  const std::vector<std::string>& names,
                                  std::vector<std::string>& last_ids, Milliseconds block,
                                  int interrupt_fd = -1);

// The ID of the newest entry of each name's history ("0-0" when it has none), for
// follow_history() to start after: one pipelined round trip.
std::vector<std::string> last_entry_ids(Connection& connection, std::string_view prefix,
                                        const std::vector<std::string>& names);

// Events of several semaphores merged into one timeline, by time (then by name, then ID).
void sort_by_time(std::vector<Event>& events);

} // namespace redsem

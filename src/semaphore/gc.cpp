#include "semaphore/gc.hpp"

#include "lua_scripts.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/wire.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <iterator>

namespace redsem {

namespace {

using wire::GcCursor;

ScriptCall gc_call(std::string_view prefix, const std::string& name, bool dry_run,
                   const GcCursor& cursor) {
    const Keys keys = Keys::make(prefix, name);
    return {scripts::k_gc_script, keys.script_keys(),
            keys.script_args(wire::gc_args(dry_run, cursor, k_gc_entries_per_call)),
            keys.cluster_script_keys()};
}

GcEntry::Kind parse_kind(const std::string& text) {
    if (text == "waiter") {
        return GcEntry::Kind::waiter;
    }
    if (text == "handover") {
        return GcEntry::Kind::handover;
    }
    if (text == "orphan") {
        return GcEntry::Kind::orphan;
    }
    return GcEntry::Kind::holder;
}

// What one semaphore's calls added up to.
struct SemaphoreGc {
    std::vector<GcEntry> removed;
    long long holders_removed = 0;
    long long waiters_removed = 0;
};

// Takes one reply of lua/gc.lua into `progress`; returns the cursor for the next call, or
// throws the failure.
GcCursor collect_reply(const std::string& name, const Reply& reply, SemaphoreGc& progress,
                       bool dry_run, GcReport& report) {
    check_readable(reply, name, "gc left it alone");
    wire::GcStep step = wire::decode_gc(reply);
    const GcCursor& next = step.next;
    for (wire::GcRemoved& entry : step.removed) {
        GcEntry removed;
        removed.name = name;
        removed.kind = parse_kind(entry.kind);
        removed.token = std::move(entry.token);
        removed.record = parse_record(entry.record);
        removed.dead_for_ms = entry.dead_for_ms;
        if (removed.kind == GcEntry::Kind::holder || removed.kind == GcEntry::Kind::handover) {
            ++progress.holders_removed;
        } else if (removed.kind == GcEntry::Kind::waiter) {
            ++progress.waiters_removed;
        }
        progress.removed.push_back(std::move(removed));
    }
    if (next.phase.empty()) {
        // A dry run deletes nothing: the semaphore would go if nothing were left after it,
        // unless an operator's settings keep it (-1).
        const bool deleted =
            step.deleted != -1 && (dry_run ? step.holders - progress.holders_removed <= 0 &&
                                                 step.queued - progress.waiters_removed <= 0
                                           : step.deleted == 1);
        if (deleted) {
            report.deleted.push_back(name);
        }
        std::move(progress.removed.begin(), progress.removed.end(),
                  std::back_inserter(report.removed));
    }
    return step.next;
}

} // namespace

std::string_view kind_name(GcEntry::Kind kind) {
    switch (kind) {
    case GcEntry::Kind::holder:
        return "holder";
    case GcEntry::Kind::waiter:
        return "waiter";
    case GcEntry::Kind::handover:
        return "handover";
    case GcEntry::Kind::orphan:
        return "orphan";
    }
    return "holder";
}

GcReport collect_garbage(Connection& connection, std::string_view prefix,
                         const std::vector<std::string>& names, bool dry_run) {
    GcReport report;
    std::vector<std::string> targets =
        names.empty() ? scan_names(connection, prefix, "state", &report.unlisted) : names;
    for (std::size_t first = 0; first < targets.size(); first += k_gc_batch) {
        const std::size_t last = std::min(targets.size(), first + k_gc_batch);
        // The first call of each semaphore is pipelined: most finish in it.
        std::vector<ScriptCall> calls;
        for (std::size_t i = first; i < last; ++i) {
            calls.push_back(gc_call(prefix, targets[i], dry_run, {}));
        }
        const std::vector<Reply> replies = connection.eval_pipeline(calls);
        for (std::size_t i = first; i < last; ++i) {
            const std::string& name = targets[i];
            SemaphoreGc progress;
            try {
                Reply reply = replies[i - first];
                if (reply.is_error()) {
                    throw_script_error(scripts::k_gc_script, reply.text);
                }
                for (;;) {
                    const GcCursor next = collect_reply(name, reply, progress, dry_run, report);
                    if (next.phase.empty()) {
                        break;
                    }
                    reply = connection.eval(gc_call(prefix, name, dry_run, next));
                }
            } catch (const Error& error) {
                if (error.transience() == Transience::unreachable) {
                    throw; // the connection failed: not this semaphore's fault
                }
                std::string message = error.what();
                if (message.find("WRONGTYPE") != std::string::npos) {
                    try {
                        throw_foreign_key(connection, Keys::make(prefix, name), name,
                                          "gc left it alone");
                    } catch (const ConflictError& named) {
                        message = named.what();
                    }
                }
                report.failed.push_back(
                    GcFailure{name, static_cast<ExitCode>(error.exit_code()), message});
            }
        }
    }
    return report;
}

} // namespace redsem

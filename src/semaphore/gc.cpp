#include "semaphore/gc.hpp"

#include "lua_scripts.hpp"
#include "semaphore/inspect.hpp"
#include "semaphore/keys.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace redsem {

namespace {

std::vector<std::string> gc_command(const std::string& sha_or_body, bool by_sha,
                                    std::string_view prefix, const std::string& name,
                                    bool dry_run) {
    const Keys keys = Keys::make(prefix, name);
    std::vector<std::string> command{by_sha ? "EVALSHA" : "EVAL", sha_or_body, "6"};
    for (auto& key : keys.script_keys()) {
        command.push_back(std::move(key));
    }
    command.push_back(keys.wake_prefix);
    command.push_back(dry_run ? "1" : "0");
    return command;
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

void collect_reply(const std::string& name, const Reply& reply, GcReport& report) {
    const auto& items = reply.as_array();
    if (!items.empty() && items[0].type == Reply::Type::string && items[0].text == "wrongtype") {
        report.failed.push_back(GcFailure{
            name, ExitCode::conflict,
            fmt::format("key '{}' holds a {}, not the {} redsem keeps there; gc left it alone",
                        printable(reply.at(1).as_string(), 300), reply.at(2).as_string(),
                        reply.at(3).as_string())});
        return;
    }
    if (reply.at(0).as_integer() == 1) {
        report.deleted.push_back(name);
    }
    for (std::size_t i = 1; i < items.size(); ++i) {
        const Reply& entry = items[i];
        GcEntry removed;
        removed.name = name;
        removed.kind = parse_kind(entry.at(0).as_string());
        removed.token = entry.at(1).as_string();
        removed.record = parse_record(entry.at(2).as_string());
        removed.dead_for_ms = entry.at(3).as_integer();
        report.removed.push_back(std::move(removed));
    }
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
    std::vector<std::string> targets = names.empty() ? scan_names(connection, prefix) : names;
    GcReport report;
    const Script& script = scripts::k_gc_script;
    for (std::size_t first = 0; first < targets.size(); first += k_gc_batch) {
        const std::size_t last = std::min(targets.size(), first + k_gc_batch);
        std::vector<std::vector<std::string>> commands;
        for (std::size_t i = first; i < last; ++i) {
            commands.push_back(gc_command(script.sha1, true, prefix, targets[i], dry_run));
        }
        const std::vector<Reply> replies = connection.pipeline(commands);
        for (std::size_t i = first; i < last; ++i) {
            Reply reply = replies[i - first];
            if (reply.is_error() && reply.text.rfind("NOSCRIPT", 0) == 0) {
                // The server does not have the script cached: EVAL sends it (and caches it).
                reply =
                    connection.command(gc_command(script.body, false, prefix, targets[i], dry_run));
            }
            if (reply.is_error()) {
                auto meaning = classify_reply_error(reply.text);
                report.failed.push_back(GcFailure{targets[i], meaning.code, meaning.message});
                continue;
            }
            collect_reply(targets[i], reply, report);
        }
    }
    return report;
}

} // namespace redsem

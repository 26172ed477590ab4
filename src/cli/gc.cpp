#include "semaphore/gc.hpp"
#include "cli/command_args.hpp"
#include "cli/output.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"
#include "util/table.hpp"
#include "util/token.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

namespace redsem::cli {

namespace {

using nlohmann::json;

void print_report_json(const GcReport& report, bool dry_run) {
    json removed = json::array();
    for (const auto& entry : report.removed) {
        const auto& r = entry.record;
        removed.push_back({{"name", entry.name},
                           {"kind", kind_name(entry.kind)},
                           {"token", entry.token},
                           {"host", r ? json(r->meta.host) : json(nullptr)},
                           {"pid", r ? json(r->meta.pid) : json(nullptr)},
                           {"user", r ? json(r->meta.user) : json(nullptr)},
                           {"label", r ? json(r->meta.label) : json(nullptr)},
                           {"dead_for_ms", entry.dead_for_ms}});
    }
    json failed = json::array();
    for (const auto& failure : report.failed) {
        failed.push_back({{"name", failure.name}, {"error", failure.message}});
    }
    const json out{{"dry_run", dry_run},
                   {"removed", removed},
                   {"deleted", report.deleted},
                   {"failed", failed}};
    print_json(out);
}

void print_text(const GcReport& report, bool dry_run) {
    const char* verb = dry_run ? "would remove" : "removed";
    if (report.removed.empty() && report.deleted.empty()) {
        // A notice (stdout carries only results), and only when everything was looked at:
        // the errors and warnings name what was not.
        if (report.unlisted.empty() && report.failed.empty()) {
            std::cerr << "redsem: nothing to clean\n";
        }
        return;
    }
    if (!report.removed.empty()) {
        std::vector<std::vector<std::string>> rows{
            {"SEMAPHORE", "WHAT", "TOKEN", "HOST", "PID", "DEAD FOR", "LABEL"}};
        for (const auto& entry : report.removed) {
            const auto& r = entry.record;
            rows.push_back({entry.name, std::string(kind_name(entry.kind)),
                            short_token(entry.token), r ? r->meta.host : "?",
                            r ? std::to_string(r->meta.pid) : "?",
                            entry.kind == GcEntry::Kind::orphan
                                ? "-"
                                : format_duration(Milliseconds{entry.dead_for_ms}),
                            r ? r->meta.label : "?"});
        }
        std::cout << render_table(rows);
    }
    std::cout << fmt::format("{} {} dead entr{}", verb, report.removed.size(),
                             report.removed.size() == 1 ? "y" : "ies");
    if (!report.deleted.empty()) {
        std::vector<std::string> names;
        for (const std::string& name : report.deleted) {
            names.push_back(terminal_safe(name));
        }
        std::cout << fmt::format("; {} the keys of {} empty semaphore{}: {}",
                                 dry_run ? "would delete" : "deleted", report.deleted.size(),
                                 report.deleted.size() == 1 ? "" : "s", fmt::join(names, ", "));
    }
    std::cout << "\n";
}

} // namespace

int run_gc(const GcArgs& args, const GlobalOptions& global) {
    for (const auto& name : args.names) {
        check_name(name);
    }
    const std::string prefix = resolve_prefix(global);
    Connection connection(resolve_connection(global));
    const GcReport report = collect_garbage(connection, prefix, args.names, args.dry_run);
    if (args.json) {
        print_report_json(report, args.dry_run);
    } else {
        print_text(report, args.dry_run);
    }
    std::cout.flush();
    for (const auto& failure : report.failed) {
        std::cerr << "redsem: error: gc of '" << printable(failure.name) << "': " << failure.message
                  << "\n";
    }
    warn_unlisted(report.unlisted);
    if (!report.failed.empty()) {
        return static_cast<int>(report.failed.front().code);
    }
    return report.unlisted.empty() ? 0 : static_cast<int>(ExitCode::unavailable);
}

} // namespace redsem::cli

#include "doctor/doctor.hpp"
#include "cli/command_args.hpp"
#include "cli/output.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <cerrno>
#include <fmt/format.h>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

namespace redsem::cli {

namespace {

using nlohmann::json;

json or_null(const std::string& text) {
    return text.empty() ? json(nullptr) : json(text);
}

void print_report_json(const DoctorReport& report, const std::string& prefix) {
    json findings = json::array();
    for (const Finding& finding : report.findings) {
        findings.push_back({{"check", finding.check},
                            {"verdict", verdict_name(finding.verdict)},
                            {"found", finding.found},
                            {"fix", or_null(finding.fix)},
                            {"node", or_null(finding.node)}});
    }
    print_json(json{{"target", report.target},
                    {"prefix", prefix},
                    {"verdict", verdict_name(report.verdict())},
                    {"findings", findings}});
}

// One line per finding: verdict, check, what was found, and the fix.
void print_text(const DoctorReport& report) {
    std::size_t warnings = 0;
    std::size_t unsafe = 0;
    for (const Finding& finding : report.findings) {
        std::string line =
            fmt::format("{:<6}  {:<11}  {}{}", verdict_name(finding.verdict), finding.check,
                        finding.node.empty() ? "" : finding.node + ": ", finding.found);
        if (!finding.fix.empty()) {
            line += fmt::format(". Fix: {}", finding.fix);
        }
        std::cout << line << "\n";
        warnings += finding.verdict == Verdict::warn ? 1 : 0;
        unsafe += finding.verdict == Verdict::unsafe ? 1 : 0;
    }
    std::cout << fmt::format("{}: {} unsafe, {} warning{}\n", report.target, unsafe, warnings,
                             warnings == 1 ? "" : "s");
}

} // namespace

int run_doctor(const DoctorArgs& args, const GlobalOptions& global) {
    DoctorSettings settings{.prefix = resolve_prefix(global),
                            .loss_grace = resolve_loss_grace(std::nullopt),
                            .replicas = resolve_replicas(std::nullopt)};
    Connection connection(resolve_connection(global));
    const DoctorReport report = examine(connection, settings);
    if (args.json) {
        print_report_json(report, settings.prefix);
    } else {
        print_text(report);
    }
    // The report is the result: one that could not be written is an error (74, said by the
    // caller), whatever it found. A reader that went away ends it quietly.
    if (const int error = flush_stdout(); error != 0 && error != EPIPE) {
        return static_cast<int>(ExitCode::output);
    }
    switch (report.reach) {
    case DoctorReport::Reach::unreachable:
        return static_cast<int>(ExitCode::unavailable);
    case DoctorReport::Reach::denied:
        return static_cast<int>(ExitCode::denied);
    case DoctorReport::Reach::reached:
        break;
    }
    switch (report.verdict()) {
    case Verdict::ok:
        return static_cast<int>(ExitCode::ok);
    case Verdict::warn:
        return static_cast<int>(ExitCode::warnings);
    case Verdict::unsafe:
        return static_cast<int>(ExitCode::unsafe);
    }
    return static_cast<int>(ExitCode::internal);
}

} // namespace redsem::cli

#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "semaphore/semaphore.hpp"

namespace redsem::cli {

// How `status` and `limit --json` show whether admission is closed after a possible loss of
// data (see "Lost data" in redsem(1)).

// {"known", "closed", "opens_at_ms", "opens_at", "opens_in_ms", "cause", "lost_at_ms",
// "lost_at", "noticed"}; the times are null while admission is open (lost_at: when no loss
// is recorded), all but "known" null when the server denies INFO.
nlohmann::json admission_json(const AdmissionState& admission);

// One line for a table while admission is closed ("admission closed for 42s more: Redis may
// have lost data (noticed 18s ago: it restarted, or another server took over)"); "" otherwise.
std::string admission_line(const AdmissionState& admission);

// What a pause of `name` is, in one sentence: "'deploy' is paused (by alice on build-7, pid
// 4242, 5m ago): db migration; it ends in 25m" (or "until 'redsem resume deploy'"). `age`:
// since it began; `ends_in`: nullopt until resumed.
std::string pause_text(const std::string& name, const HolderMeta& by, Milliseconds age,
                       std::optional<Milliseconds> ends_in);

// What a loss of data of `cause` (AdmissionState's: a closed event's, a skip's) was, in words;
// a cause this release does not know (a newer one's) as it is.
std::string_view loss_cause_text(std::string_view cause);

// A pause as JSON: {"by": {"user", "host", "pid", "ci"}, "reason", "since_ms", "since",
// "until_ms", "until", "age_ms", "ends_in_ms"}; the until fields null for a pause until
// resumed. null when there is none.
nlohmann::json pause_json(const std::optional<Pause>& pause, long long server_now_ms);

} // namespace redsem::cli

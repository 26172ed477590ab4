#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace redsem {
struct CiJob;
struct UnlistedNode;
} // namespace redsem

namespace redsem::cli {

// Warns on stderr, one line each, of the cluster primaries a listing could not reach.
void warn_unlisted(const std::vector<UnlistedNode>& unlisted);

// Prints `value` on stdout as one line of JSON (--json). Text from Redis that is not valid
// UTF-8 is shown with U+FFFD rather than failing.
void print_json(const nlohmann::json& value);

// A holder's CI job in JSON: {"system", "url", "pipeline", "job"} (empty ones null), or null.
nlohmann::json ci_json(const std::optional<CiJob>& ci);

// Writes out what is buffered for stdout. Returns 0 when everything printed so far reached
// it, else the errno of the failed write (EPIPE: the reader went away).
int flush_stdout();

} // namespace redsem::cli

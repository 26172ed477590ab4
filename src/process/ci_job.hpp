#pragma once

#include <optional>

#include "semaphore/semaphore.hpp"

namespace redsem {

// The CI job this process runs in, from the variables its CI system sets (the table is in
// ci_job.cpp): GitHub Actions, GitLab CI, Jenkins, Buildkite, CircleCI, Azure Pipelines.
// Nothing outside a CI job. Each field is cut to k_max_label_bytes.
std::optional<CiJob> current_ci_job();

} // namespace redsem

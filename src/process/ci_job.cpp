#include "process/ci_job.hpp"

#include <array>
#include <cstdlib>
#include <string>

namespace redsem {

namespace {

std::string variable(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

// A CI system: the variable that says a job runs in it, and how its variables name the job.
struct CiSystem {
    const char* system;
    const char* marker; // set (non-empty) inside a job
    std::string (*url)();
    const char* pipeline; // the variable with the pipeline's (workflow's, project's) name
    const char* job;      // the variable with the job's name
};

// Each system's documented variables.
const std::array<CiSystem, 6> k_systems{{
    {"github", "GITHUB_ACTIONS",
     [] {
         const std::string server = variable("GITHUB_SERVER_URL");
         const std::string repository = variable("GITHUB_REPOSITORY");
         const std::string run = variable("GITHUB_RUN_ID");
         return server.empty() || repository.empty() || run.empty()
                    ? std::string()
                    : server + "/" + repository + "/actions/runs/" + run;
     },
     "GITHUB_WORKFLOW", "GITHUB_JOB"},
    {"gitlab", "GITLAB_CI", [] { return variable("CI_JOB_URL"); }, "CI_PROJECT_PATH",
     "CI_JOB_NAME"},
    {"jenkins", "JENKINS_URL", [] { return variable("BUILD_URL"); }, "JOB_NAME",
     "BUILD_DISPLAY_NAME"},
    {"buildkite", "BUILDKITE",
     [] {
         const std::string build = variable("BUILDKITE_BUILD_URL");
         const std::string job = variable("BUILDKITE_JOB_ID");
         return build.empty() || job.empty() ? build : build + "#" + job;
     },
     "BUILDKITE_PIPELINE_SLUG", "BUILDKITE_LABEL"},
    {"circleci", "CIRCLECI", [] { return variable("CIRCLE_BUILD_URL"); }, "CIRCLE_PROJECT_REPONAME",
     "CIRCLE_JOB"},
    {"azure", "TF_BUILD",
     [] {
         // SYSTEM_COLLECTIONURI ends with '/'; a project name may hold spaces.
         const std::string collection = variable("SYSTEM_COLLECTIONURI");
         std::string project;
         for (const char c : variable("SYSTEM_TEAMPROJECT")) {
             project += c == ' ' ? std::string("%20") : std::string(1, c);
         }
         const std::string build = variable("BUILD_BUILDID");
         return collection.empty() || project.empty() || build.empty()
                    ? std::string()
                    : collection + project + "/_build/results?buildId=" + build;
     },
     "BUILD_DEFINITIONNAME", "SYSTEM_JOBDISPLAYNAME"},
}};

std::string bounded(std::string text) {
    if (text.size() > k_max_label_bytes) {
        text.resize(k_max_label_bytes);
    }
    return text;
}

} // namespace

std::optional<CiJob> current_ci_job() {
    for (const CiSystem& system : k_systems) {
        if (variable(system.marker).empty()) {
            continue;
        }
        return CiJob{.system = system.system,
                     .url = bounded(system.url()),
                     .pipeline = bounded(variable(system.pipeline)),
                     .job = bounded(variable(system.job))};
    }
    return std::nullopt;
}

} // namespace redsem

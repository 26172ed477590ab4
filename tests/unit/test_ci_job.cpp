#include <catch2/catch.hpp>

#include "process/ci_job.hpp"
#include "semaphore/record.hpp"

#include <cstdlib>
#include <map>
#include <string>

using namespace redsem;

namespace {

// Sets `variables` for the scope (after unsetting every CI marker), and restores nothing: the
// unit tests read no other CI variable.
class CiEnvironment {
public:
    explicit CiEnvironment(const std::map<std::string, std::string>& variables) {
        for (const char* marker :
             {"GITHUB_ACTIONS", "GITLAB_CI", "JENKINS_URL", "BUILDKITE", "CIRCLECI", "TF_BUILD"}) {
            unsetenv(marker);
        }
        for (const auto& [name, value] : variables) {
            setenv(name.c_str(), value.c_str(), 1);
            m_names.push_back(name);
        }
    }
    ~CiEnvironment() {
        for (const std::string& name : m_names) {
            unsetenv(name.c_str());
        }
    }

private:
    std::vector<std::string> m_names;
};

} // namespace

TEST_CASE("current_ci_job: each CI system's job, from its documented variables") {
    struct Case {
        std::map<std::string, std::string> env;
        CiJob expected;
    };
    const std::vector<Case> cases{
        {{{"GITHUB_ACTIONS", "true"},
          {"GITHUB_SERVER_URL", "https://github.com"},
          {"GITHUB_REPOSITORY", "acme/app"},
          {"GITHUB_RUN_ID", "1234"},
          {"GITHUB_WORKFLOW", "Deploy"},
          {"GITHUB_JOB", "prod"}},
         {"github", "https://github.com/acme/app/actions/runs/1234", "Deploy", "prod"}},
        {{{"GITLAB_CI", "true"},
          {"CI_JOB_URL", "https://gitlab.com/acme/app/-/jobs/77"},
          {"CI_PROJECT_PATH", "acme/app"},
          {"CI_JOB_NAME", "deploy"}},
         {"gitlab", "https://gitlab.com/acme/app/-/jobs/77", "acme/app", "deploy"}},
        {{{"JENKINS_URL", "https://ci.acme/"},
          {"BUILD_URL", "https://ci.acme/job/app/12/"},
          {"JOB_NAME", "app"},
          {"BUILD_DISPLAY_NAME", "#12"}},
         {"jenkins", "https://ci.acme/job/app/12/", "app", "#12"}},
        {{{"BUILDKITE", "true"},
          {"BUILDKITE_BUILD_URL", "https://buildkite.com/acme/app/builds/5"},
          {"BUILDKITE_JOB_ID", "0189-ab"},
          {"BUILDKITE_PIPELINE_SLUG", "app"},
          {"BUILDKITE_LABEL", ":rocket: deploy"}},
         {"buildkite", "https://buildkite.com/acme/app/builds/5#0189-ab", "app",
          ":rocket: deploy"}},
        {{{"CIRCLECI", "true"},
          {"CIRCLE_BUILD_URL", "https://circleci.com/gh/acme/app/9"},
          {"CIRCLE_PROJECT_REPONAME", "app"},
          {"CIRCLE_JOB", "deploy"}},
         {"circleci", "https://circleci.com/gh/acme/app/9", "app", "deploy"}},
        {{{"TF_BUILD", "True"},
          {"SYSTEM_COLLECTIONURI", "https://dev.azure.com/acme/"},
          {"SYSTEM_TEAMPROJECT", "Web App"},
          {"BUILD_BUILDID", "42"},
          {"BUILD_DEFINITIONNAME", "app-ci"},
          {"SYSTEM_JOBDISPLAYNAME", "Deploy job"}},
         {"azure", "https://dev.azure.com/acme/Web%20App/_build/results?buildId=42", "app-ci",
          "Deploy job"}},
    };
    for (const Case& one : cases) {
        const CiEnvironment env(one.env);
        const auto job = current_ci_job();
        REQUIRE(job);
        INFO(one.expected.system);
        CHECK(job->system == one.expected.system);
        CHECK(job->url == one.expected.url);
        CHECK(job->pipeline == one.expected.pipeline);
        CHECK(job->job == one.expected.job);
    }
    const CiEnvironment none({});
    CHECK_FALSE(current_ci_job());
}

TEST_CASE("current_ci_job: a job without its URL's variables, and fields kept bounded") {
    {
        const CiEnvironment env({{"GITHUB_ACTIONS", "true"}, {"GITHUB_JOB", "build"}});
        const auto job = current_ci_job();
        REQUIRE(job);
        CHECK(job->url.empty());
        HolderMeta meta;
        meta.label = "make";
        meta.ci = job;
        CHECK(label_cell(meta) == "make (github build)");
    }
    const CiEnvironment env({{"GITLAB_CI", "true"},
                             {"CI_JOB_URL", "https://x/" + std::string(5000, 'a')},
                             {"CI_JOB_NAME", std::string(5000, 'b')}});
    const auto job = current_ci_job();
    REQUIRE(job);
    CHECK(job->url.size() == k_max_label_bytes);
    CHECK(job->job.size() == k_max_label_bytes);
}

TEST_CASE("a holder's CI job survives its record, and an old record has none") {
    HolderMeta meta;
    meta.label = "deploy.sh";
    CHECK_FALSE(parse_meta(meta.to_json()).ci);
    meta.ci = CiJob{"gitlab", "https://gitlab.com/a/-/jobs/1", "a", "deploy"};
    const HolderMeta back = parse_meta(meta.to_json());
    REQUIRE(back.ci);
    CHECK(back.ci->url == "https://gitlab.com/a/-/jobs/1");
    CHECK(back.ci->job == "deploy");
    CHECK(label_cell(back) == "deploy.sh https://gitlab.com/a/-/jobs/1");
    // Hand-edited: a ci that is not an object is ignored.
    CHECK_FALSE(parse_meta(R"({"host":"h","ci":"x"})").ci);
}

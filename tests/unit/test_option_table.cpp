#include "cli/option_table.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using redsem::cli::CommandEntry;
using redsem::cli::option_table;
using redsem::cli::OptionEntry;
using redsem::cli::summary_of;
using redsem::cli::ValueKind;

namespace {

const OptionEntry* find_option(const CommandEntry& command, const std::string& name) {
    for (const OptionEntry& option : command.options) {
        if (std::find(option.names.begin(), option.names.end(), name) != option.names.end()) {
            return &option;
        }
    }
    return nullptr;
}

const CommandEntry& find_command(const std::vector<CommandEntry>& table, const std::string& name) {
    const auto command = std::find_if(table.begin(), table.end(),
                                      [&](const CommandEntry& c) { return c.name == name; });
    REQUIRE(command != table.end());
    return *command;
}

} // namespace

TEST_CASE("summary_of: an option's help up to the end of its first clause") {
    CHECK(summary_of("Lease length; renew before it runs out") == "Lease length");
    CHECK(summary_of("How many may hold NAME at once (1-100000). A busy one refuses") ==
          "How many may hold NAME at once");
    CHECK(summary_of("Redis URL: redis://[[user]:password@]host, rediss://... for TLS") ==
          "Redis URL");
    CHECK(summary_of("Print JSON.") == "Print JSON");
    CHECK(summary_of("Show what would be removed; change nothing") == "Show what would be removed");
}

TEST_CASE("summary_of: a leading condition stays with the clause it qualifies") {
    CHECK(summary_of("rediss://: trust the CAs in FILE (default: $REDSEM_CACERT)") ==
          "rediss://: trust the CAs in FILE");
    CHECK(summary_of("With --while-pid: the signal sent to PID (default TERM)") ==
          "With --while-pid: the signal sent to PID");
}

TEST_CASE("option_table: redsem first, then every subcommand, each with its --help") {
    const std::vector<CommandEntry> table = option_table();
    REQUIRE(table.size() == 14);
    CHECK(table.front().name.empty());
    CHECK(table[1].name == "acquire");
    for (const CommandEntry& command : table) {
        const OptionEntry* help = find_option(command, "--help");
        REQUIRE(help != nullptr);
        CHECK(help->ends_parsing);
        for (const OptionEntry& option : command.options) {
            CHECK_FALSE(option.summary.empty());
        }
    }
    CHECK(find_option(table.front(), "--version") != nullptr);
}

TEST_CASE("option_table: each value says how it completes, and hidden options are left out") {
    const std::vector<CommandEntry> table = option_table();
    const CommandEntry& redsem = table.front();
    CHECK(find_option(redsem, "--url")->value.kind == ValueKind::urls);
    CHECK(find_option(redsem, "--url")->names == std::vector<std::string>{"-u", "--url"});
    CHECK(find_option(redsem, "--cacert")->value.kind == ValueKind::files);
    CHECK(find_option(redsem, "--cacertdir")->value.kind == ValueKind::dirs);
    CHECK(find_option(redsem, "--sni")->value.kind == ValueKind::hosts);
    CHECK(find_option(redsem, "--insecure")->value.type.empty());

    const CommandEntry& acquire = find_command(table, "acquire");
    const OptionEntry* on_lost = find_option(acquire, "--on-lost");
    REQUIRE(on_lost != nullptr);
    CHECK(on_lost->value.kind == ValueKind::choices);
    CHECK(std::find(on_lost->value.choices.begin(), on_lost->value.choices.end(), "none") !=
          on_lost->value.choices.end());
    CHECK(find_option(acquire, "--while-pid")->value.kind == ValueKind::pids);
    CHECK(find_option(acquire, "--exclusive")->excludes == std::vector<std::string>{"--slots"});
    CHECK(find_option(acquire, "-x") == nullptr); // flock's mode, refused while parsing
    REQUIRE(acquire.positionals.size() == 1);
    CHECK(acquire.positionals[0].value.kind == ValueKind::names);
    CHECK_FALSE(acquire.positionals[0].repeats);

    const CommandEntry& run = find_command(table, "run");
    CHECK(find_option(run, "--on-lost")->value.choices ==
          std::vector<std::string>{"term", "ignore"});
    REQUIRE(run.positionals.size() == 2);
    CHECK(run.positionals[1].value.kind == ValueKind::command);

    CHECK(find_command(table, "status").positionals.at(0).repeats);
    CHECK(find_option(find_command(table, "status"), "--format")->value.choices ==
          std::vector<std::string>{"table", "json", "prometheus"});
    CHECK(find_option(find_command(table, "release"), "--after-group") == nullptr);
    CHECK(find_command(table, "doctor").positionals.empty());
}

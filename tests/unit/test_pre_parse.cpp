// The pre-parse step (src/cli/pre_parse.hpp): each piece, with the CLI11 2.1 behaviour that it
// works around. The "CLI11 alone" cases pin that behaviour down: when a CLI11 upgrade makes
// one of them fail, CLI11 may do the job itself now, and the piece can go.
#include <catch2/catch.hpp>

#include "cli/commands.hpp"
#include "cli/pre_parse.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace redsem::cli;
using Words = std::vector<std::string>;

namespace {

// The main app as redsem::cli::main() builds it: the global options, and `command` only.
struct Parser {
    CLI::App app{"redsem", "redsem"};
    GlobalOptions global;
    CLI::App* command = nullptr;
    Runner runner; // owns what the command's options write to

    explicit Parser(std::string_view name) {
        app.require_subcommand(1);
        add_global_options(app, global);
        for (const Command& each : commands()) {
            if (each.name == name) {
                command = app.add_subcommand(std::string(each.name));
                command->fallthrough();
                runner = each.setup(*command, global);
            }
        }
        REQUIRE(command != nullptr);
    }

    // What CLI11 gets, in the command line's order.
    Words pre_parsed(Words words) const {
        Words edited = words_for_cli11(app, std::move(words));
        std::reverse(edited.begin(), edited.end());
        return edited;
    }

    void parse(Words words) {
        Words edited = words_for_cli11(app, std::move(words));
        app.parse(edited);
    }

    void parse_without_pre_parse(Words words) {
        std::reverse(words.begin(), words.end());
        app.parse(words);
    }

    template <typename T> T value(const std::string& option) const {
        return command->get_option(option)->as<T>();
    }
};

} // namespace

TEST_CASE("pre-parse: the command is found after the global options and their values") {
    const Parser parser("acquire");
    CHECK(find_command(parser.app, {"acquire", "x"}) == 0);
    CHECK(find_command(parser.app, {"--prefix", "run", "acquire", "x"}) == 2);
    CHECK(find_command(parser.app, {"--prefix=run", "acquire"}) == 1);
    CHECK(find_command(parser.app, {"-u", "redis://h", "--insecure", "acquire"}) == 3);
    CHECK(find_command(parser.app, {"--prefix=", "acquire"}) == 1);
    CHECK(find_command(parser.app, {"--help", "acquire"}) == 1);
    // None: CLI11 reports what comes first.
    CHECK(find_command(parser.app, {}) == 0);
    CHECK(find_command(parser.app, {"--bogus", "acquire"}) == 2);
    CHECK(find_command(parser.app, {"--", "acquire"}) == 2);
    CHECK(find_command(parser.app, {"--prefix"}) == 1);
}

TEST_CASE("CLI11 alone gives run's COMMAND's options to redsem: why COMMAND is marked") {
    Parser parser("run");
    parser.parse_without_pre_parse({"run", "job", "echo", "-n", "3"});
    CHECK(parser.value<Words>("COMMAND") == Words{"echo"});
    CHECK(parser.value<std::string>("--limit") == "3");
}

TEST_CASE("pre-parse: run's COMMAND starts at the first word after NAME that is not redsem's, "
          "and keeps its options (CLI11 took echo -n 3 as --limit 3)") {
    Parser parser("run");
    CHECK(parser.pre_parsed({"run", "job", "echo", "-n", "3"}) ==
          Words{"run", "job", "--", "echo", "-n", "3"});
    CHECK(parser.pre_parsed(
              {"run", "-q", "job", "-n", "2", "--ttl=5s", "-w", "5s", "sh", "-c", "x"}) ==
          Words{"run", "-q", "job", "-n", "2", "--ttl=5s", "-w", "5s", "--", "sh", "-c", "x"});
    CHECK(parser.pre_parsed({"run", "-qn3", "job", "sh"}) ==
          Words{"run", "-qn3", "job", "--", "sh"});
    CHECK(parser.pre_parsed({"run", "-qn", "3", "job", "sh"}) ==
          Words{"run", "-qn", "3", "job", "--", "sh"});
    // An option's value is its value, whatever it looks like.
    CHECK(parser.pre_parsed({"run", "job", "--label", "x", "sh"}) ==
          Words{"run", "job", "--label", "x", "--", "sh"});
    CHECK(parser.pre_parsed({"--prefix", "run", "run", "job", "sh"}) ==
          Words{"--prefix", "run", "run", "job", "--", "sh"});
    // Global options after run are redsem's too.
    CHECK(parser.pre_parsed({"run", "job", "-u", "redis://h", "sh"}) ==
          Words{"run", "job", "-u", "redis://h", "--", "sh"});
    // A NAME like a negative number is NAME, as CLI11 takes it (bfd0f21).
    CHECK(parser.pre_parsed({"run", "-7", "echo", "-n", "hi"}) ==
          Words{"run", "-7", "--", "echo", "-n", "hi"});
    // Left alone: a "--" given, an unknown option (CLI11 reports it), no COMMAND.
    for (const Words& words :
         {Words{"run", "job", "--", "echo", "-n"}, Words{"run", "job", "-Z", "echo"},
          Words{"run", "job", "-n", "3"}, Words{"run", "-c", "true", "job"}}) {
        CHECK(parser.pre_parsed(words) == words);
    }
    parser.parse({"run", "-q", "job", "-n", "2", "echo", "-n", "3", "--", "-q"});
    CHECK(parser.value<Words>("COMMAND") == Words{"echo", "-n", "3", "--", "-q"});
    CHECK(parser.value<std::string>("--limit") == "2");
}

TEST_CASE("CLI11 alone takes the word after an empty --opt= as its value: why it is split") {
    Parser parser("acquire");
    parser.parse_without_pre_parse({"acquire", "e", "--label=", "-w"});
    CHECK(parser.value<std::string>("--label") == "-w");
}

TEST_CASE("pre-parse: an empty --opt= value is that option's value (CLI11 took --label= -w as "
          "the label '-w')") {
    Parser parser("acquire");
    CHECK(parser.pre_parsed({"acquire", "e", "--label=", "-w", "0"}) ==
          Words{"acquire", "e", "--label", "", "-w", "0"});
    // Global options, before and after the command.
    CHECK(parser.pre_parsed({"--url=", "acquire", "e", "--prefix="}) ==
          Words{"--url", "", "acquire", "e", "--prefix", ""});
    // Left alone: a flag, an unknown option, an option's value, the words after "--".
    for (const Words& words :
         {Words{"acquire", "e", "--json="}, Words{"acquire", "e", "--bogus="},
          Words{"acquire", "e", "--label", "--ttl="}, Words{"acquire", "--", "--label="}}) {
        CHECK(parser.pre_parsed(words) == words);
    }
    parser.parse({"acquire", "e", "--label=", "-w", "0"});
    CHECK(parser.value<std::string>("--label").empty());
    CHECK(parser.value<std::string>("--wait") == "0");

    // run's COMMAND keeps its own words.
    Parser run("run");
    CHECK(run.pre_parsed({"run", "e", "--label=", "printf", "%s", "--label="}) ==
          Words{"run", "e", "--label", "", "--", "printf", "%s", "--label="});
}

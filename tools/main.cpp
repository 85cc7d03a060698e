// The `flashjit` command: info, run, compile, cache, bench, autotune. Exit codes: 0 success,
// 1 the work failed, 2 bad usage. Errors go to stderr.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "flashjit/error.hpp"
#include "flashjit/version.hpp"

namespace {

/// "list, verify, prune, clear": the subcommands `app` accepts.
std::string command_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  return names;
}

/// The innermost subcommand the parse reached (`app` itself when none).
const CLI::App& innermost(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands()) return innermost(*command);
  return app;
}

/// Bad usage: the problem on stderr, naming what is accepted; exit code 2.
int usage_error(const std::string& problem, const CLI::App& where) {
  std::fprintf(
      stderr, "flashjit: error: %s\nRun '%s --help' for more information.\n", problem.c_str(),
      where.get_parent() == nullptr ? "flashjit" : ("flashjit " + where.get_name()).c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashjit;
  CLI::App app{"flashjit: run-time specialized attention kernels for NVIDIA GPUs", "flashjit"};
  // At most one command at each level; a missing one is reported below, naming the choices
  // (CLI11's "A subcommand is required" names neither what was typed nor what is accepted).
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", kVersion);
  const std::vector<tools::Subcommand> commands = {
      tools::add_info_command(app),    tools::add_run_command(app),
      tools::add_compile_command(app), tools::add_cache_command(app),
      tools::add_bench_command(app),   tools::add_autotune_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& error) {  // an unknown command or argument
    const CLI::App& where = innermost(app);
    const std::string choices = command_names(where);
    const std::vector<std::string> extras = where.remaining();
    if (choices.empty() || extras.empty()) return usage_error(error.what(), where);
    return usage_error("unknown command '" + extras.front() + "'; the commands are " + choices,
                       where);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);  // prints help, the version, or the usage error
    return code == 0 ? 0 : 2;
  }
  if (app.get_subcommands().empty()) {
    return usage_error("a command is required: " + command_names(app), app);
  }
  try {
    for (const tools::Subcommand& command : commands) {
      if (command.app->parsed()) return command.run();
    }
    return 2;
  } catch (const InvalidArgument& error) {
    std::fprintf(stderr, "flashjit: error: %s\n", error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "flashjit: error: %s\n", error.what());
    return 1;
  }
}

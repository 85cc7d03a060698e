// The `flashjit` command: info, run, compile, cache, bench, autotune. Exit codes: 0 success,
// 1 the work failed, 2 bad usage. Errors go to stderr.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "flashjit/error.hpp"
#include "flashjit/version.hpp"
#include "op_commands.hpp"

namespace {

/// Every subcommand of `app`.
std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(command->get_name());
  }
  return names;
}

/// "list, verify, prune, clear": the subcommands `app` accepts.
std::string command_names(const CLI::App& app) {
  std::string names;
  for (const std::string& name : subcommand_names(app)) names += (names.empty() ? "" : ", ") + name;
  return names;
}

/// The innermost subcommand the parse reached (`app` itself when none).
const CLI::App& innermost(const CLI::App& app) {
  for (const CLI::App* command : app.get_subcommands()) return innermost(*command);
  return app;
}

/// The edit distance (insertions, deletions, substitutions) between `a` and `b`.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// Of `names`, the one nearest `typed`, if it is near enough to be a typo: at most a third of
/// its letters off (a swap of two letters counts two), so `--emualte` finds `--emulate` and
/// `--frobnicate` finds nothing.
std::optional<std::string> nearest(const std::string& typed,
                                   const std::vector<std::string>& names) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, typed.size() / 3) + 1;
  for (const std::string& name : names) {
    const std::size_t distance = edit_distance(typed, name);
    if (distance < best_distance) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

/// Every option of `app`, as typed: "--emulate", "-j".
std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

/// What is wrong with the first argument `where` did not expect: an unknown option, with the
/// nearest one it has, or an unknown command, with the commands it has.
std::string unexpected_argument(const CLI::App& where, const std::string& extra) {
  if (extra.starts_with("-")) {
    const std::string typed = extra.substr(0, extra.find('='));  // --name=value
    const std::optional<std::string> near = nearest(typed, option_names(where));
    return "unknown option '" + typed + "'" + (near ? "; did you mean '" + *near + "'?" : "");
  }
  const std::string choices = command_names(where);
  if (choices.empty()) return "unexpected argument '" + extra + "'";
  const std::optional<std::string> near = nearest(extra, subcommand_names(where));
  return "unknown command '" + extra + "'" + (near ? " (did you mean '" + *near + "'?)" : "") +
         "; the commands are " + choices;
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
  // Whole lines as they are printed, also into a pipe: `flashjit autotune | tee log` shows each
  // result as it comes, not in 4 KB blocks at exit.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"flashjit: run-time specialized attention kernels for NVIDIA GPUs", "flashjit"};
  // At most one command at each level; a missing one is reported below, naming the choices
  // (CLI11's "A subcommand is required" names neither what was typed nor what is accepted).
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", kVersion);
  std::vector<tools::Subcommand> commands = {
      tools::add_info_command(app), tools::add_run_command(app), tools::add_compile_command(app),
      tools::add_cache_command(app)};
  // The ops' own subcommands (attention's bench) before autotune, in the ops' order.
  for (const tools::OpCommands& op : tools::op_commands()) {
    for (const auto& add : op.add_commands) commands.push_back(add(app));
  }
  commands.push_back(tools::add_autotune_command(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ExtrasError& error) {  // an unknown command or argument
    const CLI::App& where = innermost(app);
    const std::vector<std::string> extras = where.remaining();
    if (extras.empty()) return usage_error(error.what(), where);
    return usage_error(unexpected_argument(where, extras.front()), where);
  } catch (const CLI::Success& done) {  // --help, --help-all, --version: printed, exit 0
    return app.exit(done);
  } catch (const CLI::ParseError& error) {  // CLI11's own message names the option
    return usage_error(error.what(), innermost(app));
  } catch (const std::exception& error) {  // from an option's check or callback
    return usage_error(error.what(), innermost(app));
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

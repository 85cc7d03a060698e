#pragma once
// The `flashjit` command's own subcommands (an op may add its own: OpCommands::add_commands,
// attention's `bench`). Each registers its options on the CLI11 app and
// returns the function that runs it; the function returns the process exit code
// (0 success, 1 the work failed; bad usage exits 2 before it runs).
#include <CLI/CLI.hpp>
#include <functional>

namespace flashjit::tools {

/// A registered subcommand and the function that runs it once parsed.
struct Subcommand {
  CLI::App* app;
  std::function<int()> run;
};

Subcommand add_info_command(CLI::App& app);
Subcommand add_compile_command(CLI::App& app);
Subcommand add_cache_command(CLI::App& app);
Subcommand add_run_command(CLI::App& app);
Subcommand add_autotune_command(CLI::App& app);

}  // namespace flashjit::tools

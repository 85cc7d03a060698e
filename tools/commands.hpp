#pragma once
// The `flashjit` command's own subcommands (an op may add its own: OpCommands::add_commands,
// attention's `bench`). Each registers its options on the CLI11 app and
// returns the function that runs it; the function returns the process exit code
// (0 success, 1 the work failed; bad usage exits 2 before it runs).
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "runtime/kernel_spec.hpp"

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

/// The arch to compile for: `requested` (checked) if given, else GPU 0's; throws when neither
/// names one, pointing at --arch.
std::string target_arch(const std::string& requested);

/// Compiles `specs` (for `arch`) into the process's kernel cache, `jobs` at a time, printing a
/// line per kernel as it finishes (resources, then its compile time or "cached") and a summary;
/// returns how many failed, each said on stderr. `compile` and `autotune --warm` share it.
int compile_into_cache(const std::vector<detail::KernelSpec>& specs, const std::string& arch,
                       int jobs);

}  // namespace flashjit::tools

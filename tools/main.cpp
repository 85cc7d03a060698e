// The `flashjit` command: info, run, compile, cache, bench, autotune. Exit codes: 0 success,
// 1 the work failed, 2 bad usage. Errors go to stderr.
#include <cstdio>
#include <vector>

#include "commands.hpp"
#include "flashjit/error.hpp"
#include "flashjit/version.hpp"

int main(int argc, char** argv) {
  using namespace flashjit;
  CLI::App app{"flashjit: run-time specialized attention kernels for NVIDIA GPUs", "flashjit"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion);
  const std::vector<tools::Subcommand> commands = {
      tools::add_info_command(app),    tools::add_run_command(app),
      tools::add_compile_command(app), tools::add_cache_command(app),
      tools::add_bench_command(app),   tools::add_autotune_command(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    int code = app.exit(error);  // prints help, the version, or the usage error
    return code == 0 ? 0 : 2;
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

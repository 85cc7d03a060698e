#pragma once
// Running another program (the host C++ compiler) and collecting what it printed.
#include <string>
#include <vector>

namespace flashjit::detail {

/// How a program ended and what it printed.
struct ProcessResult {
  int exit_code = -1;  ///< the exit status; -1 when it could not start or was killed
  std::string output;  ///< stdout and stderr together, as the program interleaved them
};

/// Runs `argv[0]` (a path; no shell, no PATH search) with `argv`, stdin from /dev/null and
/// this process's environment, and waits for it. A program that cannot be started gives
/// exit_code -1 and says why in `output`.
ProcessResult run_process(const std::vector<std::string>& argv);

}  // namespace flashjit::detail

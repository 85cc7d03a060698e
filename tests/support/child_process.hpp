#pragma once
// Running code in other processes, for tests of what several processes (or another user) see.
#include <functional>
#include <string>
#include <vector>

namespace flashjit::testing {

/// How a child process ended and what it printed.
struct ChildResult {
  int exit_code = -1;  ///< -1 when killed by a signal
  std::string output;  ///< stdout and stderr together, in the order they were read
  std::string out;     ///< stdout alone (run_in_child and run_program)
  std::string err;     ///< stderr alone (run_in_child and run_program)
};

/// Forks; the child runs `body` and exits with its return value (1 if it throws). When
/// `as_nobody` and the test runs as root, the child first switches to user and group 65534 so
/// that file permissions apply to it.
ChildResult run_in_child(const std::function<int()>& body, bool as_nobody = false);

/// Starts `body` in `count` children at once (released together) and waits for all.
std::vector<ChildResult> run_in_children(int count, const std::function<int(int)>& body);

/// Runs a program with arguments (no shell) and extra "NAME=value" environment entries.
ChildResult run_program(const std::vector<std::string>& argv,
                        const std::vector<std::string>& extra_env = {});

}  // namespace flashjit::testing

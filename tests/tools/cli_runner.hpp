#pragma once
// Running the `flashjit` command from tests, with its own cache directory.
#include <sstream>
#include <string>
#include <vector>

#include "support/child_process.hpp"

namespace flashjit::testing {

/// Runs the built `flashjit` with `args` and FLASHJIT_CACHE_DIR=`cache_dir` (plus `env`).
inline ChildResult flashjit_cli(const std::vector<std::string>& args, const std::string& cache_dir,
                                const std::vector<std::string>& env = {}) {
  std::vector<std::string> argv = {FLASHJIT_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> environment = {"FLASHJIT_CACHE_DIR=" + cache_dir};
  environment.insert(environment.end(), env.begin(), env.end());
  return run_program(argv, environment);
}

/// The value of the `name value...` line `name` in `text` (-1 when there is none): a counter
/// `flashjit run --counters` printed.
inline double line_value(const std::string& text, const std::string& name) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string word;
    double value = -1;
    if (words >> word && word == name && words >> value) return value;
  }
  return -1;
}

/// Whether `text` contains `needle`.
inline bool contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

/// How many lines of `text` contain `needle`.
inline std::size_t count_lines_with(const std::string& text, const std::string& needle) {
  std::size_t n = 0, start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    n += text.substr(start, end - start).find(needle) != std::string::npos;
    start = end + 1;
  }
  return n;
}

}  // namespace flashjit::testing

#pragma once
// Diagnostics flashjit prints on its own (cache problems, fallbacks). They go to stderr with a
// "flashjit: warning:" prefix; each distinct topic is printed once per process.
#include <string>

namespace flashjit::detail {

/// Prints `message` to stderr the first time `topic` is warned about in this process.
/// Returns true when it printed.
bool warn_once(const std::string& topic, const std::string& message);

}  // namespace flashjit::detail

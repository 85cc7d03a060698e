#pragma once
// The runtime of the CPU emulator backend for the suites that run kernels on it.
#include "flashjit/runtime.hpp"

namespace flashjit::testing {

/// The emulator's runtime, opened once per test binary and shared by its tests.
inline Runtime& emulator() {
  static Runtime runtime(RuntimeOptions{.backend = Backend::emulator});
  return runtime;
}

}  // namespace flashjit::testing

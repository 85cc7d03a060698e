#pragma once
// Errors raised by flashjit. Every failure is an exception derived from flashjit::Error;
// the C API maps each kind to an error code.
#include <stdexcept>
#include <string>

namespace flashjit {

/// What went wrong, coarse enough for a caller to branch on.
enum class ErrorKind {
  invalid_argument,  ///< a public function got a bad argument; nothing was launched
  no_driver,         ///< libcuda.so.1 could not be loaded
  no_device,         ///< the driver loaded but reports no usable GPU
  driver,            ///< a CUDA driver call failed
  compile,           ///< NVRTC rejected a kernel; the message holds its log
  cache,             ///< the kernel cache cannot serve a request (e.g. FLASHJIT_NO_JIT miss)
  io,                ///< a file could not be read or written
  unsupported,       ///< the runtime's backend cannot do this (e.g. a kernel the emulator lacks)
  kernel_fault,      ///< a launch failed or the emulator caught a bad access, race or barrier
  out_of_memory,     ///< the device (host memory, on the emulator) could not hold an allocation
};

/// Base of every exception flashjit throws.
class Error : public std::runtime_error {
 public:
  /// Makes an error of `kind` with a complete, human-readable `message`.
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  /// The category of the failure.
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/// A public function was called with a bad argument. `argument()` names it.
class InvalidArgument : public Error {
 public:
  /// `argument` is the parameter's name, `problem` what is wrong and what is accepted.
  InvalidArgument(const std::string& argument, const std::string& problem)
      : Error(ErrorKind::invalid_argument, "invalid argument '" + argument + "': " + problem),
        argument_(argument) {}
  /// The name of the offending parameter (e.g. "x.dtype").
  const std::string& argument() const noexcept { return argument_; }

 private:
  std::string argument_;
};

}  // namespace flashjit

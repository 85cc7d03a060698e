#pragma once
// What the C API's core (c_api.cpp) shares with each op's C functions (ops/<op>/<op>_api.cpp):
// the runtime handle, the guard that turns every exception into a status and a per-thread
// message (nothing unwinds through a C caller's frames), and the converters of C tensors and
// enum codes, each naming the argument it refuses.
#include <mutex>
#include <string>
#include <unordered_map>

#include "flashjit/error.hpp"
#include "flashjit/flashjit_c.h"
#include "flashjit/runtime.hpp"
#include "flashjit/tensor.hpp"

// The runtime and the buffers handed out by flashjit_allocate, which C frees by address.
struct flashjit_runtime {
  explicit flashjit_runtime(const flashjit::RuntimeOptions& options) : runtime(options) {}

  flashjit::Runtime runtime;
  std::mutex buffers_mutex;
  // Declared after `runtime`: destroyed first, while the runtime can still free them.
  std::unordered_map<void*, flashjit::DeviceBuffer> buffers;
};

namespace flashjit::c_api {

/// The status of the exception being handled (call it in a catch block), with the thread's
/// message (flashjit_last_error) set to its text.
flashjit_status current_exception_status() noexcept;

/// Runs `body`, mapping whatever it throws to a status (and the thread's message).
template <class Body>
flashjit_status guarded(Body&& body) noexcept {
  try {
    body();
    return FLASHJIT_OK;
  } catch (...) {
    return current_exception_status();
  }
}

/// `pointer`, or InvalidArgument naming `name` when it is NULL.
template <class T>
T* required(T* pointer, const char* name) {
  if (pointer == nullptr) throw InvalidArgument(name, "is NULL");
  return pointer;
}

/// A code of one of the C enums, checked to lie in [0, count).
int checked_code(int code, int count, const std::string& name);

/// A C tensor's view, its dtype and rank checked (named `name`.dtype, `name`.rank).
TensorView to_view(const flashjit_tensor& tensor, const std::string& name);

/// A required tensor argument's view: InvalidArgument naming `name` when it is NULL.
TensorView required_view(const flashjit_tensor* tensor, const char* name);

/// An optional tensor argument's view: empty for a NULL descriptor or NULL data.
TensorView optional_view(const flashjit_tensor* tensor, const std::string& name);

}  // namespace flashjit::c_api

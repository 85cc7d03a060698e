// The C API's core (flashjit_c.h): status names and the per-thread message, the runtime, its
// memory and its streams, and what every op's C functions share (c_api_support.hpp). Each op's
// own C functions sit in its folder (ops/<op>/<op>_api.cpp), built into the facade with these.
#include <iterator>
#include <new>
#include <string>
#include <utility>

#include "api/c_api_support.hpp"
#include "flashjit/version.hpp"
#include "runtime/log.hpp"

namespace {

using flashjit::InvalidArgument;
using flashjit::c_api::checked_code;
using flashjit::c_api::guarded;
using flashjit::c_api::required;

static_assert(FLASHJIT_MAX_RANK == flashjit::TensorView::kMaxRank);

// The message flashjit_last_error() returns. `message` may fail to grow (out of memory), so
// the pointer handed out is kept separately and can fall back to a literal.
thread_local std::string last_message;
thread_local const char* last_error_text = "";

flashjit_status fail(flashjit_status status, const char* message) noexcept {
  try {
    last_message = message;
    last_error_text = last_message.c_str();
  } catch (...) {
    last_error_text = "out of host memory (while recording an error message)";
  }
  return status;
}

// Indexed by flashjit_status, whose values are 0, 1, 2, ... in this order.
constexpr const char* kStatusNames[] = {"FLASHJIT_OK",
                                        "FLASHJIT_ERROR_INVALID_ARGUMENT",
                                        "FLASHJIT_ERROR_NO_DRIVER",
                                        "FLASHJIT_ERROR_NO_DEVICE",
                                        "FLASHJIT_ERROR_DRIVER",
                                        "FLASHJIT_ERROR_COMPILE",
                                        "FLASHJIT_ERROR_CACHE",
                                        "FLASHJIT_ERROR_IO",
                                        "FLASHJIT_ERROR_UNSUPPORTED",
                                        "FLASHJIT_ERROR_KERNEL_FAULT",
                                        "FLASHJIT_ERROR_INTERNAL",
                                        "FLASHJIT_ERROR_OUT_OF_MEMORY"};
static_assert(std::size(kStatusNames) == FLASHJIT_ERROR_OUT_OF_MEMORY + 1);

flashjit_status status_of(flashjit::ErrorKind kind) {
  using flashjit::ErrorKind;
  switch (kind) {
    case ErrorKind::invalid_argument:
      return FLASHJIT_ERROR_INVALID_ARGUMENT;
    case ErrorKind::no_driver:
      return FLASHJIT_ERROR_NO_DRIVER;
    case ErrorKind::no_device:
      return FLASHJIT_ERROR_NO_DEVICE;
    case ErrorKind::driver:
      return FLASHJIT_ERROR_DRIVER;
    case ErrorKind::compile:
      return FLASHJIT_ERROR_COMPILE;
    case ErrorKind::cache:
      return FLASHJIT_ERROR_CACHE;
    case ErrorKind::io:
      return FLASHJIT_ERROR_IO;
    case ErrorKind::unsupported:
      return FLASHJIT_ERROR_UNSUPPORTED;
    case ErrorKind::kernel_fault:
      return FLASHJIT_ERROR_KERNEL_FAULT;
    case ErrorKind::out_of_memory:
      return FLASHJIT_ERROR_OUT_OF_MEMORY;
  }
  return FLASHJIT_ERROR_INTERNAL;
}

flashjit::RuntimeOptions to_options(const flashjit_runtime_options& options) {
  static_assert(FLASHJIT_BACKEND_CUDA == static_cast<int>(flashjit::Backend::cuda) &&
                FLASHJIT_BACKEND_EMULATOR == static_cast<int>(flashjit::Backend::emulator));
  static_assert(FLASHJIT_TUNING_OFF == static_cast<int>(flashjit::TuningPolicy::off) &&
                FLASHJIT_TUNING_CACHED == static_cast<int>(flashjit::TuningPolicy::cached) &&
                FLASHJIT_TUNING_AUTO == static_cast<int>(flashjit::TuningPolicy::automatic));
  flashjit::RuntimeOptions cpp{
      .device = options.device,
      .backend =
          static_cast<flashjit::Backend>(checked_code(options.backend, 2, "options.backend")),
      .tuning =
          static_cast<flashjit::TuningPolicy>(checked_code(options.tuning, 3, "options.tuning"))};
  if (options.emulated_arch != nullptr) cpp.emulated_arch = options.emulated_arch;
  cpp.check_indices = options.check_indices != 0;
  return cpp;
}

}  // namespace

namespace flashjit::c_api {

flashjit_status current_exception_status() noexcept {
  try {
    throw;
  } catch (const flashjit::Error& error) {
    return fail(status_of(error.kind()), error.what());
  } catch (const std::bad_alloc&) {
    return fail(FLASHJIT_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& error) {
    return fail(FLASHJIT_ERROR_INTERNAL, error.what());
  } catch (...) {
    return fail(FLASHJIT_ERROR_INTERNAL, "unknown exception");
  }
}

int checked_code(int code, int count, const std::string& name) {
  if (code < 0 || code >= count) {
    throw InvalidArgument(name, "is " + std::to_string(code) + "; not a valid code (0 to " +
                                    std::to_string(count - 1) + ")");
  }
  return code;
}

TensorView to_view(const flashjit_tensor& tensor, const std::string& name) {
  static_assert(FLASHJIT_DTYPE_F16 == static_cast<int>(flashjit::DType::f16) &&
                FLASHJIT_DTYPE_BF16 == static_cast<int>(flashjit::DType::bf16) &&
                FLASHJIT_DTYPE_F32 == static_cast<int>(flashjit::DType::f32) &&
                FLASHJIT_DTYPE_I32 == static_cast<int>(flashjit::DType::i32) &&
                FLASHJIT_DTYPE_E4M3 == static_cast<int>(flashjit::DType::e4m3));
  TensorView view;
  view.data = tensor.data;
  view.dtype = static_cast<flashjit::DType>(checked_code(tensor.dtype, 5, name + ".dtype"));
  view.rank = checked_code(tensor.rank, FLASHJIT_MAX_RANK + 1, name + ".rank");
  for (int i = 0; i < view.rank; ++i) {
    view.shape[i] = tensor.shape[i];
    view.strides[i] = tensor.strides[i];
  }
  return view;
}

TensorView required_view(const flashjit_tensor* tensor, const char* name) {
  return to_view(*required(tensor, name), name);
}

TensorView optional_view(const flashjit_tensor* tensor, const std::string& name) {
  return tensor == nullptr || tensor->data == nullptr ? TensorView{} : to_view(*tensor, name);
}

}  // namespace flashjit::c_api

extern "C" {

const char* flashjit_status_name(flashjit_status status) {
  // A C caller may pass any int; widened first, as the enum's own type may be unsigned.
  const auto index = static_cast<long long>(status);
  if (index < 0 || index >= std::ssize(kStatusNames)) return "FLASHJIT_UNKNOWN_STATUS";
  return kStatusNames[index];
}

const char* flashjit_last_error(void) { return last_error_text; }

const char* flashjit_version(void) { return flashjit::kVersion; }

void flashjit_keep_messages(int keep) { flashjit::detail::keep_messages(keep != 0); }

int flashjit_take_message(int* kind, const char** text) {
  thread_local std::string taken;  // valid until this thread's next take
  if (kind == nullptr || text == nullptr) return 0;
  flashjit::detail::MessageKind taken_kind{};
  if (!flashjit::detail::take_message(taken_kind, taken)) return 0;
  *kind = taken_kind == flashjit::detail::MessageKind::warning ? FLASHJIT_MESSAGE_WARNING
                                                               : FLASHJIT_MESSAGE_NOTICE;
  *text = taken.c_str();
  return 1;
}

void flashjit_runtime_options_init(flashjit_runtime_options* options) {
  if (options == nullptr) return;
  const flashjit::RuntimeOptions defaults;
  options->device = defaults.device;
  options->backend = static_cast<int>(defaults.backend);
  options->tuning = static_cast<int>(defaults.tuning);
  options->emulated_arch = nullptr;  // the C++ default, "sm_80"
  options->check_indices = defaults.check_indices ? 1 : 0;
}

flashjit_status flashjit_runtime_create(const flashjit_runtime_options* options,
                                        flashjit_runtime** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    flashjit_runtime** result = required(out, "out");
    const flashjit::RuntimeOptions cpp_options =
        options == nullptr ? flashjit::RuntimeOptions{} : to_options(*options);
    *result = new flashjit_runtime(cpp_options);
  });
}

void flashjit_runtime_destroy(flashjit_runtime* runtime) { delete runtime; }

flashjit_status flashjit_allocate(flashjit_runtime* runtime, size_t bytes, void** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    void** result = required(out, "out");
    flashjit::DeviceBuffer buffer = rt.runtime.allocate(bytes);
    void* data = buffer.data();
    const std::lock_guard lock(rt.buffers_mutex);
    rt.buffers.emplace(data, std::move(buffer));
    *result = data;
  });
}

flashjit_status flashjit_free(flashjit_runtime* runtime, void* data) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    if (data == nullptr) return;
    const std::lock_guard lock(rt.buffers_mutex);
    if (rt.buffers.erase(data) == 0) {
      throw InvalidArgument("data", "was not allocated by flashjit_allocate on this runtime");
    }
  });
}

flashjit_status flashjit_copy_to_device(flashjit_runtime* runtime, void* dst, const void* src,
                                        size_t bytes) {
  return guarded([&] {
    required(runtime, "runtime")
        ->runtime.copy_to_device(required(dst, "dst"), required(src, "src"), bytes);
  });
}

flashjit_status flashjit_copy_to_host(flashjit_runtime* runtime, void* dst, const void* src,
                                      size_t bytes) {
  return guarded([&] {
    required(runtime, "runtime")
        ->runtime.copy_to_host(required(dst, "dst"), required(src, "src"), bytes);
  });
}

flashjit_status flashjit_synchronize(flashjit_runtime* runtime, void* stream) {
  return guarded([&] { required(runtime, "runtime")->runtime.synchronize(stream); });
}

}  // extern "C"

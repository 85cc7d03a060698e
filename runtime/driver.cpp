#include "driver.hpp"

#include <dlfcn.h>

#include <exception>
#include <mutex>
#include <string>

#include "flashjit/error.hpp"

namespace flashjit::detail {
namespace {

// Entry points are requested with the 12.0 ABI: every call flashjit makes has had this
// signature since CUDA 12.0, so drivers from 525 on work.
constexpr int kRequestedDriverApi = 12000;

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

void* open_libcuda() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorKind::no_driver,
                std::string("no CUDA driver: cannot load libcuda.so.1 (") +
                    (why ? why : "unknown reason") +
                    "); running kernels needs the NVIDIA driver, compiling with --arch does not");
  }
  return handle;
}

DriverApi load_entry_points(void* handle) {
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    throw Error(ErrorKind::no_driver,
                "the CUDA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2 "
                "(flashjit needs a driver for CUDA 12.0 or newer)");
  }
  DriverApi api;
  auto load = [&](const char* symbol, void** slot) {
    CUdriverProcAddressQueryResult status{};
    if (get_proc(symbol, slot, kRequestedDriverApi, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
            CUDA_SUCCESS ||
        *slot == nullptr) {
      throw Error(ErrorKind::no_driver, std::string("the CUDA driver lacks entry point ") + symbol +
                                            " (flashjit needs CUDA 12.0 or newer)");
    }
  };
#define FLASHJIT_LOAD_ENTRY(name) load(#name, reinterpret_cast<void**>(&api.name));
  FLASHJIT_DRIVER_ENTRY_POINTS(FLASHJIT_LOAD_ENTRY)
#undef FLASHJIT_LOAD_ENTRY
  return api;
}

DriverApi initialize() {
  DriverApi api = load_entry_points(open_libcuda());
  CUresult result = api.cuInit(0);
  if (result == CUDA_ERROR_NO_DEVICE) {
    throw Error(ErrorKind::no_device, "no GPU: the CUDA driver is loaded but reports no device");
  }
  if (result != CUDA_SUCCESS) {
    const char* name = nullptr;
    api.cuGetErrorName(result, &name);
    throw Error(ErrorKind::no_device, std::string("no usable GPU: cuInit failed with ") +
                                          (name ? name : std::to_string(result)));
  }
  return api;
}

}  // namespace

const DriverApi& driver() {
  // Loading is attempted once; a failure is remembered so every later call reports it
  // without touching the system again.
  static std::once_flag once;
  static DriverApi api;
  static std::exception_ptr failure;
  std::call_once(once, [] {
    try {
      api = initialize();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (failure) std::rethrow_exception(failure);
  return api;
}

void check(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return;
  const DriverApi& api = driver();
  const char* name = nullptr;
  const char* text = nullptr;
  api.cuGetErrorName(result, &name);
  api.cuGetErrorString(result, &text);
  const ErrorKind kind =
      result == CUDA_ERROR_OUT_OF_MEMORY ? ErrorKind::out_of_memory : ErrorKind::driver;
  throw Error(kind, std::string(call) + " failed: " + (name ? name : std::to_string(result)) +
                        (text ? std::string(" (") + text + ")" : std::string()));
}

}  // namespace flashjit::detail

#pragma once
// The CUDA driver API, loaded at run time. flashjit never links libcuda: libcuda.so.1 is
// dlopen'ed on first use and each entry point comes from cuGetProcAddress, so the library and
// the `flashjit` command build and run (compile, cache, info) on machines with no driver.
#include <cuda.h>

namespace flashjit::detail {

// Every driver entry point flashjit calls. cuda.h renames some (cuMemAlloc -> cuMemAlloc_v2);
// stringizing `name` keeps the base name that cuGetProcAddress expects while decltype and the
// member pick up the versioned declaration.
#define FLASHJIT_DRIVER_ENTRY_POINTS(X)                                                           \
  X(cuInit)                                                                                       \
  X(cuDriverGetVersion)                                                                           \
  X(cuGetErrorName)                                                                               \
  X(cuGetErrorString)                                                                             \
  X(cuDeviceGetCount)                                                                             \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                   \
      X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent)                 \
          X(cuCtxSynchronize) X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel)       \
              X(cuKernelGetFunction) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
                  X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuOccupancyMaxActiveClusters)     \
                      X(cuLaunchKernelEx) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD)              \
                          X(cuMemcpyDtoH) X(cuMemsetD8) X(cuStreamSynchronize) X(cuEventCreate)   \
                              X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)        \
                                  X(cuEventDestroy) X(cuMemsetD8Async) X(cuMemFreeAsync)          \
                                      X(cuMemPoolCreate) X(cuMemPoolDestroy)                      \
                                          X(cuMemPoolSetAttribute) X(cuMemAllocFromPoolAsync)     \
                                              X(cuTensorMapEncodeTiled)

/// Function pointers to the driver API, all non-null once loaded.
struct DriverApi {
#define FLASHJIT_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  FLASHJIT_DRIVER_ENTRY_POINTS(FLASHJIT_DECLARE_ENTRY)
#undef FLASHJIT_DECLARE_ENTRY
};

/// The loaded and initialized (cuInit) driver. The first call loads it; later calls return
/// the same table. Throws Error{no_driver} when libcuda.so.1 is missing or too old, and
/// Error{no_device} when cuInit finds no GPU; the same error is thrown again on every call.
const DriverApi& driver();

/// Throws Error{driver} naming `call` and the driver's error name and text unless `result`
/// is CUDA_SUCCESS.
void check(CUresult result, const char* call);

/// Calls a driver entry point and checks its result, naming the call in any error:
/// FLASHJIT_CU(cuMemAlloc, &ptr, bytes).
#define FLASHJIT_CU(name, ...) \
  ::flashjit::detail::check(::flashjit::detail::driver().name(__VA_ARGS__), #name)

}  // namespace flashjit::detail

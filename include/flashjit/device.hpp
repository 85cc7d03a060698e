#pragma once
// Where kernels run: the backends, streams, and what flashjit knows about a GPU and the driver
// on this machine.
#include <cstddef>
#include <string>
#include <vector>

namespace flashjit {

/// A CUDA stream (CUstream) passed through opaquely; nullptr is the default stream.
using Stream = void*;

/// Where a Runtime runs its kernels.
enum class Backend {
  cuda,  ///< a CUDA GPU: tensors are device memory
  /// The CPU SIMT emulator running the same templates, with out-of-bounds, race and barrier
  /// checks: tensors are host memory, launches are synchronous and slow (small shapes). The
  /// specializations built into flashjit run at once; any other is compiled by the host C++
  /// compiler on first use (FLASHJIT_HOST_CXX, else c++ on PATH) and cached. Needs no driver
  /// or GPU; device() describes the modelled GPU (sm_80).
  emulator,
};

/// Properties of one GPU that kernel selection depends on.
struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::size_t shared_memory_optin = 0;  ///< largest dynamic shared memory a block may opt into
  std::size_t l2_bytes = 0;
  std::size_t global_memory_bytes = 0;

  /// The NVRTC target for this device: "sm_80", "sm_90a" (architecture-specific features
  /// such as wgmma are enabled from compute capability 9.0 on).
  std::string arch() const;
};

/// The driver and the GPUs it sees, or why there are none.
struct SystemInfo {
  bool driver_loaded = false;
  int driver_version = 0;  ///< e.g. 13000 for CUDA 13.0; 0 when no driver
  std::vector<DeviceInfo> devices;
  std::string unavailable_reason;  ///< set when there is no driver or no GPU
};

/// Probes the driver and every device. Never throws for a missing driver or GPU: the reason
/// is returned in `unavailable_reason`.
SystemInfo query_system();

/// Properties of device `ordinal`. Throws Error{no_driver|no_device} when there is no
/// driver or GPU, InvalidArgument("device") when the ordinal is out of range.
DeviceInfo query_device(int ordinal);

}  // namespace flashjit

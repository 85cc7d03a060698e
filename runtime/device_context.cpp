#include "device_context.hpp"

#include "driver.hpp"
#include "flashjit/error.hpp"

namespace flashjit::detail {

bool overlaps_previous_launch(const LaunchShape& shape, int cc_major, int driver_version) {
  // CUDA 12.3 is the first whose stream capture turns the overlap into a graph edge.
  constexpr int kFirstDriver = 12030;
  return shape.overlap_previous && cc_major >= 9 && driver_version >= kFirstDriver;
}

DeviceContext::DeviceContext(int ordinal) : info_(query_device(ordinal)) {
  FLASHJIT_CU(cuDriverGetVersion, &driver_version_);
  FLASHJIT_CU(cuDeviceGet, &device_, ordinal);
  FLASHJIT_CU(cuDevicePrimaryCtxRetain, &context_, device_);
  make_current();
}

DeviceContext::~DeviceContext() {
  const DriverApi& api = driver();
  for (auto& [key, kernel] : loaded_) {
    if (kernel.library) api.cuLibraryUnload(kernel.library);
    if (kernel.module) api.cuModuleUnload(kernel.module);
  }
  api.cuDevicePrimaryCtxRelease(device_);
}

void DeviceContext::make_current() const { FLASHJIT_CU(cuCtxSetCurrent, context_); }

DeviceContext::LoadedKernel DeviceContext::load(const CacheEntry& entry) const {
  const DriverApi& api = driver();
  const char* name = entry.kernel.lowered_name.c_str();
  LoadedKernel kernel;
  // cuLibraryLoadData is context-independent; an old driver that rejects it gets a module.
  if (api.cuLibraryLoadData(&kernel.library, entry.kernel.cubin.data(), nullptr, nullptr, 0,
                            nullptr, nullptr, 0) == CUDA_SUCCESS) {
    CUkernel handle = nullptr;
    FLASHJIT_CU(cuLibraryGetKernel, &handle, kernel.library, name);
    FLASHJIT_CU(cuKernelGetFunction, &kernel.function, handle);
  } else {
    kernel.library = nullptr;
    FLASHJIT_CU(cuModuleLoadData, &kernel.module, entry.kernel.cubin.data());
    FLASHJIT_CU(cuModuleGetFunction, &kernel.function, kernel.module, name);
  }
  return kernel;
}

CUfunction DeviceContext::function(const KernelSpec& spec, std::size_t dynamic_shared_bytes) {
  if (dynamic_shared_bytes > info_.shared_memory_optin) {
    throw InvalidArgument("dynamic_shared_bytes", spec.display_name() + " asks for " +
                                                      std::to_string(dynamic_shared_bytes) +
                                                      " bytes; " + info_.name + " allows at most " +
                                                      std::to_string(info_.shared_memory_optin));
  }
  LoadedKernel* kernel = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (auto known = by_spec_.find(spec); known != by_spec_.end()) kernel = known->second;
    if (kernel && dynamic_shared_bytes <= kernel->dynamic_shared_limit) return kernel->function;
  }
  if (kernel == nullptr) kernel = &load_or_find(spec);
  return with_shared_limit(*kernel, dynamic_shared_bytes);
}

bool DeviceContext::has_loaded(const KernelSpec& spec) {
  std::lock_guard lock(mutex_);
  return by_spec_.find(spec) != by_spec_.end();
}

DeviceContext::LoadedKernel& DeviceContext::load_or_find(const KernelSpec& spec) {
  CacheLookup lookup = KernelCache::process_cache().get(spec);
  make_current();
  std::lock_guard lock(mutex_);
  auto [it, inserted] = loaded_.try_emplace(lookup.entry->key);
  if (inserted) {
    try {
      it->second = load(*lookup.entry);
    } catch (...) {
      loaded_.erase(it);
      throw;
    }
  }
  by_spec_.try_emplace(spec, &it->second);
  return it->second;
}

CUfunction DeviceContext::with_shared_limit(LoadedKernel& kernel,
                                            std::size_t dynamic_shared_bytes) {
  make_current();
  std::lock_guard lock(mutex_);
  if (dynamic_shared_bytes > kernel.dynamic_shared_limit) {
    FLASHJIT_CU(cuFuncSetAttribute, kernel.function,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                static_cast<int>(dynamic_shared_bytes));
    kernel.dynamic_shared_limit = dynamic_shared_bytes;
  }
  return kernel.function;
}

void DeviceContext::launch(CUfunction function, const LaunchShape& shape, void** args) {
  make_current();
  // cuLaunchKernelEx with no attribute is cuLaunchKernel; the overlap is its one attribute.
  CUlaunchAttribute overlap{};
  overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig config{};
  config.gridDimX = shape.grid_x;
  config.gridDimY = shape.grid_y;
  config.gridDimZ = shape.grid_z;
  config.blockDimX = shape.block_x;
  config.blockDimY = shape.block_y;
  config.blockDimZ = shape.block_z;
  config.sharedMemBytes = static_cast<unsigned>(shape.dynamic_shared_bytes);
  config.hStream = shape.stream;
  config.attrs = &overlap;
  config.numAttrs = overlaps_previous_launch(shape, info_.cc_major, driver_version_) ? 1 : 0;
  FLASHJIT_CU(cuLaunchKernelEx, &config, function, args, nullptr);
}

int DeviceContext::resident_clusters(const KernelSpec& spec, const LaunchShape& shape) {
  const CUfunction kernel = function(spec, shape.dynamic_shared_bytes);
  const unsigned threads = shape.block_x * shape.block_y * shape.block_z;
  const auto key = std::make_tuple(kernel, threads, shape.dynamic_shared_bytes);
  {
    std::lock_guard lock(mutex_);
    if (auto known = resident_clusters_.find(key); known != resident_clusters_.end()) {
      return known->second;
    }
  }
  make_current();
  // The cluster's size is the kernel's own (__cluster_dims__), so the config leaves it out; the
  // grid is one cluster, which the query needs only to be a multiple of it.
  CUlaunchConfig config{};
  config.gridDimX = shape.cluster_x;
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = shape.block_x;
  config.blockDimY = shape.block_y;
  config.blockDimZ = shape.block_z;
  config.sharedMemBytes = static_cast<unsigned>(shape.dynamic_shared_bytes);
  config.hStream = shape.stream;
  int clusters = 0;
  // A query the driver refuses costs the grid its bound, not the call: 0, "cannot say".
  if (driver().cuOccupancyMaxActiveClusters(&clusters, kernel, &config) != CUDA_SUCCESS) {
    clusters = 0;
  }
  std::lock_guard lock(mutex_);
  resident_clusters_.emplace(key, clusters);
  return clusters;
}

}  // namespace flashjit::detail

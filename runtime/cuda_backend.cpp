// The cuda backend: device memory and launches through the driver, on one device's primary
// context.
#include "device_context.hpp"
#include "driver.hpp"
#include "kernel_cache.hpp"
#include "runtime_backend.hpp"
#include "tensor_maps.hpp"

namespace flashjit::detail {
namespace {

CUtensorMapSwizzle driver_swizzle(emulator::TmaSwizzle swizzle) {
  switch (swizzle) {
    case emulator::TmaSwizzle::b32:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case emulator::TmaSwizzle::b64:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case emulator::TmaSwizzle::b128:
      return CU_TENSOR_MAP_SWIZZLE_128B;
    case emulator::TmaSwizzle::none:
      break;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

// TMA moves bits: an unsigned type of the element's size serves every dtype, and its zero
// fill is +0 in each.
CUtensorMapDataType driver_data_type(int element_bytes) {
  switch (element_bytes) {
    case 1:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case 4:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case 8:
      return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    default:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
  }
}

// The CUtensorMap of `map`, checked first against the same rules the emulator applies.
CUtensorMap encode_tensor_map(const emulator::TensorMap& map) {
  check_tensor_map(map, "tensor map");
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], element_strides[5];
  for (int i = 0; i < map.rank; ++i) {
    const auto d = static_cast<std::size_t>(i);
    dims[d] = map.dims[d];
    box[d] = map.box[d];
    element_strides[d] = map.element_strides[d];
    if (i > 0) strides[d - 1] = map.strides[d];  // the driver omits dimension 0's stride
  }
  CUtensorMap encoded{};
  // L2 promotion of 128 bytes: a fetch-size hint, not yet measured against the others.
  FLASHJIT_CU(cuTensorMapEncodeTiled, &encoded, driver_data_type(map.element_bytes),
              static_cast<cuuint32_t>(map.rank), const_cast<void*>(map.global_address), dims,
              strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
              driver_swizzle(map.swizzle), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return encoded;
}

class CudaBackend final : public RuntimeBackend, public Executor {
 public:
  explicit CudaBackend(int ordinal) : context_(ordinal), pool_(create_memory_pool()) {}
  ~CudaBackend() override {
    release_held_buffers();
    // Returns the pool's memory once the frees still queued on streams have run.
    if (pool_ != nullptr) driver().cuMemPoolDestroy(pool_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Backend kind() const override { return Backend::cuda; }
  const DeviceInfo& info() const override { return context_.info(); }

  void* allocate(std::size_t bytes) override {
    context_.make_current();
    CUdeviceptr pointer = 0;
    FLASHJIT_CU(cuMemAlloc, &pointer, bytes == 0 ? 1 : bytes);
    return reinterpret_cast<void*>(pointer);
  }

  void free(void* data) noexcept override {
    try {
      context_.make_current();
      driver().cuMemFree(reinterpret_cast<CUdeviceptr>(data));
    } catch (...) {
      // Called from destructors, which cannot report; the context is being torn down anyway.
    }
  }

  void* allocate_on_stream(std::size_t bytes, Stream stream) override {
    if (pool_ == nullptr) return allocate(bytes);
    context_.make_current();
    CUdeviceptr pointer = 0;
    FLASHJIT_CU(cuMemAllocFromPoolAsync, &pointer, bytes == 0 ? 1 : bytes, pool_,
                static_cast<CUstream>(stream));
    return reinterpret_cast<void*>(pointer);
  }

  void free_on_stream(void* data, Stream stream) noexcept override {
    try {
      context_.make_current();
      if (pool_ != nullptr) {
        driver().cuMemFreeAsync(reinterpret_cast<CUdeviceptr>(data), static_cast<CUstream>(stream));
        return;
      }
      // Without pools the memory may still be in use by queued work: wait, then free.
      driver().cuStreamSynchronize(static_cast<CUstream>(stream));
      driver().cuMemFree(reinterpret_cast<CUdeviceptr>(data));
    } catch (...) {
      // As free(): destructors cannot report.
    }
  }

  void copy_to_device(void* dst, const void* src, std::size_t bytes) override {
    context_.make_current();
    FLASHJIT_CU(cuMemcpyHtoD, reinterpret_cast<CUdeviceptr>(dst), src, bytes);
  }

  void copy_to_host(void* dst, const void* src, std::size_t bytes) override {
    context_.make_current();
    FLASHJIT_CU(cuMemcpyDtoH, dst, reinterpret_cast<CUdeviceptr>(src), bytes);
  }

  void synchronize(Stream stream) override {
    context_.make_current();
    FLASHJIT_CU(cuStreamSynchronize, static_cast<CUstream>(stream));
  }

  Executor& executor() override { return *this; }
  DeviceContext* context() override { return &context_; }

  // The GPU does not check accesses, so the buffers are not needed.
  void launch(const KernelSpec& spec, const LaunchShape& shape, void** args,
              const std::vector<KernelBuffer>& /*buffers*/) override {
    context_.launch(context_.function(spec, shape.dynamic_shared_bytes), shape, args);
  }
  bool has_kernel(const KernelSpec& /*spec*/) const override { return true; }  // JIT compiles any
  int resident_clusters(const KernelSpec& spec, const LaunchShape& shape) override {
    return context_.resident_clusters(spec, shape);
  }
  // The specs not loaded here yet are read from the disk cache on this thread, and the ones it
  // lacks compiled into the process cache concurrently; each launch then loads its kernel from
  // memory. A call whose kernels are cached spawns nothing.
  void prepare(const std::vector<KernelSpec>& specs) override {
    prepare_missing(
        specs, [this](const KernelSpec& spec) { return context_.has_loaded(spec); },
        [](const KernelSpec& spec) { return KernelCache::process_cache().find(spec).has_value(); },
        [](const KernelSpec& spec) { KernelCache::process_cache().get(spec); });
  }

  TensorMapParameter tensor_maps(const std::vector<emulator::TensorMap>& maps) override {
    context_.make_current();
    TensorMapParameter parameter;
    for (const emulator::TensorMap& map : maps) {
      const CUtensorMap encoded = encode_tensor_map(map);
      parameter.append(&encoded, sizeof encoded);
    }
    return parameter;
  }

 private:
  bool supports_memory_pools() const {
    context_.make_current();
    CUdevice device = 0;
    FLASHJIT_CU(cuDeviceGet, &device, context_.info().ordinal);
    int supported = 0;
    FLASHJIT_CU(cuDeviceGetAttribute, &supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                device);
    return supported != 0;
  }

  /// The pool of the calls' stream-ordered scratch (a backward's dQ accumulator and D, a layer
  /// norm's partial sums), null where the device has no memory pools. It is this runtime's own
  /// and keeps what it has grown to (release threshold: unlimited): the device's default pool
  /// returns its free memory to the system at every synchronization, so a call after one would
  /// map its scratch again, host work the GPU waits for. A driver that cannot make one leaves
  /// the scratch to plain allocations (null), as a device without pools does.
  CUmemoryPool create_memory_pool() const {
    if (!supports_memory_pools()) return nullptr;
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = context_.info().ordinal;
    CUmemoryPool pool = nullptr;
    if (driver().cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS) return nullptr;
    cuuint64_t keep_all = ~cuuint64_t{0};
    if (driver().cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all) !=
        CUDA_SUCCESS) {
      driver().cuMemPoolDestroy(pool);
      return nullptr;
    }
    return pool;
  }

  DeviceContext context_;
  CUmemoryPool pool_;
};

}  // namespace

std::unique_ptr<RuntimeBackend> open_cuda_backend(int ordinal) {
  return std::make_unique<CudaBackend>(ordinal);
}

}  // namespace flashjit::detail

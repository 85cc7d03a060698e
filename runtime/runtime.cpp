#include "flashjit/runtime.hpp"

#include <utility>

#include "autotune/tuning_state.hpp"
#include "flashjit/error.hpp"
#include "runtime_backend.hpp"

namespace flashjit {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : backend_(std::exchange(other.backend_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      stream_(std::exchange(other.stream_, nullptr)),
      stream_ordered_(std::exchange(other.stream_ordered_, false)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = std::exchange(other.backend_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    stream_ = std::exchange(other.stream_, nullptr);
    stream_ordered_ = std::exchange(other.stream_ordered_, false);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (data_ == nullptr) return;
  backend_->allocations.remove(data_);
  if (stream_ordered_) {
    backend_->free_on_stream(data_, stream_);
  } else {
    backend_->free(data_);
  }
  data_ = nullptr;
}

Runtime::Runtime(const RuntimeOptions& options)
    : backend_(options.backend == Backend::emulator ? detail::open_emulator_backend()
                                                    : detail::open_cuda_backend(options.device)),
      tuning_(std::make_unique<autotune::TuningState>(autotune::effective_policy(options.tuning),
                                                      backend_->info(), backend_->kind())) {}
Runtime::~Runtime() = default;
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;

const DeviceInfo& Runtime::device() const { return backend_->info(); }
Backend Runtime::backend() const { return backend_->kind(); }
TuningPolicy Runtime::tuning_policy() const { return tuning_->policy(); }
autotune::TuningState& Runtime::tuning() { return *tuning_; }
detail::Executor& Runtime::executor() { return backend_->executor(); }

detail::DeviceContext& Runtime::context() {
  detail::DeviceContext* context = backend_->context();
  if (context == nullptr) {
    throw Error(ErrorKind::unsupported,
                "Runtime::context(): this runtime runs on the emulator backend, which has no "
                "CUDA context; launch through Runtime::executor() instead");
  }
  return *context;
}

DeviceBuffer Runtime::allocate(std::size_t bytes) {
  DeviceBuffer buffer(backend_.get(), backend_->allocate(bytes), bytes);
  backend_->allocations.add(buffer.data(), bytes);
  return buffer;
}

DeviceBuffer Runtime::allocate_on_stream(std::size_t bytes, Stream stream) {
  DeviceBuffer buffer(backend_.get(), backend_->allocate_on_stream(bytes, stream), bytes, stream);
  backend_->allocations.add(buffer.data(), bytes);
  return buffer;
}

void Runtime::copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  backend_->allocations.check_range(device_dst, bytes, "bytes");
  backend_->copy_to_device(device_dst, host_src, bytes);
}

void Runtime::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  backend_->allocations.check_range(device_src, bytes, "bytes");
  backend_->copy_to_host(host_dst, device_src, bytes);
}

void Runtime::synchronize(Stream stream) { backend_->synchronize(stream); }

namespace {

std::vector<KernelWork>& counted_work(detail::RuntimeBackend& backend) {
  std::vector<KernelWork>* work = backend.counted_work();
  if (work == nullptr) {
    throw Error(ErrorKind::unsupported,
                "work counters come from the emulator backend; this runtime runs on a GPU, "
                "which is timed instead (flashjit bench)");
  }
  return *work;
}

}  // namespace

std::vector<KernelWork> Runtime::emulated_work() const { return counted_work(*backend_); }

void Runtime::reset_emulated_work() { counted_work(*backend_).clear(); }

WorkCounters& WorkCounters::operator+=(const WorkCounters& other) {
  tensor_flops += other.tensor_flops;
  shared_bytes_read += other.shared_bytes_read;
  shared_bytes_written += other.shared_bytes_written;
  global_bytes_read += other.global_bytes_read;
  global_bytes_written += other.global_bytes_written;
  barriers += other.barriers;
  ctas += other.ctas;
  return *this;
}

WorkCounters total_work(const std::vector<KernelWork>& kernels) {
  WorkCounters total;
  for (const KernelWork& kernel : kernels) total += kernel.work;
  return total;
}

}  // namespace flashjit

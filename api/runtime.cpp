// The public Runtime: a backend (runtime/) and its tuning state (autotune/), its memory and its
// streams. Each op's calls (Runtime::forward, Runtime::layer_norm, ...) are defined in the op's
// folder (ops/<op>/<op>_api.cpp), where they reach these parts through RuntimeParts and ask the
// tuning state for each call's config.
#include "flashjit/runtime.hpp"

#include <memory>

#include "api/runtime_parts.hpp"
#include "autotune/tuning_state.hpp"
#include "common/builtin_kernels.hpp"
#include "flashjit/error.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit {

struct Runtime::Impl {
  std::unique_ptr<detail::RuntimeBackend> backend;
  autotune::TuningState tuning;  // after backend, which it refers to
  bool check_indices;

  explicit Impl(const RuntimeOptions& options)
      : backend(options.backend == Backend::emulator
                    ? detail::open_emulator_backend(kernels::emulated::builtin_kernels(),
                                                    options.emulated_arch, options.model_memory)
                    : detail::open_cuda_backend(options.device)),
        tuning(autotune::effective_policy(options.tuning), *backend),
        check_indices(options.check_indices) {}
};

Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Runtime::~Runtime() = default;
Runtime::Runtime(Runtime&&) noexcept = default;
Runtime& Runtime::operator=(Runtime&&) noexcept = default;

const DeviceInfo& Runtime::device() const { return impl_->backend->info(); }
Backend Runtime::backend() const { return impl_->backend->kind(); }
TuningPolicy Runtime::tuning_policy() const { return impl_->tuning.policy(); }

DeviceBuffer Runtime::allocate(std::size_t bytes) { return impl_->backend->allocate_buffer(bytes); }

DeviceBuffer Runtime::allocate_on_stream(std::size_t bytes, Stream stream) {
  return impl_->backend->allocate_buffer_on_stream(bytes, stream);
}

void Runtime::copy_to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  impl_->backend->allocations.check_range(device_dst, bytes, "bytes");
  impl_->backend->copy_to_device(device_dst, host_src, bytes);
}

void Runtime::copy_to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  impl_->backend->allocations.check_range(device_src, bytes, "bytes");
  impl_->backend->copy_to_host(host_dst, device_src, bytes);
}

void Runtime::synchronize(Stream stream) { impl_->backend->synchronize(stream); }

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

std::vector<KernelWork> Runtime::emulated_work() const { return counted_work(*impl_->backend); }

void Runtime::reset_emulated_work() { counted_work(*impl_->backend).clear(); }

namespace detail {

RuntimeBackend& RuntimeParts::backend(Runtime& runtime) { return *runtime.impl_->backend; }

autotune::TuningState& RuntimeParts::tuning(Runtime& runtime) { return runtime.impl_->tuning; }

bool RuntimeParts::check_indices(const Runtime& runtime) { return runtime.impl_->check_indices; }

}  // namespace detail
}  // namespace flashjit

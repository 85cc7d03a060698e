// The public Runtime: a backend (runtime/) and its tuning state (autotune/), wired to the ops
// (ops/), which ask the tuning state for each call's config.
#include "flashjit/runtime.hpp"

#include <memory>

#include "api/runtime_parts.hpp"
#include "attention/attention_calls.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/modifiers/block_mask.hpp"
#include "autotune/tuning_state.hpp"
#include "common/builtin_kernels.hpp"
#include "flashjit/error.hpp"
#include "layer_norm/layer_norm.hpp"
#include "merge_states/merge_states.hpp"
#include "multiscale/multiscale_attention.hpp"
#include "runtime/runtime_backend.hpp"
#include "softmax/softmax.hpp"

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

void Runtime::softmax(const TensorView& x, const TensorView& y, float scale, Stream stream) {
  kernels::run_softmax(*impl_->backend, x, y, scale, stream);
}

void Runtime::merge_states(const TensorView& partial_o, const TensorView& partial_lse,
                           const TensorView& o, const TensorView& lse, Stream stream) {
  kernels::run_merge_states(*impl_->backend, partial_o, partial_lse, o, lse, stream);
}

void Runtime::merge_state_in_place(const TensorView& o_a, const TensorView& lse_a,
                                   const TensorView& o_b, const TensorView& lse_b, Stream stream) {
  kernels::run_merge_state_pair(*impl_->backend, o_a, lse_a, o_b, lse_b, stream);
}

void Runtime::layer_norm(const LayerNorm& options, const TensorView& x, const TensorView& gamma,
                         const TensorView& beta, const TensorView& y, const TensorView& mean,
                         const TensorView& rstd, Stream stream) {
  kernels::run_layer_norm(*impl_->backend, impl_->tuning, options, x, gamma, beta, y, mean, rstd,
                          stream);
}

void Runtime::layer_norm_backward(const LayerNorm& options, const TensorView& x,
                                  const TensorView& gamma, const TensorView& mean,
                                  const TensorView& rstd, const TensorView& dy,
                                  const TensorView& dx, const TensorView& dgamma,
                                  const TensorView& dbeta, const TensorView& dbias, Stream stream) {
  kernels::run_layer_norm_backward(*impl_->backend, impl_->tuning, options, x, gamma, mean, rstd,
                                   dy, dx, dgamma, dbeta, dbias, stream);
}

void Runtime::forward(const Attention& attention, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& o, const TensorView& lse,
                      Stream stream) {
  kernels::run_attention_forward(*impl_->backend, impl_->tuning, attention, q, k, v, o, lse,
                                 stream);
}

void Runtime::build_block_mask(const Attention& attention, const TensorView& block_mask,
                               Stream stream) {
  kernels::run_build_block_mask(*impl_->backend, attention, block_mask, stream);
}

void Runtime::forward(const Attention& attention, const Sequences& sequences, const TensorView& q,
                      const TensorView& k, const TensorView& v, const TensorView& o,
                      const TensorView& lse, Stream stream) {
  kernels::run_attention_forward_sequences(*impl_->backend, impl_->tuning, attention, sequences, q,
                                           k, v, o, lse, impl_->check_indices, stream);
}

void Runtime::backward(const Attention& attention, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& o, const TensorView& lse,
                       const TensorView& dout, const TensorView& dq, const TensorView& dk,
                       const TensorView& dv, Stream stream) {
  kernels::run_attention_backward(*impl_->backend, impl_->tuning, attention, q, k, v, o, lse, dout,
                                  dq, dk, dv, stream);
}

void Runtime::backward(const Attention& attention, const Sequences& sequences, const TensorView& q,
                       const TensorView& k, const TensorView& v, const TensorView& o,
                       const TensorView& lse, const TensorView& dout, const TensorView& dq,
                       const TensorView& dk, const TensorView& dv, Stream stream) {
  kernels::run_attention_backward_sequences(*impl_->backend, attention, sequences, q, k, v, o, lse,
                                            dout, dq, dk, dv, impl_->check_indices, stream);
}

void Runtime::multiscale_forward(const MultiScaleAttention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& mask,
                                 const TensorView& o, const TensorView& rowsum, Stream stream) {
  kernels::run_multiscale_forward(*impl_->backend, impl_->tuning, attention, q, k, v, mask, o,
                                  rowsum, stream);
}

void Runtime::multiscale_backward(const MultiScaleAttention& attention, const TensorView& q,
                                  const TensorView& k, const TensorView& v, const TensorView& mask,
                                  const TensorView& o, const TensorView& rowsum,
                                  const TensorView& dout, const TensorView& dq,
                                  const TensorView& dk, const TensorView& dv,
                                  const TensorView& dmask, Stream stream) {
  kernels::run_multiscale_backward(*impl_->backend, impl_->tuning, attention, q, k, v, mask, o,
                                   rowsum, dout, dq, dk, dv, dmask, stream);
}

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

}  // namespace detail
}  // namespace flashjit

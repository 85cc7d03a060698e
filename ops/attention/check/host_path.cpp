// The host work of an attention call with its kernel cached, timed on the emulator's device
// description with nothing launched (host_path.hpp).
#include "attention/check/host_path.hpp"

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "attention/attention_calls.hpp"
#include "attention/inference/attention_inference.hpp"
#include "autotune/tuning_state.hpp"
#include "common/builtin_kernels.hpp"
#include "runtime/forwarding_backend.hpp"

namespace flashjit::tools {
namespace {

/// Runs `call` `calls` times after 100 warm-up calls; microseconds per call.
template <class Call>
double microseconds_per_call(int calls, const Call& call) {
  for (int i = 0; i < 100; ++i) call();  // configs memoized, specs made, scratch held
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) call();
  const std::chrono::duration<double, std::micro> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / calls;
}

/// Stand-ins for tensors that are never allocated: planning and launching read their
/// addresses, never their elements, so aligned, disjoint addresses do.
TensorView stand_in(int index, DType dtype, std::initializer_list<std::int64_t> shape) {
  const std::uintptr_t stride = std::uintptr_t{1} << 40;
  return TensorView::contiguous(reinterpret_cast<void*>(stride * (index + 1)), dtype, shape);
}

/// An executor that takes launches and runs none (the kernels' time is not the host's).
class DiscardingExecutor final : public detail::Executor {
 public:
  explicit DiscardingExecutor(detail::Executor& inner) : inner_(inner) {}
  void launch(const detail::KernelSpec&, const detail::LaunchShape&, void**,
              const std::vector<detail::KernelBuffer>&) override {}
  bool has_kernel(const detail::KernelSpec& spec) const override { return inner_.has_kernel(spec); }
  int resident_clusters(const detail::KernelSpec& spec, const detail::LaunchShape& shape) override {
    return inner_.resident_clusters(spec, shape);
  }
  detail::TensorMapParameter tensor_maps(const std::vector<emulator::TensorMap>& maps) override {
    return inner_.tensor_maps(maps);
  }

 private:
  detail::Executor& inner_;
};

/// The emulator backend of `arch` whose launches run nothing, calling itself the cuda backend
/// so that the calls take the GPU's host path (the emulator alone reads the index arrays back
/// on every call).
class NotLaunchingBackend final : public detail::ForwardingBackend {
 public:
  explicit NotLaunchingBackend(const std::string& arch)
      : ForwardingBackend(
            detail::open_emulator_backend(kernels::emulated::builtin_kernels(), arch)),
        executor_(inner().executor()) {}
  Backend kind() const override { return Backend::cuda; }
  detail::Executor& executor() override { return executor_; }
  /// The emulator underneath, which says what it is (a TuningState on a cuda backend would ask
  /// the driver for its version).
  detail::RuntimeBackend& emulator() { return inner(); }

 private:
  DiscardingExecutor executor_;
};

}  // namespace

double forward_host_path_us(const Attention& attention, DType dtype, const std::string& arch,
                            int calls) {
  const std::unique_ptr<detail::RuntimeBackend> backend =
      detail::open_emulator_backend(kernels::emulated::builtin_kernels(), arch);
  autotune::TuningState choice(TuningPolicy::cached, *backend);
  const Attention& a = attention;
  const TensorView q = stand_in(0, dtype, {a.batch, a.seqlen_q, a.heads_q, a.head_dim});
  const TensorView k = stand_in(1, dtype, {a.batch, a.seqlen_k, a.heads_kv, a.head_dim});
  const TensorView v = stand_in(2, dtype, {a.batch, a.seqlen_k, a.heads_kv, a.head_dim});
  const DType out = dtype == DType::e4m3 ? DType::bf16 : dtype;  // the fp8 forward's o is bf16
  const TensorView o = stand_in(3, out, {a.batch, a.seqlen_q, a.heads_q, a.head_dim});
  const TensorView lse = stand_in(4, DType::f32, {a.batch, a.heads_q, a.seqlen_q});
  return microseconds_per_call(calls, [&] {
    return kernels::plan_attention_forward(backend->info(), choice, a, q, k, v, o, lse, Stream{});
  });
}

double decode_host_path_us(const Attention& attention, DType dtype, const std::string& arch,
                           int calls) {
  NotLaunchingBackend backend(arch);
  autotune::TuningState choice(TuningPolicy::cached, backend.emulator());
  Attention a = attention;
  a.seqlen_q = 1;
  a.causal = false;
  constexpr std::int64_t kPageSize = 16;
  const std::int64_t pages_per_sequence = (a.seqlen_k + kPageSize - 1) / kPageSize;
  const std::int64_t pages = a.batch * pages_per_sequence;
  const TensorView q = stand_in(0, dtype, {a.batch, 1, a.heads_q, a.head_dim});
  const TensorView k = stand_in(1, dtype, {pages, kPageSize, a.heads_kv, a.head_dim});
  const TensorView v = stand_in(2, dtype, {pages, kPageSize, a.heads_kv, a.head_dim});
  const TensorView o = stand_in(3, dtype, {a.batch, 1, a.heads_q, a.head_dim});
  const TensorView lse = stand_in(4, DType::f32, {a.batch, a.heads_q, 1});
  Sequences sequences;
  sequences.page_table = stand_in(5, DType::i32, {a.batch, pages_per_sequence});
  sequences.seqlens_k = stand_in(6, DType::i32, {a.batch});
  return microseconds_per_call(calls, [&] {
    kernels::run_attention_forward_sequences(backend, choice, a, sequences, q, k, v, o, lse,
                                             /*check_indices=*/false, Stream{});
  });
}

}  // namespace flashjit::tools

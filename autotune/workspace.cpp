#include "autotune/workspace.hpp"

#include <cstdint>

#include "autotune/layer_norm_candidates.hpp"
#include "autotune/multiscale_candidates.hpp"
#include "kernels/attention_backward.hpp"
#include "kernels/attention_forward.hpp"

namespace flashjit::autotune {

DeviceBuffer upload_16bit(detail::RuntimeBackend& backend, DType dtype, std::int64_t count,
                          std::mt19937_64& rng, bool random) {
  DeviceBuffer buffer = backend.allocate_buffer(static_cast<std::size_t>(count) * 2);
  std::vector<std::uint16_t> host(static_cast<std::size_t>(count), 0);
  if (random) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const bool f16 = dtype == DType::f16;
    for (std::uint16_t& x : host) {
      const float value = normal(rng);
      x = f16 ? f16_bits_from_float(value) : bf16_bits_from_float(value);
    }
  }
  backend.copy_to_device(buffer.data(), host.data(), host.size() * 2);
  return buffer;
}

std::vector<float> read_16bit(detail::RuntimeBackend& backend, const DeviceBuffer& buffer,
                              DType dtype) {
  std::vector<std::uint16_t> bits(buffer.size() / 2);
  backend.copy_to_host(bits.data(), buffer.data(), bits.size() * 2);
  std::vector<float> values(bits.size());
  const bool f16 = dtype == DType::f16;
  for (std::size_t i = 0; i < bits.size(); ++i) {
    values[i] = f16 ? float_from_f16_bits(bits[i]) : float_from_bf16_bits(bits[i]);
  }
  return values;
}

namespace {

// A dense batch (bshd layout, contiguous) with every output of the forward and the backward.
class AttentionWorkspace final : public TuningWorkspace {
 public:
  AttentionWorkspace(detail::RuntimeBackend& backend, const TuningProblem& problem)
      : backend_(backend), problem_(problem), rng_(0x5eed) {
    const Attention& a = problem.attention;
    q_ = head_tensor(a.seqlen_q, a.heads_q, true);
    k_ = head_tensor(a.seqlen_k, a.heads_kv, true);
    v_ = head_tensor(a.seqlen_k, a.heads_kv, true);
    o_ = head_tensor(a.seqlen_q, a.heads_q, false);
    lse_.buffer =
        backend.allocate_buffer(static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q) * 4);
    lse_.view = lse_tensor(static_cast<float*>(lse_.buffer.data()), a);
    if (problem.op == TunedOp::attention_backward) {
      dout_ = head_tensor(a.seqlen_q, a.heads_q, true);
      dq_ = head_tensor(a.seqlen_q, a.heads_q, false);
      dk_ = head_tensor(a.seqlen_k, a.heads_kv, false);
      dv_ = head_tensor(a.seqlen_k, a.heads_kv, false);
      // The backward needs the forward's O and LSE of these inputs: the default config's.
      const kernels::ForwardConfig forward = kernels::default_forward_config(
          problem.dtype, static_cast<int>(a.head_dim), kernels::forward_mask_kind(a),
          a.softcap > 0.0f, backend.info().arch());
      kernels::attention_forward(backend, a, q_.view, k_.view, v_.view, o_.view, lse_.view, forward,
                                 nullptr);
      backend.synchronize(nullptr);
    }
  }

  void run(const TunedConfig& config, Stream stream) override {
    const Attention& a = problem_.attention;
    if (const auto* forward = std::get_if<kernels::ForwardConfig>(&config)) {
      kernels::attention_forward(backend_, a, q_.view, k_.view, v_.view, o_.view, lse_.view,
                                 *forward, stream);
    } else {
      kernels::attention_backward(backend_, a, q_.view, k_.view, v_.view, o_.view, lse_.view,
                                  dout_.view, dq_.view, dk_.view, dv_.view,
                                  std::get<kernels::BackwardConfig>(config), stream);
    }
  }

  std::vector<float> outputs() override {
    if (problem_.op == TunedOp::attention_forward) return read(o_);
    std::vector<float> all = read(dq_);
    for (WorkspaceTensor* t : {&dk_, &dv_}) {
      const std::vector<float> part = read(*t);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

 private:
  WorkspaceTensor head_tensor(std::int64_t seqlen, std::int64_t heads, bool random) {
    const Attention& a = problem_.attention;
    WorkspaceTensor t;
    t.buffer =
        upload_16bit(backend_, problem_.dtype, a.batch * seqlen * heads * a.head_dim, rng_, random);
    t.view = attention_tensor(t.buffer.data(), problem_.dtype, Layout::bshd, a.batch, seqlen, heads,
                              a.head_dim);
    return t;
  }

  std::vector<float> read(const WorkspaceTensor& t) {
    return read_16bit(backend_, t.buffer, problem_.dtype);
  }

  detail::RuntimeBackend& backend_;
  const TuningProblem& problem_;
  std::mt19937_64 rng_;
  WorkspaceTensor q_, k_, v_, o_, lse_, dout_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<TuningWorkspace> make_workspace(detail::RuntimeBackend& backend,
                                                const TuningProblem& problem) {
  if (problem.op == TunedOp::attention_decode) return make_decode_workspace(backend, problem);
  if (is_layer_norm(problem.op)) return make_layer_norm_workspace(backend, problem);
  if (is_multiscale(problem.op)) return make_multiscale_workspace(backend, problem);
  return std::make_unique<AttentionWorkspace>(backend, problem);
}

}  // namespace flashjit::autotune

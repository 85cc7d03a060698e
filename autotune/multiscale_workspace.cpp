// The multi-scale ops' tuning workspace: random q, k, v (and dO) in bshd layout, RetNet's decay
// rates or a random mask tensor, and the outputs; the backward's o and r from the default
// forward.
#include "autotune/multiscale_candidates.hpp"
#include "autotune/workspace.hpp"
#include "kernels/multiscale_attention.hpp"

namespace flashjit::autotune {
namespace {

class MultiscaleWorkspace final : public TuningWorkspace {
 public:
  MultiscaleWorkspace(detail::RuntimeBackend& backend, const TuningProblem& problem)
      : backend_(backend),
        problem_(problem),
        attention_(multiscale_attention(problem)),
        rng_(0x5eed) {
    const MultiScaleAttention& a = attention_;
    q_ = heads(a.seqlen_q, a.heads_q, true);
    k_ = heads(a.seqlen_k, a.heads_kv, true);
    v_ = heads(a.seqlen_k, a.heads_kv, true);
    o_ = heads(a.seqlen_q, a.heads_q, false);
    std::vector<float> mask;
    if (a.mask == MultiScaleMask::decay) {
      for (std::int64_t h = 0; h < a.heads_q; ++h) {
        mask.push_back(1.0f - std::exp2(-5.0f - static_cast<float>(h % 8)));  // RetNet's
      }
    } else {
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      mask.resize(static_cast<std::size_t>(a.heads_q * a.seqlen_q * a.seqlen_k));
      for (float& m : mask) m = uniform(rng_);
    }
    mask_ = floats(mask);
    mask_.view = multiscale_mask_tensor(static_cast<float*>(mask_.buffer.data()), a);
    rowsum_ =
        floats(std::vector<float>(static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q)));
    rowsum_.view = multiscale_rowsum_tensor(static_cast<float*>(rowsum_.buffer.data()), a);
    if (problem.op == TunedOp::multiscale_backward) {
      dout_ = heads(a.seqlen_q, a.heads_q, true);
      dq_ = heads(a.seqlen_q, a.heads_q, false);
      dk_ = heads(a.seqlen_k, a.heads_kv, false);
      dv_ = heads(a.seqlen_k, a.heads_kv, false);
      const kernels::ForwardConfig forward = kernels::default_multiscale_forward_config(
          problem.dtype, static_cast<int>(a.head_dim), backend.info().arch());
      kernels::multiscale_forward(backend, a, q_.view, k_.view, v_.view, mask_.view, o_.view,
                                  rowsum_.view, forward, nullptr);
      backend.synchronize(nullptr);
    }
  }

  void run(const TunedConfig& config, Stream stream) override {
    const MultiScaleAttention& a = attention_;
    if (const auto* forward = std::get_if<kernels::MultiScaleForwardConfig>(&config)) {
      kernels::multiscale_forward(backend_, a, q_.view, k_.view, v_.view, mask_.view, o_.view,
                                  rowsum_.view, forward->tile, stream);
      return;
    }
    kernels::multiscale_backward(backend_, a, q_.view, k_.view, v_.view, mask_.view, o_.view,
                                 rowsum_.view, dout_.view, dq_.view, dk_.view, dv_.view, {},
                                 std::get<kernels::MultiScaleBackwardConfig>(config).tiles, stream);
  }

  std::vector<float> outputs() override {
    if (problem_.op == TunedOp::multiscale_forward) {
      return read_16bit(backend_, o_.buffer, problem_.dtype);
    }
    std::vector<float> all;
    for (const WorkspaceTensor* t : {&dq_, &dk_, &dv_}) {
      const std::vector<float> part = read_16bit(backend_, t->buffer, problem_.dtype);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

 private:
  WorkspaceTensor heads(std::int64_t seqlen, std::int64_t count, bool random) {
    const MultiScaleAttention& a = attention_;
    WorkspaceTensor t;
    t.buffer =
        upload_16bit(backend_, problem_.dtype, a.batch * seqlen * count * a.head_dim, rng_, random);
    t.view = attention_tensor(t.buffer.data(), problem_.dtype, Layout::bshd, a.batch, seqlen, count,
                              a.head_dim);
    return t;
  }

  WorkspaceTensor floats(const std::vector<float>& values) {
    WorkspaceTensor t;
    t.buffer = backend_.allocate_buffer(values.size() * sizeof(float));
    backend_.copy_to_device(t.buffer.data(), values.data(), values.size() * sizeof(float));
    return t;
  }

  detail::RuntimeBackend& backend_;
  const TuningProblem& problem_;
  MultiScaleAttention attention_;
  std::mt19937_64 rng_;
  WorkspaceTensor q_, k_, v_, o_, mask_, rowsum_, dout_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<TuningWorkspace> make_multiscale_workspace(detail::RuntimeBackend& backend,
                                                           const TuningProblem& problem) {
  return std::make_unique<MultiscaleWorkspace>(backend, problem);
}

}  // namespace flashjit::autotune

// The multi-scale ops' tuning workspace: random q, k, v (and dO) in bshd layout, RetNet's decay
// rates or a random mask tensor, and the outputs; the backward's o and r from the default
// forward.
#include "multiscale/multiscale_tuning.hpp"

#include <cmath>
#include <random>

#include "autotune/workspace.hpp"

namespace flashjit::autotune {

std::string TunedConfigTraits<kernels::MultiScaleForwardConfig>::name(
    const kernels::MultiScaleForwardConfig& config) {
  return TunedConfigTraits<kernels::ForwardConfig>::name(config.tile);
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::MultiScaleForwardConfig>::specs(
    const kernels::MultiScaleForwardConfig& config, const std::string& arch) {
  return {kernels::multiscale_forward_spec(config.tile, config.mask, arch)};
}

int TunedConfigTraits<kernels::MultiScaleForwardConfig>::threads(
    const kernels::MultiScaleForwardConfig& config, const std::vector<detail::KernelSpec>&) {
  return config.tile.warps * 32;
}

std::string TunedConfigTraits<kernels::MultiScaleBackwardConfig>::name(
    const kernels::MultiScaleBackwardConfig& config) {
  return TunedConfigTraits<kernels::BackwardConfig>::name(config.tiles);
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::MultiScaleBackwardConfig>::specs(
    const kernels::MultiScaleBackwardConfig& config, const std::string& arch) {
  return kernels::multiscale_backward_specs(config.tiles, config.mask, arch);
}

int TunedConfigTraits<kernels::MultiScaleBackwardConfig>::threads(
    const kernels::MultiScaleBackwardConfig& config, const std::vector<detail::KernelSpec>&) {
  return config.tiles.key.warps * 32;  // the main (dK/dV) kernel's
}

}  // namespace flashjit::autotune

namespace flashjit::kernels {

using autotune::shape_bucket;
using autotune::TunedConfig;
using autotune::WorkspaceTensor;

namespace {

class MultiscaleWorkspace final : public autotune::TuningWorkspace {
 public:
  MultiscaleWorkspace(detail::RuntimeBackend& backend, const MultiScaleProblem& problem)
      : backend_(backend), problem_(problem), attention_(problem.attention), rng_(0x5eed) {
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
    if (problem.backward) {
      dout_ = heads(a.seqlen_q, a.heads_q, true);
      dq_ = heads(a.seqlen_q, a.heads_q, false);
      dk_ = heads(a.seqlen_k, a.heads_kv, false);
      dv_ = heads(a.seqlen_k, a.heads_kv, false);
      const ForwardConfig forward = default_multiscale_forward_config(
          problem.dtype, static_cast<int>(a.head_dim), backend.info().arch());
      multiscale_forward(backend, a, q_.view, k_.view, v_.view, mask_.view, o_.view, rowsum_.view,
                         forward, nullptr);
      backend.synchronize(nullptr);
    }
  }

  void run(const TunedConfig& config, Stream stream) override {
    const MultiScaleAttention& a = attention_;
    if (const auto* forward = config.get_if<MultiScaleForwardConfig>()) {
      multiscale_forward(backend_, a, q_.view, k_.view, v_.view, mask_.view, o_.view, rowsum_.view,
                         forward->tile, stream);
      return;
    }
    multiscale_backward(backend_, a, q_.view, k_.view, v_.view, mask_.view, o_.view, rowsum_.view,
                        dout_.view, dq_.view, dk_.view, dv_.view, {},
                        config.get<MultiScaleBackwardConfig>().tiles, stream);
  }

  std::vector<float> outputs() override {
    if (!problem_.backward) {
      return autotune::read_16bit(backend_, o_.buffer, problem_.dtype);
    }
    std::vector<float> all;
    for (const WorkspaceTensor* t : {&dq_, &dk_, &dv_}) {
      const std::vector<float> part = autotune::read_16bit(backend_, t->buffer, problem_.dtype);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

 private:
  WorkspaceTensor heads(std::int64_t seqlen, std::int64_t count, bool random) {
    const MultiScaleAttention& a = attention_;
    WorkspaceTensor t;
    t.buffer = autotune::upload_16bit(backend_, problem_.dtype,
                                      a.batch * seqlen * count * a.head_dim, rng_, random);
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
  MultiScaleProblem problem_;
  MultiScaleAttention attention_;
  std::mt19937_64 rng_;
  WorkspaceTensor q_, k_, v_, o_, mask_, rowsum_, dout_, dq_, dk_, dv_;
};

const BackwardConfig& backward_tiles(const TunedConfig& config) {
  return config.get<MultiScaleBackwardConfig>().tiles;
}

const char* mask_name(MultiScaleMask mask) {
  return mask == MultiScaleMask::decay ? "decay" : "tensor";
}

}  // namespace

MultiScaleProblem::MultiScaleProblem(bool backward_, DType dtype_,
                                     const MultiScaleAttention& attention_)
    : backward(backward_), attention(attention_) {
  dtype = dtype_;
}

std::string_view MultiScaleProblem::op() const {
  return backward ? "multiscale-backward" : "multiscale-forward";
}

std::string MultiScaleProblem::key() const {
  const MultiScaleAttention& a = attention;
  return attention_key_head(dtype, a.head_dim, mask_name(a.mask), false, false) +
         attention_key_sizes(a.seqlen_q, a.seqlen_k, a.batch * a.heads_q);
}

autotune::ShapeFields MultiScaleProblem::shape_fields() const {
  const MultiScaleAttention& a = attention;
  return {a.head_dim, static_cast<std::int64_t>(a.mask), shape_bucket(a.seqlen_q),
          shape_bucket(a.seqlen_k), shape_bucket(a.batch * a.heads_q)};
}

std::string MultiScaleProblem::describe() const {
  const MultiScaleAttention& a = attention;
  return std::string(op()) + " " + std::string(dtype_name(dtype)) + " hdim" +
         std::to_string(a.head_dim) + " seqlen " + std::to_string(a.seqlen_q) + " batch " +
         std::to_string(a.batch) + " x heads " + std::to_string(a.heads_q) +
         (a.mask == MultiScaleMask::decay ? ", decay mask" : ", mask tensor");
}

bool MultiScaleProblem::empty() const {
  return attention.batch == 0 || attention.seqlen_q == 0 || attention.seqlen_k == 0;
}

double MultiScaleProblem::flops() const {
  return attention_flops(multiscale_as_attention(attention),
                         attention.mask == MultiScaleMask::decay, backward);
}

TunedConfig MultiScaleProblem::default_config(const std::string& arch) const {
  const int head_dim = static_cast<int>(attention.head_dim);
  if (!backward) {
    return MultiScaleForwardConfig{default_multiscale_forward_config(dtype, head_dim, arch),
                                   attention.mask};
  }
  return MultiScaleBackwardConfig{default_multiscale_backward_config(dtype, head_dim, arch),
                                  attention.mask};
}

std::vector<TunedConfig> MultiScaleProblem::space() const {
  const int head_dim = static_cast<int>(attention.head_dim);
  std::vector<TunedConfig> configs;
  if (!backward) {
    for (const ForwardConfig& tile : multiscale_forward_configs(dtype, head_dim)) {
      configs.emplace_back(MultiScaleForwardConfig{tile, attention.mask});
    }
  } else {
    for (const BackwardConfig& tiles : multiscale_backward_configs(dtype, head_dim)) {
      configs.emplace_back(MultiScaleBackwardConfig{tiles, attention.mask});
    }
  }
  return configs;
}

bool MultiScaleProblem::timed(const TunedConfig& config, const TunedConfig& fallback,
                              const std::string& /*arch*/) const {
  if (!backward) return true;
  return backward_timed_alone(backward_tiles(config), backward_tiles(fallback));
}

void MultiScaleProblem::prune_for_size(std::vector<autotune::Candidate>& candidates) const {
  const auto tiles = [this](const TunedConfig& config) {
    if (backward) {
      const BackwardConfig& b = backward_tiles(config);
      return TileSize{b.key.block_m, b.key.block_n};
    }
    const ForwardConfig& f = config.get<MultiScaleForwardConfig>().tile;
    return TileSize{f.block_m, f.block_n};
  };
  prune_tiles_for_size(candidates, shape_bucket(attention.seqlen_q),
                       shape_bucket(attention.seqlen_k), tiles);
}

std::optional<TunedConfig> MultiScaleProblem::fastest_pair(
    const std::vector<autotune::Candidate>& candidates,
    const std::vector<autotune::CandidateTiming>& timings) const {
  if (!backward) return std::nullopt;
  const std::optional<BackwardConfig> pair =
      fastest_backward_pair(candidates, timings, backward_tiles);
  if (!pair) return std::nullopt;
  return TunedConfig(MultiScaleBackwardConfig{*pair, attention.mask});
}

bool MultiScaleProblem::pairs_parts() const { return backward; }

std::unique_ptr<autotune::TuningWorkspace> MultiScaleProblem::workspace(
    detail::RuntimeBackend& backend) const {
  return std::make_unique<MultiscaleWorkspace>(backend, *this);
}

}  // namespace flashjit::kernels

// The attention forward's and backward's tuning description (attention_tuning.hpp), and the
// tensors the tuner runs their candidates on: a dense batch (bshd, contiguous) with every output
// of the forward and the backward.
#include "attention/attention_tuning.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <random>

#include "autotune/workspace.hpp"

namespace flashjit::autotune {
namespace {

// The forward config name's mark of the kernel it runs (the mma.sync path has none).
const char* path_suffix(kernels::ForwardPath path) {
  switch (path) {
    case kernels::ForwardPath::wgmma:
      return ".wgmma";
    case kernels::ForwardPath::tma:
      return ".tma";
    case kernels::ForwardPath::wide:
      return ".wide";
    case kernels::ForwardPath::decode:
      return ".decode";
    case kernels::ForwardPath::fp8:
      return ".fp8";
    case kernels::ForwardPath::mma_sync:
      break;
  }
  return "";
}

}  // namespace

std::string TunedConfigTraits<kernels::ForwardConfig>::name(const kernels::ForwardConfig& f) {
  return "br" + std::to_string(f.block_m) + ".bc" + std::to_string(f.block_n) + ".w" +
         std::to_string(f.warps) + ".s" + std::to_string(f.stages) +
         (f.q_in_registers() ? ".qreg" : "") + path_suffix(f.path()) +
         (f.overlap() ? ".overlap" : "") + (f.pingpong() ? ".pingpong" : "") +
         (f.p_in_shared() ? ".pshared" : "") + (f.persistent() ? ".persistent" : "") +
         (f.cluster() ? ".cluster2" : "") +
         (f.column_groups() != 0 ? ".g" + std::to_string(f.column_groups()) : "") +
         (f.values_in_keys() ? ".vk" : "") + (f.warpgroups() ? ".wgmma" : "") +
         (f.fp8_tma() ? ".tma" : "");
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::ForwardConfig>::specs(
    const kernels::ForwardConfig& config, const std::string& arch) {
  return {kernels::forward_spec(config, arch)};
}

int TunedConfigTraits<kernels::ForwardConfig>::threads(const kernels::ForwardConfig& config,
                                                       const std::vector<detail::KernelSpec>&) {
  return config.warps * 32;
}

std::string TunedConfigTraits<kernels::BackwardConfig>::name(const kernels::BackwardConfig& b) {
  std::string name = "br" + std::to_string(b.key.block_m) + ".bc" + std::to_string(b.key.block_n) +
                     ".w" + std::to_string(b.key.warps) + ".s" + std::to_string(b.key.stages);
  if (b.has_query_kernel()) {  // the deterministic mma.sync backward's dQ kernel
    name += ".dq.br" + std::to_string(b.query.block_m) + ".bc" + std::to_string(b.query.block_n) +
            ".w" + std::to_string(b.query.warps);
  }
  if (b.tma) name += ".tma";
  return name;
}

std::vector<detail::KernelSpec> TunedConfigTraits<kernels::BackwardConfig>::specs(
    const kernels::BackwardConfig& config, const std::string& arch) {
  return kernels::backward_specs(config, arch).in_order();
}

int TunedConfigTraits<kernels::BackwardConfig>::threads(const kernels::BackwardConfig& config,
                                                        const std::vector<detail::KernelSpec>&) {
  return config.key.warps * 32;  // the main (dK/dV) kernel's
}

}  // namespace flashjit::autotune

namespace flashjit::kernels {

using autotune::Candidate;
using autotune::CandidateTiming;
using autotune::shape_bucket;
using autotune::TunedConfig;

double attention_flops(const Attention& a, bool causal, bool backward) {
  const bool windowed = a.window_left >= 0 || (!a.causal && a.window_right >= 0);
  const double full = static_cast<double>(a.seqlen_q) * static_cast<double>(a.seqlen_k);
  // FlashAttention's convention, so that TFLOP/s compare with the peers': every pair, halved
  // for causal; only a sliding window, which it does not define, counts the pairs it keeps.
  const double pairs = windowed ? visible_pairs(a) : causal ? full / 2 : full;
  // Two products per pair: S = Q Kᵀ over head_dim, O = P V over the value head dim.
  const double forward = 2.0 * static_cast<double>(a.batch * a.heads_q) * pairs *
                         static_cast<double>(a.head_dim + a.value_head_dim());
  return backward ? 2.5 * forward : forward;
}

std::int64_t value_dim_key(const Attention& a) {
  return a.value_head_dim() != a.head_dim ? a.value_head_dim() : 0;
}

std::string head_dim_name(std::int64_t head_dim, std::int64_t head_dim_v) {
  return "hdim" + std::to_string(head_dim) +
         (head_dim_v != 0 ? "v" + std::to_string(head_dim_v) : "");
}

std::string attention_key_head(DType dtype, std::int64_t head_dim, const std::string& mask,
                               bool softcap, bool deterministic, std::int64_t head_dim_v) {
  return std::string(dtype_name(dtype)) + "/" + head_dim_name(head_dim, head_dim_v) + "/" + mask +
         (softcap ? ".softcap" : "") + (deterministic ? ".deterministic" : "");
}

std::string attention_key_sizes(std::int64_t seqlen_q, std::int64_t seqlen_k,
                                std::int64_t batch_heads) {
  return "/q" + std::to_string(shape_bucket(seqlen_q)) + "/k" +
         std::to_string(shape_bucket(seqlen_k)) + "/bh" + std::to_string(shape_bucket(batch_heads));
}

const char* mask_key(const Attention& attention) {
  return forward_mask_kind(attention) == MaskKind::window ? "window" : "none";
}

void prune_tiles_for_size(std::vector<Candidate>& candidates, std::int64_t rows, std::int64_t keys,
                          const std::function<TileSize(const TunedConfig&)>& tiles) {
  // A tile larger than the shape is pruned only when a smaller one exists.
  TileSize smallest{1 << 30, 1 << 30};
  for (const Candidate& c : candidates) {
    const TileSize t = tiles(c.config);
    smallest.block_m = std::min(smallest.block_m, t.block_m);
    smallest.block_n = std::min(smallest.block_n, t.block_n);
  }
  for (Candidate& c : candidates) {
    if (!c.pruned.empty() || c.is_default) continue;
    const TileSize t = tiles(c.config);
    if (t.block_m > smallest.block_m && t.block_m > rows) {
      c.pruned = "Br " + std::to_string(t.block_m) + " > " + std::to_string(rows) +
                 " query rows (a smaller Br covers them)";
    } else if (t.block_n > smallest.block_n && t.block_n > keys) {
      c.pruned = "Bc " + std::to_string(t.block_n) + " > " + std::to_string(keys) +
                 " keys (a smaller Bc covers them)";
    }
  }
}

bool backward_timed_alone(const BackwardConfig& config, const BackwardConfig& fallback) {
  // The deterministic backward's dK/dV and dQ kernels run one after the other on outputs of
  // their own, so neither tile's time depends on the other's: every dK/dV tile is timed beside
  // the default's dQ tile and every dQ tile beside the default's dK/dV tile (n + m - 1 runs
  // instead of n x m), and then the pair of the two fastest. The TMA backward has no dQ kernel.
  if (!config.deterministic || config.tma) return true;
  return config.key == fallback.key || config.query == fallback.query;
}

BackwardConfig backward_pairing_base(const BackwardConfig& default_config,
                                     const std::string& arch) {
  if (!default_config.tma) return default_config;
  const BackwardConfig& d = default_config;
  return fallback_backward_config(d.dtype, d.head_dim, d.mask, d.softcap, d.deterministic, arch);
}

std::optional<BackwardConfig> fastest_backward_pair(
    const std::vector<Candidate>& candidates, const std::vector<CandidateTiming>& timings,
    const std::function<const BackwardConfig&(const TunedConfig&)>& tiles) {
  const Candidate* base = nullptr;
  for (const Candidate& c : candidates) {
    if (c.is_default) base = &c;
  }
  if (base == nullptr || !tiles(base->config).deterministic || base->specs.empty()) {
    return std::nullopt;
  }
  const BackwardConfig fallback = backward_pairing_base(tiles(base->config), base->specs[0].arch);
  auto median = [&](const std::string& name) {
    for (const CandidateTiming& t : timings) {
      if (t.config == name) return t.median_ms;
    }
    return std::numeric_limits<double>::infinity();
  };
  BackwardConfig pair = fallback;
  double key_ms = std::numeric_limits<double>::infinity(), query_ms = key_ms;
  for (const Candidate& c : candidates) {
    const BackwardConfig& config = tiles(c.config);
    if (config.tma) continue;  // no dQ tile to pair
    const double ms = median(c.name);
    if (config.query == fallback.query && ms < key_ms) {
      key_ms = ms;
      pair.key = config.key;
    }
    if (config.key == fallback.key && ms < query_ms) {
      query_ms = ms;
      pair.query = config.query;
    }
  }
  if (!std::isfinite(key_ms) || !std::isfinite(query_ms)) return std::nullopt;
  if (pair.key == fallback.key || pair.query == fallback.query) return std::nullopt;
  return pair;
}

namespace {

// A dense batch (bshd layout, contiguous) with every output of the forward and the backward.
class AttentionWorkspace final : public autotune::TuningWorkspace {
 public:
  AttentionWorkspace(detail::RuntimeBackend& backend, const AttentionProblem& problem)
      : backend_(backend), problem_(problem), rng_(0x5eed) {
    const Attention& a = problem.attention;
    const std::int64_t d = a.head_dim, dv = a.value_head_dim();
    q_ = head_tensor(a.seqlen_q, a.heads_q, d, true);
    k_ = head_tensor(a.seqlen_k, a.heads_kv, d, true);
    v_ = head_tensor(a.seqlen_k, a.heads_kv, dv, true);
    // The fp8 forward's inputs are e4m3, its O bf16.
    o_ = head_tensor(a.seqlen_q, a.heads_q, dv, false,
                     problem.dtype == DType::e4m3 ? DType::bf16 : problem.dtype);
    lse_.buffer =
        backend.allocate_buffer(static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q) * 4);
    lse_.view = lse_tensor(static_cast<float*>(lse_.buffer.data()), a);
    if (problem.backward) {
      dout_ = head_tensor(a.seqlen_q, a.heads_q, dv, true);
      dq_ = head_tensor(a.seqlen_q, a.heads_q, d, false);
      dk_ = head_tensor(a.seqlen_k, a.heads_kv, d, false);
      dv_ = head_tensor(a.seqlen_k, a.heads_kv, dv, false);
      own_capture_gradients();
      // The backward needs the forward's O and LSE of these inputs: the default config's.
      const std::string& arch = backend.info().arch();
      const ForwardConfig forward =
          problem.modified() ? dense_modifiers_forward_config(problem.dtype, a, arch)
                             : default_forward_config(problem.dtype, static_cast<int>(a.head_dim),
                                                      forward_mask_kind(a), a.softcap > 0.0f, arch);
      attention_forward(backend, problem_.attention, q_.view, k_.view, v_.view, o_.view, lse_.view,
                        forward, nullptr);
      backend.synchronize(nullptr);
    }
  }

  void run(const TunedConfig& config, Stream stream) override {
    const Attention& a = problem_.attention;
    if (const auto* forward = config.get_if<ForwardConfig>()) {
      attention_forward(backend_, a, q_.view, k_.view, v_.view, o_.view, lse_.view, *forward,
                        stream);
    } else {
      attention_backward(backend_, a, q_.view, k_.view, v_.view, o_.view, lse_.view, dout_.view,
                         dq_.view, dk_.view, dv_.view, config.get<BackwardConfig>(), stream);
    }
  }

  std::vector<float> outputs() override {
    if (!problem_.backward) return read(o_);
    std::vector<float> all = read(dq_);
    for (autotune::WorkspaceTensor* t : {&dk_, &dv_}) {
      const std::vector<float> part = read(*t);
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

 private:
  autotune::WorkspaceTensor head_tensor(std::int64_t seqlen, std::int64_t heads,
                                        std::int64_t head_dim, bool random) {
    return head_tensor(seqlen, heads, head_dim, random, problem_.dtype);
  }
  autotune::WorkspaceTensor head_tensor(std::int64_t seqlen, std::int64_t heads,
                                        std::int64_t head_dim, bool random, DType dtype) {
    const Attention& a = problem_.attention;
    autotune::WorkspaceTensor t;
    t.buffer =
        autotune::upload_16bit(backend_, dtype, a.batch * seqlen * heads * head_dim, rng_, random);
    t.view =
        attention_tensor(t.buffer.data(), dtype, Layout::bshd, a.batch, seqlen, heads, head_dim);
    return t;
  }

  // The captures are the call's own tensors (the tuning runs inside the call, or has none),
  // read only; a capture's gradient, which the backward adds into, is the workspace's: the same
  // extent and strides, so the caller's sums are never touched.
  void own_capture_gradients() {
    for (Capture& capture : problem_.attention.captures) {
      if (capture.grad.data == nullptr) continue;
      autotune::WorkspaceTensor& t = capture_grads_.emplace_back();
      t.buffer = backend_.allocate_buffer(static_cast<std::size_t>(capture.grad.span_bytes()));
      t.view = capture.grad;
      t.view.data = t.buffer.data();
      capture.grad = t.view;
    }
  }

  std::vector<float> read(const autotune::WorkspaceTensor& t) {
    return autotune::read_16bit(backend_, t.buffer, t.view.dtype);
  }

  detail::RuntimeBackend& backend_;
  AttentionProblem problem_;
  std::mt19937_64 rng_;
  autotune::WorkspaceTensor q_, k_, v_, o_, lse_, dout_, dq_, dk_, dv_;
  std::vector<autotune::WorkspaceTensor> capture_grads_;
};

TileSize backward_tiles_of(const TunedConfig& config) {
  const BackwardConfig& b = config.get<BackwardConfig>();
  return {b.key.block_m, b.key.block_n};
}

TileSize forward_tiles_of(const TunedConfig& config) {
  const ForwardConfig& f = config.get<ForwardConfig>();
  return {f.block_m, f.block_n};
}

}  // namespace

std::string_view AttentionProblem::op() const {
  return backward ? "attention-backward" : "attention-forward";
}

AttentionProblem::AttentionProblem(bool backward_, DType dtype_, const Attention& attention_)
    : backward(backward_), attention(attention_) {
  dtype = dtype_;
}

std::string AttentionProblem::key() const {
  const Attention& a = attention;
  return attention_key_head(dtype, a.head_dim, mask_key(a), a.softcap > 0.0f,
                            backward && a.deterministic, value_dim_key(a)) +
         attention_key_sizes(a.seqlen_q, a.seqlen_k, a.batch * a.heads_q) + modifiers_key();
}

std::string AttentionProblem::modifiers_key() const {
  if (!modified()) return "";
  // The forward reads a block mask (the backward none), which may change the fastest kernel.
  const bool block_mask = !backward && attention.block_mask.data != nullptr;
  return "/mod" + score_modifiers(attention).digest() + (block_mask ? ".blockmask" : "");
}

autotune::ShapeFields AttentionProblem::shape_fields() const {
  const Attention& a = attention;
  // The modifiers' digest as a number, so that calls with other modifiers (or none) never
  // share a memoized choice.
  const std::int64_t digest =
      modified() ? static_cast<std::int64_t>(std::stoull(score_modifiers(a).digest(), nullptr, 16))
                 : 0;
  return {a.head_dim,
          static_cast<std::int64_t>(forward_mask_kind(a)),
          a.softcap > 0.0f,
          backward && a.deterministic,
          shape_bucket(a.seqlen_q),
          shape_bucket(a.seqlen_k),
          shape_bucket(a.batch * a.heads_q),
          digest,
          !backward && a.block_mask.data != nullptr,
          value_dim_key(a)};
}

std::string AttentionProblem::describe() const {
  const Attention& a = attention;
  return std::string(op()) + " " + std::string(dtype_name(dtype)) + " " +
         head_dim_name(a.head_dim, value_dim_key(a)) + " seqlen " + std::to_string(a.seqlen_q) +
         " batch " + std::to_string(a.batch) + " x heads " + std::to_string(a.heads_q) +
         (a.causal ? " causal" : "") + (backward && a.deterministic ? " deterministic" : "") +
         (modified() ? " modifiers " + score_modifiers(a).digest().substr(0, 8) : "") +
         (a.dropout_p > 0.0f ? " dropout" : "");
}

bool AttentionProblem::empty() const {
  return attention.batch == 0 || attention.seqlen_q == 0 || attention.seqlen_k == 0;
}

double AttentionProblem::flops() const {
  return attention_flops(attention, attention.causal, backward);
}

TunedConfig AttentionProblem::default_config(const std::string& arch) const {
  const Attention& a = attention;
  const int head_dim = static_cast<int>(a.head_dim);
  if (modified()) {
    if (!backward) return dense_modifiers_forward_config(dtype, a, arch);
    return modifiers_backward_config(dtype, a, arch);
  }
  if (!backward) {
    return default_forward_config(dtype, head_dim, forward_mask_kind(a), a.softcap > 0.0f, arch);
  }
  return default_backward_config(dtype, head_dim, forward_mask_kind(a), a.softcap > 0.0f,
                                 a.deterministic, arch);
}

std::vector<TunedConfig> AttentionProblem::space() const {
  const Attention& a = attention;
  const int head_dim = static_cast<int>(a.head_dim);
  const MaskKind mask = forward_mask_kind(a);
  std::vector<TunedConfig> configs;
  if (!backward) {
    for (const ForwardConfig& c : forward_configs(dtype, head_dim, mask, a.softcap > 0.0f)) {
      configs.emplace_back(c);
    }
  } else {
    for (const BackwardConfig& c :
         backward_configs(dtype, head_dim, mask, a.softcap > 0.0f, a.deterministic)) {
      configs.emplace_back(c);
    }
  }
  // The kernel that takes no modifiers (the wgmma forward) leaves the space, and with a block
  // mask the persistent and clustered TMA forwards.
  if (modified()) {
    std::erase_if(configs, [this](const TunedConfig& c) { return !cannot_run(c).empty(); });
  }
  return configs;
}

std::vector<detail::KernelSpec> AttentionProblem::specs(const TunedConfig& config,
                                                        const std::string& arch) const {
  const ScoreModifiers modifiers = score_modifiers(attention);
  if (!backward) return {forward_spec(config.get<ForwardConfig>(), arch, modifiers)};
  return backward_specs(config.get<BackwardConfig>(), arch, modifiers).in_order();
}

std::string AttentionProblem::cannot_run(const TunedConfig& config) const {
  const auto* forward = config.get_if<ForwardConfig>();
  if (modified() && forward != nullptr && forward->path() == ForwardPath::wgmma) {
    return "the wgmma forward takes no score or mask modifiers";
  }
  if (attention.dropout_p > 0.0f) {
    const auto* backward_config = config.get_if<BackwardConfig>();
    if ((forward != nullptr && forward->path() != ForwardPath::mma_sync) ||
        (backward_config != nullptr && backward_config->tma)) {
      return "dropout runs on the mma.sync kernels only";
    }
  }
  if (forward != nullptr && (forward->cluster() || forward->persistent()) &&
      attention.block_mask.data != nullptr) {
    return "the TMA forward reads a block mask with one CTA a tile only";
  }
  return "";
}

bool AttentionProblem::timed(const TunedConfig& config, const TunedConfig& fallback,
                             const std::string& arch) const {
  if (!backward) return runs_on(config.get<ForwardConfig>(), arch);  // Hopper paths: sm_90a
  return runs_on(config.get<BackwardConfig>(), arch) &&
         backward_timed_alone(config.get<BackwardConfig>(),
                              backward_pairing_base(fallback.get<BackwardConfig>(), arch));
}

void AttentionProblem::prune_for_size(std::vector<Candidate>& candidates) const {
  prune_tiles_for_size(candidates, shape_bucket(attention.seqlen_q),
                       shape_bucket(attention.seqlen_k),
                       backward ? backward_tiles_of : forward_tiles_of);
}

std::optional<TunedConfig> AttentionProblem::fastest_pair(
    const std::vector<Candidate>& candidates, const std::vector<CandidateTiming>& timings) const {
  if (!backward) return std::nullopt;
  const std::optional<BackwardConfig> pair = fastest_backward_pair(
      candidates, timings, [](const TunedConfig& config) -> const BackwardConfig& {
        return config.get<BackwardConfig>();
      });
  if (!pair) return std::nullopt;
  return TunedConfig(*pair);
}

bool AttentionProblem::pairs_parts() const { return backward && attention.deterministic; }

std::unique_ptr<autotune::TuningWorkspace> AttentionProblem::workspace(
    detail::RuntimeBackend& backend) const {
  return std::make_unique<AttentionWorkspace>(backend, *this);
}

}  // namespace flashjit::kernels

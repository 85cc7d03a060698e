#pragma once
// The attention forward's and backward's tuning description (autotune/tuning_problem.hpp): what
// their configs are called and launch, the key of a call shape, the space, the default, the
// pruning of tiles larger than the shape, and the backward's pairing of its two kernels' tiles.
// The pieces the other attention-based ops share (decode, multi-scale attention) are here too.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "autotune/tuning_db.hpp"
#include "autotune/tuning_problem.hpp"
#include "flashjit/attention.hpp"

namespace flashjit::autotune {

/// "br128.bc64.w4.s2", then ".qreg" when Q stays in registers, ".wgmma" or ".tma" for the Hopper
/// paths' kernels, then ".overlap", ".pingpong", ".pshared", ".persistent" and ".cluster2" for
/// the TMA path's schedule, P's place, its tile loop and 2-CTA clusters.
template <>
struct TunedConfigTraits<kernels::ForwardConfig> {
  static std::string name(const kernels::ForwardConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::ForwardConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::ForwardConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

/// "br64.bc128.w8.s2" (the dK/dV kernel's tile), "br64.bc128.w8.s2.dq.br64.bc64.w4" in the
/// deterministic mode (and the dQ kernel's), "br64.bc128.w12.s2.tma" for the TMA backward in
/// either mode (no dQ kernel).
template <>
struct TunedConfigTraits<kernels::BackwardConfig> {
  static std::string name(const kernels::BackwardConfig& config);
  static std::vector<detail::KernelSpec> specs(const kernels::BackwardConfig& config,
                                               const std::string& arch);
  static int threads(const kernels::BackwardConfig& config,
                     const std::vector<detail::KernelSpec>& specs);
};

}  // namespace flashjit::autotune

namespace flashjit::kernels {

/// One shape of Runtime::forward (attention-forward) or Runtime::backward
/// (attention-backward): its key is the dtype, head dim, mask kind, softcap, the backward's
/// deterministic mode and the buckets of seqlen_q, seqlen_k and batch · heads_q; then, for a
/// call with score or mask modifiers, their digest (ScoreModifiers::digest: the expressions and
/// the captures' names and types) and whether the forward has a block mask. Such a call's
/// kernels have the modifiers compiled in (specs), its space leaves out the kernel that takes
/// none (the wgmma forward), and its workspace reads the call's captures (so it is tuned inside the
/// call, or has none).
class AttentionProblem final : public autotune::TuningProblem {
 public:
  /// `attention` validated (its modifiers checked).
  AttentionProblem(bool backward, DType dtype, const Attention& attention);

  bool backward = false;  ///< attention-backward (else attention-forward)
  Attention attention;

  /// Whether the call has score or mask modifiers.
  /// Modifiers or dropout: a kernel of its own (the modifiers' struct says which).
  bool modified() const {
    return !attention.score_mod.empty() || !attention.mask_mod.empty() ||
           attention.dropout_p > 0.0f;
  }

  std::string_view op() const override;
  std::string key() const override;
  autotune::ShapeFields shape_fields() const override;
  std::string describe() const override;
  bool empty() const override;
  double flops() const override;
  autotune::TunedConfig default_config(const std::string& arch) const override;
  std::vector<autotune::TunedConfig> space() const override;
  std::vector<detail::KernelSpec> specs(const autotune::TunedConfig& config,
                                        const std::string& arch) const override;
  std::string cannot_run(const autotune::TunedConfig& config) const override;
  bool timed(const autotune::TunedConfig& config, const autotune::TunedConfig& fallback,
             const std::string& arch) const override;
  void prune_for_size(std::vector<autotune::Candidate>& candidates) const override;
  std::optional<autotune::TunedConfig> fastest_pair(
      const std::vector<autotune::Candidate>& candidates,
      const std::vector<autotune::CandidateTiming>& timings) const override;
  bool pairs_parts() const override;
  std::unique_ptr<autotune::TuningWorkspace> workspace(
      detail::RuntimeBackend& backend) const override;

 private:
  std::string modifiers_key() const;  // "/mod<digest>[.blockmask]", or "" without modifiers
};

// ---- shared by the ops that run attention's tiles (decode, multi-scale attention) ----

/// FLOPs of a call as FlashAttention's benchmarks count them: 2 · batch · heads_q · seqlen_q ·
/// seqlen_k · (head_dim + value head dim) (two matrix products), halved when `causal`; a
/// sliding window counts the (query, key) pairs it keeps. The backward is 2.5 times that.
double attention_flops(const Attention& attention, bool causal, bool backward);

/// The value head dim where it differs from head_dim (the keys' "v128"), else 0: a head_dim_v
/// spelled equal to head_dim is the same problem as 0.
std::int64_t value_dim_key(const Attention& attention);
/// "hdim192v128": the head dim, and the value head dim where it differs (head_dim_v 0: none),
/// as tuning keys and descriptions spell them.
std::string head_dim_name(std::int64_t head_dim, std::int64_t head_dim_v);

/// The key's head: "bf16/hdim128/<mask>" with ".softcap" and ".deterministic" when set, and
/// "hdim192v128" with a value head dim (head_dim_v, 0 when it is head_dim's).
std::string attention_key_head(DType dtype, std::int64_t head_dim, const std::string& mask,
                               bool softcap, bool deterministic, std::int64_t head_dim_v = 0);

/// The key's tail of a dense batch: "/q1024/k1024/bh32", the buckets of seqlen_q, seqlen_k and
/// batch · heads_q (the attention forward's and backward's, multi-scale attention's).
std::string attention_key_sizes(std::int64_t seqlen_q, std::int64_t seqlen_k,
                                std::int64_t batch_heads);

/// "none" or "window": the key's name of the call's mask kind.
const char* mask_key(const Attention& attention);

/// Query rows (Br) and keys (Bc) per block of a config's main kernel.
struct TileSize {
  int block_m = 0;
  int block_n = 0;
};

/// Prunes the candidates (never the default) whose Br exceeds `rows` or whose Bc exceeds `keys`
/// when the space has a smaller one, with the reason; `tiles` gives a candidate's tile.
void prune_tiles_for_size(std::vector<autotune::Candidate>& candidates, std::int64_t rows,
                          std::int64_t keys,
                          const std::function<TileSize(const autotune::TunedConfig&)>& tiles);

/// Whether the tuner times a deterministic backward's `config` on its own: only beside the
/// pairing base's (backward_pairing_base) dQ tile or its dK/dV tile (the two kernels' times add
/// up independently); every non-deterministic config, and every TMA one (no dQ kernel).
bool backward_timed_alone(const BackwardConfig& config, const BackwardConfig& fallback);

/// The mma.sync config whose tiles the deterministic tuning pairs others with: the default
/// itself, or when the default is the TMA backward, fallback_backward_config's for `arch`.
BackwardConfig backward_pairing_base(const BackwardConfig& default_config, const std::string& arch);

/// The deterministic backward's fastest dK/dV tile with its fastest dQ tile, from the timings
/// of each beside the default's other tile; nullopt when that pair was timed already (one of
/// the two is the default's), when a side has no finite time, or when the default is not
/// deterministic. `tiles` gives a candidate's backward tiles; the default is the candidate
/// marked so, and the pair is built on its backward_pairing_base (TMA candidates take no part).
std::optional<BackwardConfig> fastest_backward_pair(
    const std::vector<autotune::Candidate>& candidates,
    const std::vector<autotune::CandidateTiming>& timings,
    const std::function<const BackwardConfig&(const autotune::TunedConfig&)>& tiles);

}  // namespace flashjit::kernels

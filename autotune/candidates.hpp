#pragma once
// The candidates the autotuner considers for one call shape, and why some are dropped before
// any timing (DESIGN.md section 6). The configs come from each op's space, declared beside its
// template (attention_forward_space, attention_backward_space) with the validity predicate the
// template asserts; pruning is static first (shared memory, tiles larger than the problem),
// then on the compiler's resource report (spills, zero occupancy).
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "autotune/tuning_db.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "kernels/attention_backward.hpp"
#include "kernels/attention_forward.hpp"
#include "kernels/attention_inference_config.hpp"
#include "kernels/layer_norm.hpp"
#include "kernels/multiscale_attention.hpp"
#include "runtime/compiler.hpp"
#include "runtime/kernel_spec.hpp"

namespace flashjit::autotune {

/// The ops the autotuner tunes. attention-decode is Runtime::forward with Sequences for calls of
/// at most kernels::kMaxDecodeQueries query tokens per sequence: its configs pick the tile and
/// the split count. layernorm and layernorm-backward are Runtime::layer_norm and
/// Runtime::layer_norm_backward: their configs pick the row kernel's bucket, threads per row
/// and vector width. multiscale-forward and multiscale-backward are Runtime::multiscale_forward
/// and multiscale_backward: their configs pick the attention tiles multi-scale attention runs on.
enum class TunedOp {
  attention_forward,
  attention_backward,
  attention_decode,
  layer_norm,
  layer_norm_backward,
  multiscale_forward,
  multiscale_backward,
};

/// The op's name as the command line and the database write it ("attention-forward", ...).
const char* tuned_op_name(TunedOp op);
/// Parses an op name; throws InvalidArgument(`argument`) listing the tunable ops otherwise.
TunedOp parse_tuned_op(const std::string& name, const std::string& argument = "op");

/// One shape to tune for: the op, the element type and the call's attention problem (for
/// attention-decode: seqlen_q the query tokens per sequence, seqlen_k the context), or for
/// the layer norm ops the call's rows, columns, norm and fused adds (`attention` unused).
struct TuningProblem {
  TunedOp op = TunedOp::attention_forward;
  DType dtype = DType::bf16;
  Attention attention;
  /// attention-decode: where the keys and values are (a paged cache, per-sequence lengths).
  kernels::CacheLayout cache;
  /// attention-decode: the SMs the default's split count fills (the device's; 0 takes the
  /// arch's usual count, as `flashjit autotune --plan` does without a device).
  int sm_count = 0;
  /// layernorm, layernorm-backward: the shape of x and what the call fuses.
  kernels::LayerNormShape norm;
  /// multiscale-forward, multiscale-backward: the mask (the sizes are `attention`'s).
  MultiScaleMask multiscale_mask = MultiScaleMask::decay;
};

/// A problem of `op` on `dtype` tensors for `attention`, the other fields at their defaults.
TuningProblem make_problem(TunedOp op, DType dtype, const Attention& attention = {});

/// The database key of `problem` (mask kind and softcap as the call needs them, the active
/// templates' digest, bucketed sizes; for attention-decode the cache layout, batch, context,
/// key/value heads and query heads per key/value head; for the layer norm ops the columns,
/// rows, norm and fused adds).
TuningKey tuning_key(const TuningProblem& problem);

/// FLOPs of one call as FlashAttention's benchmarks count them: 4 · batch · heads_q ·
/// seqlen_q · seqlen_k · head_dim for the forward (two matrix products), halved for causal;
/// a sliding window counts the (query, key) pairs it keeps. The backward is 2.5 times that.
/// 0 for the layer norm ops, which problem_bytes measures.
double problem_flops(const TuningProblem& problem);

/// The bytes one call of a memory-bound op moves, what bounds it (0 for the attention forward
/// and backward): attention-decode's keys and values read; a layer norm's tensors read and
/// written once each (forward: x, residual, bias, gamma, beta; y, sum, mean, rstd; backward: x,
/// dy, gamma, mean, rstd; dx, dgamma, dbeta, dbias), not its backward's fp32 partials.
double problem_bytes(const TuningProblem& problem);

/// Whether `problem` has no work to time (no batch, query or key; no row).
bool problem_empty(const TuningProblem& problem);

/// A config of any op (the forward's, the backward's, attention-decode's, the layer norms').
using TunedConfig =
    std::variant<kernels::ForwardConfig, kernels::BackwardConfig, kernels::InferenceConfig,
                 kernels::LayerNormConfig, kernels::LayerNormBackwardConfig,
                 kernels::MultiScaleForwardConfig, kernels::MultiScaleBackwardConfig>;

/// The config's name in the database and tables: "br128.bc64.w4.s2" (forward; ".qreg" added
/// when Q stays in registers, ".wgmma" or ".tma" for the Hopper paths' kernels, then ".overlap",
/// ".pingpong", ".pshared", ".persistent" and ".cluster2" for the TMA path's schedule, P's
/// place, its tile loop and 2-CTA clusters), "br64.bc128.w8.s2"
/// (backward: the dK/dV kernel's tile), "br64.bc128.w8.s2.dq.br64.bc64.w4" (deterministic backward:
/// and the dQ kernel's), "br64.bc64.w4.s2.splits8" (attention-decode: the tile and the split
/// count; the layout flags follow from the key), "c4096.t128.v4" (layer norm, forward or
/// backward: the row-length bucket, "cany" for the unbounded one, threads per row, vector
/// width; dtype and norm follow from the key); the multi-scale ops' are their attention
/// tiles' names (the mask follows from the key).
std::string config_name(const TunedConfig& config);

/// Every kernel a call of `config` launches on `arch`, in launch order.
std::vector<detail::KernelSpec> config_specs(const TunedConfig& config, const std::string& arch);

/// The heuristic default for `problem` on `arch` (what policy off runs; attention-decode's
/// split count as choose_splits picks it for the problem's sm_count).
TunedConfig default_config(const TuningProblem& problem, const std::string& arch);

/// Every config of the problem's space (dtype, head dim, mask kind, softcap; attention-decode:
/// decode_configs; the layer norm ops: layer_norm_configs of the dtype and norm, every bucket),
/// in the space's fixed order.
std::vector<TunedConfig> space_configs(const TuningProblem& problem);

/// One candidate and what the tuner learned about it.
struct Candidate {
  TunedConfig config;
  std::string name;                              ///< config_name(config)
  bool is_default = false;                       ///< the heuristic default for this shape and arch
  std::vector<detail::KernelSpec> specs;         ///< every kernel a call of this config launches
  int shared_bytes = 0;                          ///< dynamic shared memory per block
  int threads = 0;                               ///< threads per block
  std::vector<detail::ResourceUsage> resources;  ///< per spec, once compiled
  /// Why it was dropped ("shared memory 180 KB > 163 KB", "spills 48 B in dq"); empty while
  /// it is still in the running.
  std::string pruned;
};

/// The candidate of `config` on `arch`, its kernels listed and not yet compiled.
Candidate make_candidate(const TunedConfig& config, const std::string& arch);

/// The configs of the problem's space (dtype, head dim, mask kind, softcap) the tuner times, in
/// the space's fixed order, with the heuristic default for `arch` marked: every config, but for
/// the deterministic backward only those that share the default's dK/dV tile or its dQ tile
/// (the two kernels' times add up independently; tune() then times the pair of the fastest).
/// For attention-decode the default is added when its split count is not among the space's.
std::vector<Candidate> enumerate_candidates(const TuningProblem& problem, const std::string& arch);

/// Why `config` cannot run `problem` at all ("" when it can): a layer norm bucket shorter than
/// the row. Such a config is pruned, and never taken from the database.
std::string cannot_run(const TunedConfig& config, const TuningProblem& problem);

/// Static pruning, before any compile: shared memory over `shared_limit` (the device's opt-in
/// limit, or the arch's with --plan), configs that cannot_run the problem, and tiles larger
/// than the problem (Br past the query length's bucket, Bc past the key length's, when the
/// space has a smaller tile; for attention-decode, Br past the packed rows, and more splits
/// than key blocks; for the layer norm ops, a bounded bucket past the smallest one that holds
/// the row). The default is never pruned for size: it is the baseline every winner must beat.
void prune_static(std::vector<Candidate>& candidates, const TuningProblem& problem,
                  int shared_limit);

/// Resident blocks per SM for a kernel of `threads` threads using `registers` per thread and
/// `shared_bytes` of shared memory, on an arch with 64K registers and 2048 threads per SM
/// (1536 on sm_86/sm_89) and `shared_limit` bytes of shared memory; 0 when it cannot run.
int blocks_per_sm(int registers, int threads, int shared_bytes, int shared_limit,
                  const std::string& arch);

/// Compiles every spec of the candidates still in the running through the kernel cache on
/// `jobs` workers (a spec compiled before is a cache hit), records the resource reports and
/// prunes those that spill, carry a ptxas performance advisory (ResourceUsage::advisories: a
/// serialized wgmma pipeline, say, which no timing should have to discover), cannot be resident
/// (zero occupancy), or fail to compile.
/// `progress(done, total)` is called on the calling thread after each spec.
void prune_on_resources(std::vector<Candidate>& candidates, const std::string& arch,
                        int shared_limit, int jobs,
                        const std::function<void(int, int)>& progress = {});

/// Why prune_on_resources drops a candidate with kernel `spec` that compiled to `resources`
/// ("spills 48 B in dq", "ptxas advisory in forward: C7514: ...", "zero occupancy in ..."), or
/// "" when that kernel may be timed.
std::string resource_problem(const detail::KernelSpec& spec, const detail::ResourceUsage& resources,
                             int shared_limit, const std::string& arch);

}  // namespace flashjit::autotune

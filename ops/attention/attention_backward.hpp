#pragma once
// Host side of the attention backward op: its configs (the host mirror of
// ops/attention/fa2/backward_space.cuh), the heuristic default, kernel specs, argument
// validation, and the launch sequence: D = rowsum(dO ∘ O), then dK and dV (and dQ's sum), then
// dQ (the mma.sync kernels' deterministic mode: its own kernel; else the sum rounded). dK and
// dV are written without atomics; with Attention::deterministic dQ is computed without them
// (mma.sync) or summed in a fixed order (the TMA backward).
#include <cstddef>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/fa2/backward_space.cuh"
#include "attention/parts/backward_params.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/device.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// The dK/dV kernel's tile (BackwardKeyTraits): Br query rows streamed per step past Bc keys,
/// over `warps` warps, with `stages` Q/dO buffers.
struct KeyBlockTile {
  int block_m = 64;   ///< query rows per streamed block (Br)
  int block_n = 128;  ///< keys per CTA (Bc)
  int warps = 8;
  int stages = 2;
  bool operator==(const KeyBlockTile&) const = default;
};

/// The dQ kernel's tile (BackwardQueryTraits, deterministic mode): Br query rows per CTA, Bc
/// keys per streamed block, over `warps` warps.
struct QueryBlockTile {
  int block_m = 64;  ///< query rows per CTA (Br)
  int block_n = 64;  ///< keys per streamed block (Bc)
  int warps = 4;
  bool operator==(const QueryBlockTile&) const = default;
};

/// One specialization of the backward kernels. The two main kernels have spaces of their own;
/// the dQ kernel's tile means something only when `deterministic` (and is the default
/// QueryBlockTile otherwise, so equal configs run the same kernels).
struct BackwardConfig {
  DType dtype = DType::bf16;  ///< f16 or bf16
  int head_dim = 64;
  MaskKind mask = MaskKind::none;
  bool softcap = false;
  bool deterministic = false;  ///< Attention::deterministic: a dQ kernel instead of atomic adds
  KeyBlockTile key;            ///< the dK/dV kernel
  QueryBlockTile query;        ///< the dQ kernel (deterministic only)
  /// A variable-length batch (cu_seqlens): each CTA rebases the params to its own sequence
  /// (ops/attention/parts/backward_sequence.cuh).
  bool varlen = false;
  /// The warp-specialized Hopper dK/dV kernel (sm_90a, attention/hopper/tma_backward_kernel.cuh):
  /// wgmma on TMA-loaded tiles, dQ's sum added by bulk reductions. key.block_n (Bc, 64 or 128)
  /// keys over one consumer warpgroup per 64 (key.warps 8 or 12), or 64 keys shared by two
  /// (key.warps 12: shared_keys(), the form above a padded head dim of 128), key.stages (1 or
  /// 2) Q/dO slots; key.block_m (Br) is 64, or 128 at a padded head dim of 64 with keys of each
  /// warpgroup's own (tma_backward_block_m_valid), and key.warps counts the producer
  /// warpgroup's 4 too. Head
  /// dims 64 to 256, both dQ modes (deterministic: its sums take turns), packed sequences;
  /// sm_90a only (runs_on): its default there from head dim 64 (default_backward_config), and
  /// in its tuning space.
  bool tma = false;
  bool operator==(const BackwardConfig&) const = default;

  /// Whether the templates accept this config (attention_backward_space::key_kernel_valid, and
  /// query_kernel_valid when deterministic, a 16-bit dtype, the default query tile otherwise).
  bool valid() const;
  /// Dynamic shared memory of a dK/dV block.
  int key_shared_bytes() const;
  /// Dynamic shared memory of a dQ block (0 without a dQ kernel: has_query_kernel).
  int query_shared_bytes() const;
  /// Whether dQ has a kernel of its own (the mma.sync kernels' deterministic mode); otherwise
  /// the dK/dV kernel sums it into a workspace and the dQ-convert kernel rounds it.
  bool has_query_kernel() const;
  /// The larger of the two: what the device must grant a block.
  int shared_bytes() const;
  /// Whether the TMA backward's two consumer warpgroups share Bc = 64 keys (12 warps over 64).
  bool shared_keys() const { return tma && key.block_n == 64 && key.warps == 12; }
};

/// Query rows per block of the delta and dQ-convert kernels (declared beside the template's
/// space).
using attention_backward_space::kDeltaRowsPerBlock;

/// Whether `config` can run on `arch`: the TMA backward needs sm_90a (runs_wgmma), the
/// mma.sync kernels run everywhere.
bool runs_on(const BackwardConfig& config, const std::string& arch);

/// Every valid config for (dtype, head_dim, mask, softcap, deterministic), in a fixed order:
/// dK/dV tiles by Br, Bc, warps and stages ascending, and when deterministic each of them with
/// every dQ tile (Br, Bc, warps ascending); then the TMA backward's (Bc, then stages,
/// ascending), which only sm_90a runs: see runs_on. Empty when the dtype or head dim is not
/// supported.
std::vector<BackwardConfig> backward_configs(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                             bool deterministic);

/// The heuristic config for (dtype, head_dim, mask, softcap, deterministic) on `arch` (until the
/// autotuner): on sm_90a from head dim 64, the TMA backward in both dQ modes: to a padded head
/// dim of 128 with Bc 128 and two stages, above it and at 128 with softcap with two warpgroups
/// sharing Bc 64 (two stages where they fit, one at 256); otherwise fallback_backward_config. No
/// default spills registers on sm_80 or sm_90a (NVRTC 13.0;
/// tests/ops/test_attention_backward_compile.cpp checks the registry's matrix). Throws
/// InvalidArgument("head_dim") or ("dtype") for a dim or dtype the kernels lack, ("arch") for an
/// arch flashjit cannot target.
BackwardConfig default_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                       bool deterministic, const std::string& arch);

/// The mma.sync kernels' heuristic config, which runs on every arch and every call (varlen
/// batches, tensors TMA cannot read): the first tile of each kernel's preference list
/// (preferred_key_tiles and preferred_query_tiles in attention_backward.cpp) that is valid and
/// fits the arch's shared memory (arch_shared_memory_limit), else the config with the least
/// shared memory. Throws as default_backward_config.
BackwardConfig fallback_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                        bool deterministic, const std::string& arch);

/// The config a backward with score or mask modifiers runs untuned (the default of its tuning
/// problem, and the variable-length backward's): default_backward_config's, except that on
/// sm_90a the TMA backward's two warpgroups share their keys from a padded head dim of 128 (as
/// with softcap: each score's slope through score_mod takes registers that Bc = 128 lacks
/// there). tests/ops/test_attention_backward_compile.cpp compiles it with NVRTC for sm_80 and
/// sm_90a at head dims 64, 128 and 256 in both dQ modes and checks that none spills.
BackwardConfig modifiers_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                         bool deterministic, const std::string& arch);
/// modifiers_backward_config for a call: its head dim, mask kind, softcap and dQ mode.
BackwardConfig modifiers_backward_config(DType dtype, const Attention& attention,
                                         const std::string& arch);

/// The kernels one backward call launches, in order.
struct BackwardSpecs {
  detail::KernelSpec delta;  ///< attention_backward_delta_kernel<T>: D (and zeroes dQ's sum)
  /// attention_backward_dkdv_kernel<BackwardKeyTraits> (or attention_backward_tma_kernel): dK
  /// and dV, and dQ's sum unless BackwardConfig::has_query_kernel
  detail::KernelSpec dkdv;
  /// attention_backward_dq_kernel<BackwardQueryTraits> with has_query_kernel, else
  /// attention_backward_dq_convert_kernel<T, varlen, tma> (dQ = scale · the sum, rounded)
  detail::KernelSpec dq;
  /// All three in launch order: delta, dK/dV, then dQ.
  std::vector<detail::KernelSpec> in_order() const { return {delta, dkdv, dq}; }
};

/// The specs of `config` for target `arch`: op "attention-backward", readable names such as
/// "attention_backward.delta.bf16", "attention_backward.dkdv.hdim128.bf16.window.br64.bc128.w8.s2"
/// (".softcap" after the mask when on; ".atomic_dq" when it sums dQ), and
/// "attention_backward.dkdv.hdim128.bf16.br64.bc128.w12.s1.tma" (".deterministic" after
/// ".tma" in that mode), "attention_backward.dq.hdim128.bf16.window.br64.bc64.w4" (with a dQ
/// kernel) or
/// "attention_backward.dq_convert.bf16" (".permuted" for the TMA backward, which adds dQ's sums
/// in the layout of attention/parts/dq_accum_layout.cuh). Throws InvalidArgument("config") outside
/// the space. With `modifiers` (mma.sync configs only; InvalidArgument("config") for a TMA one),
/// the dK/dV and dQ kernels' traits end with their struct, which each spec's prelude defines,
/// and their readable names with "mod" and 8 digits of the modifiers' digest.
BackwardSpecs backward_specs(const BackwardConfig& config, const std::string& arch,
                             const ScoreModifiers& modifiers = {});

/// Each gradient (dq, dk, dv, and the gradients of attention's captures:
/// check_capture_gradients_disjoint) writes every element once and shares no memory with an
/// input or another gradient: throws InvalidArgument naming the pair.
void check_gradients_disjoint(const Attention& attention, const TensorView& q, const TensorView& k,
                              const TensorView& v, const TensorView& o, const TensorView& lse,
                              const TensorView& dout, const TensorView& dq, const TensorView& dk,
                              const TensorView& dv);

/// Launches the backward of a validated variable-length batch (config.varlen set): the tensors
/// are the kernels' views (packed ones as batch 1 with batch stride 0, lse as [1, heads_q,
/// total_q] with batch stride 0), the offsets those of `sequences` (cu_seqlens_q, cu_seqlens_k).
/// `index_buffers` are the index arrays `sequences` points into, for the emulator's checks. A
/// TMA config (sm_90a) whose tensors TMA cannot read runs the mma.sync default instead.
void launch_attention_backward_sequences(
    detail::RuntimeBackend& backend, const Attention& attention, const SequenceIndex& sequences,
    const std::vector<detail::KernelBuffer>& index_buffers, const TensorView& q,
    const TensorView& k, const TensorView& v, const TensorView& o, const TensorView& lse,
    const TensorView& dout, const TensorView& dq, const TensorView& dk, const TensorView& dv,
    BackwardConfig config, Stream stream);

/// Checks backward's arguments (see Runtime::backward); throws InvalidArgument naming the
/// first bad one ("dout", "lse.shape", "dk", ...). Nothing is launched or written.
void validate_backward_arguments(const Attention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& o,
                                 const TensorView& lse, const TensorView& dout,
                                 const TensorView& dq, const TensorView& dk, const TensorView& dv);

/// Throws InvalidArgument("config") unless `config` is valid and can run the validated call
/// (as check_forward_config: same dtype, head dim and softcap, a mask kind covering the call's).
void check_backward_config(const BackwardConfig& config, const Attention& attention,
                           const TensorView& q);

/// Whether a backward call of `attention` has nothing to write (batch 0, or no query and no
/// key): a successful no-op. With seqlen_q 0 alone, dK and dV are written as zeros (no query
/// sees a key); with seqlen_k 0 alone, dQ is.
bool backward_is_empty(const Attention& attention);

/// Bytes of the fp32 workspace D = rowsum(dO ∘ O), [batch, heads_q, seqlen_q] contiguous.
std::size_t backward_delta_bytes(const Attention& attention);

/// Bytes of the TMA backward's row statistics in place of D (AttentionBackwardParams::row_stats:
/// row_stats_blocks of 64 rows' LSEs and Ds; attention/parts/row_stats.cuh).
std::size_t backward_row_stats_bytes(const Attention& attention);

/// Bytes of the fp32 workspace dQ is summed in, [batch, heads_q, seqlen_q, head_dim]
/// contiguous; 0 when `config` computes dQ in a kernel of its own (has_query_kernel).
std::size_t backward_dq_accum_bytes(const Attention& attention, const BackwardConfig& config);

/// Bytes of the turn counters of the TMA backward's deterministic mode
/// (AttentionBackwardParams::dq_semaphore: an int32 per 64-row query block of each batch and
/// query head); 0 for any other config.
std::size_t backward_dq_semaphore_bytes(const Attention& attention, const BackwardConfig& config);

/// The kernels' arguments for a validated call: every field AttentionForwardParams has too is
/// filled exactly as forward_params fills it; `delta` and `dq_accum` are the workspaces of
/// backward_delta_bytes and backward_dq_accum_bytes (nullptr when that is 0); dq_semaphore is
/// left nullptr for the caller to set.
AttentionBackwardParams backward_params(const Attention& attention, const TensorView& q,
                                        const TensorView& k, const TensorView& v,
                                        const TensorView& o, const TensorView& lse,
                                        const TensorView& dout, const TensorView& dq,
                                        const TensorView& dk, const TensorView& dv, float* delta,
                                        float* dq_accum);

/// Grid, block and shared memory of each launch for a validated call.
struct BackwardLaunchShapes {
  /// (ceil(seqlen_q / kDeltaRowsPerBlock), heads_q, batch), kDeltaRowsPerBlock warps, no
  /// shared memory.
  detail::LaunchShape delta;
  /// (ceil(seqlen_k / Bc), heads_kv, batch), the dK/dV tile's warps and shared memory.
  detail::LaunchShape dkdv;
  /// Deterministic: (ceil(seqlen_q / Br), heads_q, batch), the dQ tile's warps and shared
  /// memory; otherwise the convert kernel's, shaped like delta.
  detail::LaunchShape dq;
};
BackwardLaunchShapes backward_launch_shapes(const BackwardConfig& config,
                                            const Attention& attention, Stream stream);

/// Runtime::backward with an explicit config (tests, the autotuner) on `backend`. The config
/// must match the call's dtype, head dim, mask kind and softcap (InvalidArgument("config")
/// otherwise) and fit the device's shared memory. The delta workspace is allocated in
/// `stream`'s order and freed in it: the call returns once the kernels are queued.
void attention_backward(detail::RuntimeBackend& backend, const Attention& attention,
                        const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& o, const TensorView& lse, const TensorView& dout,
                        const TensorView& dq, const TensorView& dk, const TensorView& dv,
                        const BackwardConfig& config, Stream stream);

}  // namespace flashjit::kernels

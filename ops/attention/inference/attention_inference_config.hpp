#pragma once
// The configs of the forward's inference calls (Runtime::forward with Sequences): the layout a
// call's index arrays ask for, its split count, the heuristic default, and the decoding space
// the autotuner searches (attention-decode, bucketed by batch, context and heads per KV head).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention/attention_forward.hpp"
#include "flashjit/attention.hpp"

namespace flashjit::kernels {

/// The most splits of one query block's keys (FlashAttention caps at 128, vLLM's CUDA graphs
/// at 16; the merge reads every partial, so more only helps on very long contexts).
inline constexpr int kMaxSplits = 64;

/// The most query tokens per sequence of a call that decodes (one token, or up to 16 with
/// speculative decoding): such calls ask ConfigChoice::decode_config, so the autotuner can
/// pick their tile and split count.
inline constexpr std::int64_t kMaxDecodeQueries = 16;

/// Where a call's keys and values are, as far as its kernel depends on it.
struct CacheLayout {
  bool varlen = false;         ///< per-sequence lengths or offsets (any index array is given)
  std::int64_t page_size = 0;  ///< keys per page of a paged cache; 0 when not paged
  bool kv_e4m3 = false;        ///< an fp8 e4m3 cache (Sequences::k_descale)
  /// v is k's first head_dim_v columns in the same memory (same address and strides: MLA's
  /// latent cache); the wide path then loads K's blocks once for both products.
  bool values_in_keys = false;
  bool operator==(const CacheLayout&) const = default;
};

/// The layout of a call with `sequences`, whose k has pages of `page_size` keys when paged and
/// elements of `kv_dtype` (values_in_keys false: see values_in_keys).
CacheLayout cache_layout(const Sequences& sequences, std::int64_t page_size, DType kv_dtype);

/// Whether v (as the kernels view it: rank 4) is k's first columns: the same address, dtype and
/// strides.
bool values_in_keys(const TensorView& k, const TensorView& v);

/// Whether a call of `attention` takes the wide path: a head dim past the mma.sync path's 256.
bool runs_wide(const Attention& attention);

/// How one inference call runs: the mma.sync forward config with the call's layout flags, and
/// how many CTAs share each query block's keys (the config's `split` is splits > 1).
struct InferenceConfig {
  ForwardConfig forward;
  int splits = 1;
  bool operator==(const InferenceConfig&) const = default;
  /// Bytes of dynamic shared memory of the forward kernel (the merge uses none).
  int shared_bytes() const { return forward.shared_bytes(); }
};

/// Query heads per packed query position: the heads that share a key/value head, packed into
/// one tile's rows where one head's queries would leave a 64-row tile mostly empty
/// (heads_q > heads_kv and seqlen_q < 64); else 1.
int packed_group(const Attention& attention);

/// Query blocks per (key/value head or query head, sequence): ceil(seqlen_q · group / Br).
std::int64_t query_blocks(const InferenceConfig& config, const Attention& attention);

/// `tile` (a config of the mma.sync space) with the layout flags of a call of `attention` on
/// `layout`, split `splits` ways.
InferenceConfig with_layout(ForwardConfig tile, const Attention& attention, CacheLayout layout,
                            int splits);

/// The splits for `blocks` CTAs per split over `key_blocks` key blocks on `sm_count` SMs when
/// the call asks for 0: enough CTAs to fill the SMs once, at least `least_blocks` key blocks per
/// split (2), at most kMaxSplits; 1 where the grid fills the SMs already.
int choose_splits(std::int64_t blocks, std::int64_t key_blocks, int sm_count,
                  std::int64_t least_blocks = 2);

/// The fewest key blocks a split of `config` reads on the wide path: enough that the K bytes
/// it reads are at least the bytes of its fp32 partial O, written and read back by the merge
/// (Br · head_dim_v · 8), which at MLA's 512 columns outweigh a few blocks' keys; 2 elsewhere.
std::int64_t least_blocks_per_split(const ForwardConfig& config);

/// The heuristic config of a call of `attention` on `dtype` tensors and `layout`, on `arch`
/// with `sm_count` SMs: mma_sync_forward_config for the packed rows (wide_forward_config where
/// runs_wide), split `splits` ways, or by choose_splits when `splits` is 0.
InferenceConfig default_inference_config(const Attention& attention, CacheLayout layout,
                                         DType dtype, const std::string& arch, int sm_count,
                                         int splits);

/// Whether a call of `attention` on `layout` runs on the decode kernel
/// (attention/decode/decode_kernel.cuh): a decoding call (at most kMaxDecodeQueries query
/// tokens) whose packed rows (tokens times the GQA group) fit 32, on a 16-bit or an fp8 cache,
/// with or without score and mask modifiers, within the mma.sync head dims.
bool runs_decode_kernel(const Attention& attention, CacheLayout layout);

/// The decode kernel's tiles the autotuner times for (dtype, head_dim, mask, softcap) with
/// `rows` packed rows a CTA (16 or 32): 16 and 32 keys a chunk, 4 and 8 warps, 2, 4 and 6
/// stages, the valid ones over a 16-bit or (`kv_e4m3`) an fp8 cache, without layout flags
/// (with_layout gives them the call's; decode/decode_forward.cpp).
std::vector<ForwardConfig> decode_forward_tiles(DType dtype, int head_dim, MaskKind mask,
                                                bool softcap, int rows, bool kv_e4m3 = false);

/// The decode kernel's default for a call whose CTAs have `rows` packed rows on `arch`: 16 rows
/// (32 past 16), 16-key chunks, 4 warps (2 where 4 do not fit), the most stages up to 6 that
/// fit the arch's shared memory over a 16-bit or (`kv_e4m3`) an fp8 cache, without layout
/// flags; std::nullopt where none fits.
std::optional<ForwardConfig> decode_forward_config(DType dtype, int head_dim, MaskKind mask,
                                                   bool softcap, const std::string& arch,
                                                   std::int64_t rows, bool kv_e4m3 = false);

/// The splits of a decode-kernel call of `ctas` CTAs per split over `key_rounds` rounds of its
/// warps' chunks on `sm_count` SMs (0: the call asks the library): as many as keep the grid
/// within one wave of one CTA per SM (the kernel's shared memory allows one), at least two rounds
/// a split, at most kMaxSplits; 1 where the grid fills the SMs already.
int choose_decode_splits(std::int64_t ctas, std::int64_t key_rounds, int sm_count);

/// The split counts the autotuner times for a decoding call (beside the default's).
inline constexpr int kDecodeSplits[] = {1, 2, 4, 8, 16};

/// The decoding space of a call's class: every mma.sync config of (dtype, head dim, mask,
/// softcap) with the call's layout flags, then (where runs_decode_kernel) the decode kernel's
/// tiles, each times kDecodeSplits, in that order.
std::vector<InferenceConfig> decode_configs(const Attention& attention, CacheLayout layout,
                                            DType dtype);

/// Every kernel a call of `config` launches on `arch`: the forward, and the merge of the split
/// partials when it splits (not on the decode kernel, which merges them itself).
std::vector<detail::KernelSpec> inference_specs(const InferenceConfig& config,
                                                const std::string& arch);

/// The TMA forward's kernel for packed (varlen) prefill on `arch`: the TMA default of the dtype,
/// head dim, mask and softcap, with varlen and one CTA per tile; over an fp8 cache (`kv_e4m3`)
/// with the widest key block that leaves shared memory for its staging slots. std::nullopt
/// where the TMA path has no such tile (any arch but sm_90a).
std::optional<ForwardConfig> packed_prefill_tma_config(DType dtype, int head_dim, MaskKind mask,
                                                       bool softcap, const std::string& arch,
                                                       bool kv_e4m3 = false);

/// The inference layouts' default kernels at (dtype, head_dim, mask) on `arch`, for the compile
/// matrix: variable lengths (prefill; on sm_90a the TMA forward's too), GQA-packed decoding, and
/// paged decoding and prefill, each with and without split-KV where the layout splits.
std::vector<ForwardConfig> inference_forward_configs(DType dtype, int head_dim, MaskKind mask,
                                                     const std::string& arch);

}  // namespace flashjit::kernels

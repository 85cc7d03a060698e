#pragma once
// Host side of the attention forward op: its configs (the host mirror of
// ops/attention/fa2/forward_space.cuh), the heuristic default, kernel specs, argument
// validation, the kernel's arguments and the launch.
#include <cstddef>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "attention/fa2/forward_space.cuh"
#include "attention/modifiers/score_modifiers.hpp"
#include "attention/parts/forward_params.cuh"
#include "attention/parts/mask_kind.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/device.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/device_context.hpp"
#include "runtime/executor.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// Which forward kernel a config runs.
enum class ForwardPath {
  /// ops/attention/fa2/forward_kernel.cuh (ForwardTraits): mma.sync, cp.async; every arch.
  mma_sync,
  /// wgmma_forward_kernel.cuh (WgmmaForwardTraits), sm_90a only: warpgroups of 64 query rows
  /// on wgmma, cp.async loads, one K/V stage, warps = Br / 16.
  wgmma,
  /// tma_forward_kernel.cuh (TmaForwardTraits), sm_90a only: FlashAttention-3's structure, a
  /// producer warpgroup's TMA loads into a ring of `stages` K/V slots, consumer warpgroups on
  /// wgmma, O stored by TMA; warps = Br / 16 + 4. It needs tensors TMA can read (16-byte
  /// aligned, strides multiples of 16 bytes); the default choice falls back where they are not.
  tma,
  /// wide_forward_kernel.cuh (WideForwardTraits), every arch: head dims past the mma.sync
  /// path's 256 (up to 576, MLA's absorbed decoding), the warps of each 16-row slab splitting
  /// O's columns (`column_groups` of them); warps = Br / 16 · column_groups. The inference
  /// forward runs it (any layout but an fp8 cache).
  wide,
  /// decode_kernel.cuh (DecodeTraits), every arch: decoding's few packed rows (block_m 16 or
  /// 32) against a long cache, each warp streaming its own chunks of block_n keys through a
  /// ring of `stages` cp.async slots, the warps merged at the end and split-KV's partials by the
  /// last split in the same launch. The inference forward runs it for decoding calls on 16-bit
  /// caches without modifiers.
  decode,
  /// fp8/fp8_forward_kernel.cuh (Fp8ForwardTraits), sm_89 on: the fp8 forward (q, k and v
  /// e4m3, o bf16), FlashAttention-2's loop with both products on mma.sync's e4m3 m16n8k32;
  /// two K/V stages, dense batches. Its configs hold dtype e4m3 and no other path's do.
  fp8,
};

/// The mma.sync path's own choice (ForwardTraits).
struct Fa2Options {
  /// Each warp keeps its Q rows in registers, read from shared memory once, instead of reading
  /// them for every key block (where attention_forward_space::config_valid finds registers).
  bool q_in_registers = false;
  bool operator==(const Fa2Options&) const = default;
};

/// The wgmma path has no choice of its own beyond the tile every path has.
struct WgmmaOptions {
  bool operator==(const WgmmaOptions&) const = default;
};

/// The TMA path's schedule (TmaForwardTraits).
struct TmaOptions {
  /// The softmax of each key block runs under the previous block's O += P V (FlashAttention-3's
  /// intra-warpgroup overlap; two stages).
  bool overlap = false;
  /// With two consumer warpgroups (Br 128) and overlap: they take turns issuing their products,
  /// so one's softmax runs under the other's (FlashAttention-3's pingpong).
  bool pingpong = false;
  /// With Bc a multiple of 64: O += P V reads P from shared memory (wgmma's SS form) instead of
  /// registers (RS), which frees registers (FlashAttention-3 takes it up to head dim 96 with
  /// three consumer warpgroups).
  bool p_in_shared = false;
  /// With overlap (the space has it with P in registers): one CTA per SM walks the (query
  /// block, head, batch) tiles, longest causal ones first, instead of one CTA per tile
  /// (ops/attention/hopper/tma_tile_schedule.cuh).
  bool persistent = false;
  /// Unmasked, one CTA per tile, dense: CTAs in clusters of two, consecutive query blocks of one
  /// (head, batch), each loading half of every K and V block and multicasting it to both, so
  /// each reads half its K and V from global memory (FlashAttention-3's 2-CTA clusters). A CTA
  /// past the last query block (an odd count) walks the keys with its peer and writes nothing;
  /// the default choice runs the unclustered twin there instead.
  bool cluster = false;
  bool operator==(const TmaOptions&) const = default;
};

/// The wide path's split of O's columns (WideForwardTraits).
struct WideOptions {
  /// V's and O's head dim, a compile-time constant here (O's registers are sized by it); the
  /// other paths read it at run time.
  int head_dim_v = 0;
  /// The warps of a 16-row slab, each with its share of O's columns (2 or 4).
  int column_groups = 0;
  /// V is K's first head_dim_v columns in the same memory (MLA's latent cache, v a view of k),
  /// so K's blocks are loaded once for both products (two stages).
  bool values_in_keys = false;
  /// On wgmma (sm_90a, wide/wide_wgmma_kernel.cuh): 64 rows, two consumer warpgroups each
  /// holding half of O's columns, K blocks by cp.async into swizzled tiles; V in the keys only
  /// (MLA's absorbed decoding). column_groups is then the warpgroups (2), warps 8.
  bool warpgroups = false;
  bool operator==(const WideOptions&) const = default;
};

/// The decode kernel has no choice of its own beyond the tile (rows, keys a chunk, warps,
/// stages of each warp's ring).
struct DecodeOptions {
  bool operator==(const DecodeOptions&) const = default;
};
/// The fp8 forward's kernel: mma.sync's (attention/fp8/fp8_forward_kernel.cuh, sm_89 on) or,
/// on sm_90a, TMA and wgmma's (attention/fp8/fp8_tma_kernel.cuh: Bc 128, two stages, a
/// producer warpgroup counted in the warps), with pingpong between its two consumer warpgroups
/// as the TMA path's (TmaOptions::pingpong; Br 128 up to a padded head dim of 128).
struct Fp8Options {
  bool tma = false;
  bool pingpong = false;
  bool operator==(const Fp8Options&) const = default;
};
/// A config's path and that path's own choices: the alternative held is the path (in
/// ForwardPath's order), so no path carries another's options.
using PathOptions =
    std::variant<Fa2Options, WgmmaOptions, TmaOptions, WideOptions, DecodeOptions, Fp8Options>;
static_assert(
    std::is_same_v<
        std::variant_alternative_t<static_cast<std::size_t>(ForwardPath::tma), PathOptions>,
        TmaOptions> &&
    std::is_same_v<
        std::variant_alternative_t<static_cast<std::size_t>(ForwardPath::wide), PathOptions>,
        WideOptions> &&
    std::is_same_v<
        std::variant_alternative_t<static_cast<std::size_t>(ForwardPath::decode), PathOptions>,
        DecodeOptions> &&
    std::is_same_v<
        std::variant_alternative_t<static_cast<std::size_t>(ForwardPath::fp8), PathOptions>,
        Fp8Options>);

/// One specialization of the forward kernel (the traits of ForwardPath's template): the tile
/// every path has, the path with its own options, and the inference layouts.
struct ForwardConfig {
  DType dtype = DType::bf16;  ///< f16 or bf16; e4m3 on the fp8 path (its o is bf16)
  int head_dim = 64;
  int block_m = 128;  ///< Br
  int block_n = 64;   ///< Bc
  int warps = 4;
  int stages = 2;
  MaskKind mask = MaskKind::none;
  bool softcap = false;
  /// The path (which kernel runs) and its own options; the mma.sync path by default.
  PathOptions options = Fa2Options{};
  /// Inference layouts (ops/attention/parts/sequence_layout.cuh): per-sequence lengths and
  /// offsets, K/V in pages, the query heads of a key/value head packed into rows, and split-KV
  /// partials; all on the mma.sync path, and varlen alone (packed prefill, not persistent) on
  /// the TMA path too. All false: FlashAttention-2's dense batch.
  bool varlen = false;
  bool paged = false;
  bool pack_gqa = false;
  bool split = false;
  /// K and V are an fp8 e4m3 cache (with varlen: on the mma.sync path with two stages, or the
  /// TMA path's packed kernel): their blocks are converted to `dtype` in shared memory and the
  /// descale factors applied in fp32.
  bool kv_e4m3 = false;
  bool operator==(const ForwardConfig&) const = default;

  /// Which kernel runs.
  ForwardPath path() const { return static_cast<ForwardPath>(options.index()); }

  /// The paths' own options as the kernels' traits read them: each is false (or 0) on the paths
  /// without it.
  bool q_in_registers() const { return own<Fa2Options>().q_in_registers; }
  bool overlap() const { return own<TmaOptions>().overlap; }
  bool pingpong() const { return own<TmaOptions>().pingpong || own<Fp8Options>().pingpong; }
  bool p_in_shared() const { return own<TmaOptions>().p_in_shared; }
  bool persistent() const { return own<TmaOptions>().persistent; }
  bool cluster() const { return own<TmaOptions>().cluster; }
  int head_dim_v() const { return own<WideOptions>().head_dim_v; }
  int column_groups() const { return own<WideOptions>().column_groups; }
  bool values_in_keys() const { return own<WideOptions>().values_in_keys; }
  bool warpgroups() const { return own<WideOptions>().warpgroups; }
  bool fp8_tma() const { return own<Fp8Options>().tma; }

  /// The options of the path the config is on, to change them; std::bad_variant_access on
  /// another path.
  Fa2Options& fa2() { return std::get<Fa2Options>(options); }
  TmaOptions& tma() { return std::get<TmaOptions>(options); }
  WideOptions& wide() { return std::get<WideOptions>(options); }

  /// CTAs of a cluster: 2 with `cluster`, else 1.
  int cluster_blocks() const { return cluster() ? 2 : 1; }
  /// Whether any inference layout is on.
  bool inference_layout() const { return varlen || paged || pack_gqa || split || kv_e4m3; }

  /// Whether the template accepts this config (attention_forward_space::config_valid and a
  /// 16-bit dtype).
  bool valid() const;
  /// Bytes of dynamic shared memory a block of this config uses.
  int shared_bytes() const;

 private:
  /// The options of path `Options`, or their defaults (all off) on another path.
  template <class Options>
  Options own() const {
    const Options* held = std::get_if<Options>(&options);
    return held != nullptr ? *held : Options{};
  }
};

/// The longest sequence a call may have: the kernel's mask arithmetic is 32-bit and
/// AttentionForwardParams::kNoWindow (2^30) must exceed every window that limits anything.
inline constexpr std::int64_t kMaxSeqlen = AttentionForwardParams::kNoWindow;
/// The largest grid.y (query heads) and grid.z (batch) of a launch.
inline constexpr std::int64_t kMaxGridYZ = 65535;

/// Whether `arch` has the Hopper paths' instructions (wgmma, TMA): sm_90a only ("a": the
/// arch-specific features do not carry over to later archs).
bool runs_wgmma(const std::string& arch);

/// Whether `arch` has mma.sync over fp8 (sm_89 on; sm_90a runs it on its 16-bit tensor
/// cores, converting the operands: ptxas's emulation).
bool runs_fp8_mma(const std::string& arch);

/// Whether `config` can run on `arch`: the Hopper paths need sm_90a, the fp8 path sm_89 or
/// later, the mma.sync path runs everywhere.
bool runs_on(const ForwardConfig& config, const std::string& arch);

/// Every valid config for (dtype, head_dim, mask, softcap), in a fixed order (the mma.sync
/// path's by Br, then Bc, warps and stages ascending, then the wgmma path's and the TMA
/// path's, which only sm_90a runs: see runs_on). Empty when the dtype or head dim is not
/// supported.
std::vector<ForwardConfig> forward_configs(DType dtype, int head_dim, MaskKind mask, bool softcap);

/// The dynamic shared memory a block may opt into on `arch` (runtime/kernel_spec.hpp).
using detail::arch_shared_memory_limit;

/// The heuristic config for (dtype, head_dim, mask, softcap) on `arch` (until the autotuner):
/// on sm_90a the TMA path where it takes the head dim (64 to 256), else the wgmma path where
/// it does; otherwise FlashAttention-2's tile shapes per head dim, shrunk until the tiles fit
/// the arch's shared memory, with two K/V stages where they fit. Always valid and within the
/// arch's shared memory. Throws InvalidArgument("head_dim") or ("dtype") for a dim or dtype the
/// kernel lacks.
ForwardConfig default_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                     const std::string& arch);

/// An mma.sync config for a forward with score or mask modifiers (untuned): 16 query rows per
/// warp, where the modifiers' per-score work stays in registers. The inference forwards run it,
/// and the dense one off Hopper (dense_modifiers_forward_config).
ForwardConfig modifiers_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                       const std::string& arch);
/// The same for a call: its head dim, mask kind and softcap (the inference forwards take it
/// from here, and the dense one where TMA cannot read its tensors).
ForwardConfig modifiers_forward_config(DType dtype, const Attention& attention,
                                       const std::string& arch);
/// The config the dense forward with modifiers runs untuned (its tuning problem's default): on
/// sm_90a the TMA path's default (as without modifiers; with a block mask, one CTA a tile:
/// neither persistent nor clustered, the form that reads it), otherwise
/// modifiers_forward_config.
ForwardConfig dense_modifiers_forward_config(DType dtype, const Attention& attention,
                                             const std::string& arch);

/// The mma.sync path's default for (dtype, head_dim, mask, softcap) on `arch` (what
/// default_forward_config picks off Hopper), preferring 64-row query blocks when a block has
/// at most 64 `rows` to fill (decoding). The inference layouts run on this path; `inference`
/// leaves out the tiles their index arithmetic makes spill.
ForwardConfig mma_sync_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                      const std::string& arch, std::int64_t rows, bool inference);

/// The wide path's config for a call of (dtype, head_dim, head_dim_v, mask, softcap) on `arch`
/// whose query blocks have `rows` rows to fill (packed heads times queries): Br 64 with two
/// column groups (each K block read once for 64 rows), or Br 32 with four where at most 32 rows
/// come; then the widest Bc and the most stages that fit the arch's shared memory, with V in the
/// keys where `values_in_keys` and it fits (two stages), else V loaded on its own. Throws
/// InvalidArgument("attention.head_dim") where no config fits the arch (e.g. 576 on a 99 KB GPU),
/// ("dtype") for a dtype other than f16 and bf16.
ForwardConfig wide_forward_config(DType dtype, int head_dim, int head_dim_v, MaskKind mask,
                                  bool softcap, bool values_in_keys, const std::string& arch,
                                  std::int64_t rows);

/// What runs where the chosen config is the TMA path and the call's tensors rule TMA out
/// (tma_tensor_problem): the default among the other paths, as default_forward_config.
ForwardConfig fallback_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                      const std::string& arch);

/// Why TMA cannot read or write the tensors of a validated call ("q: ..." with the driver's
/// rule), or "" when it can: global addresses 16-byte aligned, every stride a multiple of 16
/// bytes.
std::string tma_tensor_problem(const Attention& attention, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& o);

/// The kernel spec of `config` for target `arch`: op "attention-forward", header
/// "attention/fa2/forward_kernel.cuh", readable name such as
/// "attention_forward.hdim128.bf16.window.softcap.br128.bc64.w4.s2" (no mask or softcap part
/// when they are off).
/// With `modifiers` (mma.sync configs only), the name expression ends with their struct, which
/// the spec's prelude defines, and the readable name with "mod" and 8 digits of their digest.
detail::KernelSpec forward_spec(const ForwardConfig& config, const std::string& arch,
                                const ScoreModifiers& modifiers = {});

/// forward_spec, made once per (config, arch) in a process and kept: the launch path's, so a
/// call whose kernel is cached formats no name. The reference stays valid for the process.
const detail::KernelSpec& launch_forward_spec(const ForwardConfig& config, const std::string& arch,
                                              const ScoreModifiers& modifiers = {});

/// The mask kind a call needs: window when causal or a window limits some query row's keys
/// for this call's sequence lengths, none when every row sees every key (e.g. causal decoding
/// with seqlen_q = 1).
MaskKind forward_mask_kind(const Attention& attention);

/// q is fp16 or bf16 and o has its dtype; throws InvalidArgument("q.dtype" or "o.dtype", ...).
void check_query_dtypes(const TensorView& q, const TensorView& o);

/// q is fp16 or bf16, and k, v and o have its dtype; throws InvalidArgument("q.dtype", ...).
void check_attention_dtypes(const TensorView& q, const TensorView& k, const TensorView& v,
                            const TensorView& o);

/// q, k, v and o present and of rank 4 (InvalidArgument naming the first that is not).
void check_attention_ranks(const TensorView& q, const TensorView& k, const TensorView& v,
                           const TensorView& o);

/// q, k, v and o of a call of `attention`: their [batch, seqlen, heads, head_dim] shapes, with
/// the strides and alignment the kernels move them with (any dtype).
void check_head_tensors(const Attention& attention, const TensorView& q, const TensorView& k,
                        const TensorView& v, const TensorView& o);

/// The fp8 forward's tensors (fp8/fp8_forward_validation.cpp): q, k and v e4m3, o bf16, head
/// dims multiples of 16, the descale factors' shapes (Attention::q_descale), and none of what
/// it lacks (modifiers, a block mask, captures, dropout), each refused by name.
void check_fp8_forward_tensors(const Attention& attention, const TensorView& q, const TensorView& k,
                               const TensorView& v, const TensorView& o);
/// Throws InvalidArgument("attention.q_descale", ...) when a call that is not the fp8 forward
/// is given its descale factors.
void check_no_fp8_descales(const Attention& attention);

/// q, k, v and o of a call of `attention` (validated): rank 4, fp16 or bf16 alike, the shapes
/// [batch, seqlen, heads, head_dim] with the strides and alignment the kernels move them with;
/// throws InvalidArgument naming the first bad one ("k.shape", "o.dtype", ...).
void check_attention_tensors(const Attention& attention, const TensorView& q, const TensorView& k,
                             const TensorView& v, const TensorView& o);

/// Checks the descriptor alone (sizes, mask, scales), as forward and backward do first; throws
/// InvalidArgument naming the field ("attention.seqlen_k", ...). Head dims up to 256, or with
/// `wide_head_dims` (the inference forward, whose wide path takes them) up to 576.
void validate_attention(const Attention& attention, bool wide_head_dims = false);

/// Whether a forward call of `attention` has nothing to write (batch or seqlen_q is 0): it is a
/// successful no-op, nothing is launched. seqlen_k 0 is not empty: every row sees no key.
bool forward_is_empty(const Attention& attention);

/// Checks forward's arguments (see Runtime::forward); throws InvalidArgument naming the first
/// bad one ("q", "k.shape", "attention.heads_kv", ...). Nothing is launched or written.
/// Causal means window_right = 0, so causal with window_right > 0 is rejected.
void validate_forward_arguments(const Attention& attention, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& o,
                                const TensorView& lse);

/// The scores' scale factors in the base-2 domain (AttentionForwardParams::score_scale and
/// softcap_log2): scale · log2(e) without softcap; scale / c and c · log2(e) with softcap c
/// (softcap_log2 is 0 without softcap). The scale defaults to 1/sqrt(head_dim). Folded in
/// double; a result that overflows float is infinite (validation rejects it).
struct ScoreScales {
  float score_scale = 0.0f;
  float softcap_log2 = 0.0f;
};
ScoreScales forward_score_scales(const Attention& attention);

/// The (query, key) pairs a validated call computes: over the query rows, the keys each sees,
/// by the kernels' own rule (ops/attention/parts/key_window.cuh).
double visible_pairs(const Attention& attention);

/// The kernel's arguments for a validated call (see ops/attention/parts/forward_params.cuh): the
/// scale folded into the base-2 domain, windows with kNoWindow for an unbounded side, causal as
/// window_right = 0.
AttentionForwardParams forward_params(const Attention& attention, const TensorView& q,
                                      const TensorView& k, const TensorView& v, const TensorView& o,
                                      const TensorView& lse);

/// Grid (ceil(seqlen_q / Br), heads_q, batch), Warps x 32 threads and the config's shared
/// memory, for a validated call.
detail::LaunchShape forward_launch_shape(const ForwardConfig& config, const Attention& attention,
                                         Stream stream);

/// Throws InvalidArgument("config") unless `config` is valid and can run the validated call:
/// same dtype, head dim and softcap, a mask kind that covers the call's (window covers none:
/// unbounded windows see every key), and, for the TMA path, tensors TMA can read.
void check_forward_config(const ForwardConfig& config, const Attention& attention,
                          const TensorView& q, const TensorView& k, const TensorView& v,
                          const TensorView& o);

/// Everything Runtime::forward works out on the host before it calls the driver: the kernel,
/// its grid, its arguments, the buffers it may touch and, on the TMA path, its tensor maps.
struct ForwardLaunch {
  const detail::KernelSpec* spec = nullptr;  ///< launch_forward_spec's: lives for the process
  detail::LaunchShape shape;
  AttentionForwardParams params{};
  std::vector<detail::KernelBuffer> buffers;
  std::vector<emulator::TensorMap> maps;  ///< q, k, v, o on the TMA path; else empty
  /// The persistent masked TMA forward takes its tiles from a counter (TileSchedule::kDynamic):
  /// launch_planned_forward gives it the stream's (the backend's zeroed_counters).
  bool takes_tiles = false;
};

/// Runtime::forward with an explicit config (tests, the autotuner) on `backend`. The config
/// must match the call (see check_forward_config) and fit the device's shared memory.
void attention_forward(detail::RuntimeBackend& backend, const Attention& attention,
                       const TensorView& q, const TensorView& k, const TensorView& v,
                       const TensorView& o, const TensorView& lse, const ForwardConfig& config,
                       Stream stream);

}  // namespace flashjit::kernels

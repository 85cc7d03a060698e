#pragma once
// The attention problem a forward (and later backward) call solves, and helpers to describe its
// tensors. Tensors are always viewed as [batch, seqlen, heads, head_dim]; the memory layout
// ([B, L, H, D] or [B, H, L, D], padded or not) is carried by the strides.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashjit/tensor.hpp"

namespace flashjit {

/// A tensor the score and mask modifiers read by name (Attention::captures), as FlexAttention's
/// captured tensors: a relative-position bias table, document ids of packed sequences.
struct Capture {
  /// The most captures one call takes (Attention::captures).
  static constexpr int kMaxPerCall = 4;
  /// The name the expressions use: an identifier (letters, digits, '_', not first a digit), not
  /// one of score, b, h, q_idx, kv_idx, captures, a function of the modifiers' grammar (min,
  /// expf, float, ...), true, false or a C++ keyword, nor starting with "__" or "flashjit".
  std::string name;
  /// Read-only, in the runtime's memory (device memory, or host memory on the emulator): rank 1
  /// to 4, fp32, fp16, bf16 (read as float) or int32 (read as int), any strides. An expression
  /// indexes it one dimension at a time, `bias[h][q_idx - kv_idx + 128]`. Indices are not
  /// checked on a GPU (the emulator reports a read outside the tensor).
  TensorView tensor;
  /// Optional, for a learnable capture (a bias table): fp32, the tensor's shape and strides,
  /// into which the backward adds ∂loss/∂tensor (zero it first; the sums are atomic adds, in no
  /// fixed order). The tensor must then be fp32, fp16 or bf16 and read exactly once in
  /// score_mod (the slope is taken through that one read, on dual numbers). The forward ignores
  /// it. A view with null data: none, and the backward treats the capture as a constant.
  TensorView grad{};
};

/// Shape and options of one attention call: O = softmax(scale · Q Kᵀ + mask) V per head.
/// batch, seqlen_q and seqlen_k may be 0, as in PyTorch: a call with nothing to write succeeds
/// and launches nothing; with seqlen_k 0 every query row sees no key (O = 0, LSE = -inf, dQ = 0),
/// with seqlen_q 0 no key is seen (dK = dV = 0). Empty tensors may have null data.
struct Attention {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;   ///< query heads
  std::int64_t heads_kv = 1;  ///< key/value heads; heads_q must be a multiple (GQA/MQA)
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  /// Q's and K's: a multiple of 8 from 8 to 256; up to 576 in the inference forward
  /// (Runtime::forward with Sequences: MLA's absorbed decoding, 576 with head_dim_v 512).
  std::int64_t head_dim = 64;
  /// V's and O's head dim (dV's and dO's in the backward) where it differs from head_dim, as in
  /// DeepSeek's MLA prefill (head_dim 192, head_dim_v 128); 0: head_dim. A multiple of 8 from 8
  /// to head_dim. The kernels run at head_dim, V's tiles zero past head_dim_v, so O = P V costs
  /// what it costs at head_dim. Every call takes it, dense or with Sequences (v, o, dout, dv,
  /// a paged cache's v pages and an append's v_new, that wide).
  std::int64_t head_dim_v = 0;
  /// Key j is visible to query i only if j <= i + seqlen_k - seqlen_q (bottom-right aligned).
  /// Causal is the window_right = 0 case; combining it with window_right > 0 is an error.
  bool causal = false;
  /// Sliding window: keys more than window_left before (window_right after) the diagonal
  /// i + seqlen_k - seqlen_q are masked; -1 means unbounded on that side.
  std::int64_t window_left = -1;
  std::int64_t window_right = -1;
  /// The softmax scale; 1/sqrt(head_dim) when unset; finite and > 0 when set. Any such scale
  /// gives the forward's O and LSE to fp32's precision: scores far past 1/sqrt(head_dim) (a
  /// near one-hot softmax, scaled scores up to 1e12 tested) neither overflow nor lose P.
  /// The backward recomputes P from the fp32 LSE, which holds the scaled row maximum to 24
  /// bits, so P carries a relative error of about |LSE|·2⁻²⁴: below 1e-3 while |LSE| < 2¹⁴,
  /// growing past that (FlashAttention's backward shares this limit).
  std::optional<float> scale{};
  /// Tanh soft-capping of the scores, s = softcap · tanh(s / softcap); 0 turns it off.
  float softcap = 0.0f;
  /// Backward only: how dQ is summed, and what repeated runs of Runtime::backward give. This
  /// comment is the one place that states it; the other docs (runtime.hpp, flashjit_c.h, docs/)
  /// point here.
  /// - false (the default, as in FlashAttention-2/3): the kernel that computes dK and dV also
  ///   adds each block pair's dQ contribution into an fp32 workspace with atomic adds (five
  ///   matrix products per block pair; on sm_90a's Hopper backward, bulk reductions of whole
  ///   blocks), and a last small kernel rounds the sums to dq's dtype.
  ///   On a GPU the atomic adds land in an order that changes from run to run, so dQ may differ
  ///   in its last bits between runs with the same inputs. dK and dV are bit-identical: each
  ///   element is written once, without atomics, summed in an order the kernel config fixes.
  ///   (The emulator runs threads in a fixed order, so there dQ repeats too; a GPU need not.)
  /// - true: dQ, dK and dV are all bit-identical between runs with the same inputs. The
  ///   mma.sync kernels get there with a separate query-major kernel that writes dQ once,
  ///   without atomics (seven products per block pair instead of five; no dQ workspace). The
  ///   Hopper backward (sm_90a) keeps its five products and its workspace but makes the
  ///   additions into each 64-row query block take turns, in the order of the key blocks, each
  ///   waiting until the one before has landed (a counter per query block in global memory), so
  ///   it is slower than its default mode by those waits.
  /// "Bit-identical" holds for the same kernel config on the same GPU model. The tuning policy
  /// chooses the config (RuntimeOptions::tuning): another GPU, a changed tuning database or
  /// `auto` tuning a new shape may choose other tiles, which sum in another order and may change
  /// the last bits of every gradient in either mode. The variable-length backward
  /// (Runtime::backward with Sequences) makes the same promises, mode for mode; the multi-scale
  /// backward always runs without atomics, as the true mode here.
  bool deterministic = false;
  /// A score modifier, as FlexAttention's score_mod: one C++ expression of `score` (the scaled
  /// score, soft-capped when softcap is set; a float), `b` (the batch entry), `h` (the query
  /// head), `q_idx` and `kv_idx` (the query's and key's positions in their sequence; ints),
  /// whose value is the score the softmax sees, e.g. "score - 0.0625f * (q_idx - kv_idx)"
  /// (ALiBi with slope 1/16). Empty: none. It is compiled into the kernel (its text is part of
  /// the kernel's name and cache key), after it is parsed against the modifiers' grammar
  /// (docs/modifiers.md): C++'s operators over these names, the captures, numbers and a fixed
  /// list of math functions (exp, log, tanh, sqrt, sin, cos, pow, abs, fabs, min, max, fmin,
  /// fmax, ... and their f names; float(x), int(x)), printable ASCII, at most 4096 characters.
  /// Anything else (a call to another function, a lambda, a statement, `#`, a tab) is refused
  /// with InvalidArgument naming the field and the character, before anything compiles, on
  /// every backend. The forward, dense or with Sequences
  /// (b is then the sequence's index, q_idx and kv_idx positions within it, kv_idx counting
  /// from the first key after a cache_leftpad), and the backward, dense or variable-length,
  /// take modifiers (the dense forward on sm_90a's TMA kernel, the rest on the mma.sync
  /// kernels; dense calls tuned under a key of their own). The backward needs no
  /// derivative from you: it evaluates the expression on dual numbers (`score` is then not a
  /// float but a type with the arithmetic, comparisons and every function of the grammar), so
  /// ∂score_mod/∂score comes with the value. See docs/modifiers.md.
  std::string score_mod{};
  /// A mask modifier: one boolean C++ expression of `b`, `h`, `q_idx` and `kv_idx`; false hides
  /// the key from the query, on top of causal and the window, e.g. "q_idx / 256 == kv_idx /
  /// 256" (blocks of 256 tokens). Empty: none. The same rules as score_mod.
  std::string mask_mod{};
  /// A block mask of mask_mod (Runtime::build_block_mask, FlexAttention's create_block_mask):
  /// int32 [batch, heads_q, ceil(seqlen_q / 16), 4] with unit strides in its last two
  /// dimensions, built for this mask_mod and these sizes and reused by every forward with
  /// them. With it the forward skips the key blocks the mask hides from a whole query block
  /// and evaluates mask_mod only on blocks it does not wholly show (a block-diagonal mask of
  /// 256-token documents over 1024 tokens computes a quarter of the key blocks); the dense
  /// backward skips the same blocks. A view with null data: none. Dense calls only; it requires
  /// mask_mod, and a block mask of another mask gives wrong results (it is not checked against
  /// the text).
  TensorView block_mask{};
  /// Without a block_mask, a dense call whose mask_mod reads no capture runs with one the
  /// runtime builds from mask_mod once per (mask, sizes) and keeps for its life, when that
  /// skips at least an eighth of the key tiles causal and the window leave; its first call for
  /// a mask and size waits for the build (make it before a CUDA graph capture). The outputs'
  /// bits are the same either way. false: every key block is computed, as without a block mask.
  bool automatic_block_mask = true;
  /// Tensors score_mod and mask_mod read by name (at most 4): `doc[q_idx] == doc[kv_idx]`
  /// with a capture named "doc". Their names, dtypes and ranks are part of the kernel (not
  /// their values or sizes: new values need no new kernel). An expression that indexes a name
  /// no capture has is refused by name before anything compiles. The backward adds the
  /// gradient of a capture into its Capture::grad when one is given.
  std::vector<Capture> captures{};

  /// Learnable attention sinks (gpt-oss's `sinks`), fp32 [heads_q], any stride; null data:
  /// none. Query head h's logit s_h joins every row's softmax denominator and adds nothing to
  /// the output: P_ij = e^(S_ij) / (Σ_j e^(S_ij) + e^(s_h)), so o shrinks by e^(LSE − LSE')
  /// and lse is LSE' = log(e^LSE + e^(s_h)) (a row that sees no key gets o = 0, lse = s_h).
  /// Every forward takes them (dense, Sequences, decoding: after any split merge, counted
  /// once); the backward needs them only for their gradient.
  TensorView sinks{};
  /// Written by the backward when given (with sinks): ∂L/∂s_h = −Σ over batch and rows of
  /// e^(s_h − lse) · rowsum(dout ∘ o), fp32 [heads_q], any stride; summed in a fixed order, so
  /// reruns are bit-identical. Overwritten, not accumulated.
  TensorView sinks_grad{};

  /// Dropout on the attention probabilities, FlashAttention-2's contract: each P_ij is kept
  /// with probability 1 − dropout_p and then scaled by 1 / (1 − dropout_p), or zeroed; lse is
  /// that of the undropped P. In [0, 1); 0 turns it off. Which elements are kept is a pure
  /// function of (dropout_seed, dropout_offset, batch entry, query head, query, key) (Philox
  /// 4x32-10, docs/attention.md#dropout), so the backward, given the same three, regenerates
  /// the forward's mask without storing it, and reruns are bit-identical. Dense calls and
  /// variable-length ones (Sequences with cu_seqlens) take it, on the mma.sync kernels (sm_80
  /// on; on sm_90a too, where the Hopper kernels have no dropout); decoding and paged caches
  /// refuse it by name.
  float dropout_p = 0.0f;
  std::uint64_t dropout_seed = 0;
  std::uint64_t dropout_offset = 0;

  /// The fp8 forward (FlashAttention-3's fp8 contract): q, k and v DType::e4m3, o bf16 (lse
  /// fp32 as usual). Their true values are the codes times these fp32 descale factors: [1] (per
  /// tensor), [heads_kv] (per head) or [batch, heads_kv] (per sequence and head; query head h
  /// takes its key/value head's), each optional (1), applied in fp32 to the scores (q's and
  /// k's) and the output (v's). P is rounded to e4m3 for P V, as FlashAttention-3 does (its
  /// relative error up to 2⁻⁴ a probability; ℓ sums the unrounded P). Head dims (and
  /// head_dim_v) multiples of 16 up to 256, strides multiples of 16 elements. Dense calls on
  /// sm_89 and later (fp8 tensor cores): no Sequences, score or mask modifiers, block mask,
  /// dropout or backward (refused by name); sinks, GQA, causal, windows and softcap as usual.
  TensorView q_descale{};
  TensorView k_descale{};
  TensorView v_descale{};

  /// V's and O's head dim: head_dim_v, or head_dim when it is 0.
  std::int64_t value_head_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
};

/// The batch of a call whose sequences are not one dense [seqlen, heads, head_dim] block each
/// (FlashAttention's variable-length and KV-cache conventions): Runtime::forward takes every
/// member, Runtime::backward the variable-length ones (cu_seqlens_q, cu_seqlens_k). Every
/// member is optional: a view with null data is absent. Index arrays are int32 device tensors
/// with unit stride in their last dimension. Attention::batch is the number of sequences;
/// Attention::seqlen_q and seqlen_k are the longest sequence's lengths (upper bounds: the grid
/// covers them), and masks are aligned bottom-right per sequence with its own lengths.
struct Sequences {
  /// [batch + 1], from 0 and nondecreasing: sequence b's queries are rows [cu[b], cu[b + 1]) of
  /// q and o, which are packed [total_q, heads_q, head_dim]; lse is then [heads_q, total_q]. A
  /// sequence of length 0 writes nothing and is no error.
  TensorView cu_seqlens_q;
  /// [batch + 1]: likewise for k and v, packed [total_k, heads_kv, head_dim]. Not with pages.
  TensorView cu_seqlens_k;
  /// [batch]: sequence b's key count, each from 0 to seqlen_k (a paged cache's lengths; with
  /// cu_seqlens_k, how many of the sequence's packed keys to use: FlashAttention's seqused_k).
  /// Required with a page table. The backward takes it with packed or dense keys: keys past a
  /// sequence's count are not read and their rows of dk and dv are written 0.
  TensorView seqlens_k;
  /// [batch]: how many of sequence b's queries are used, FlashAttention's seqused_q: each from 0
  /// to the sequence's rows (cu_seqlens_q's span, or seqlen_q with dense q). The sequence is
  /// then those queries alone (masks align to that count): the rows past it are not read, and
  /// their rows of o (and dq in the backward) are written 0 and of lse -inf. splits 0 runs it
  /// unsplit; forced splits (2 and up) are honoured. Not with an append (k_new).
  TensorView seqused_q;
  /// [batch, max_pages]: key j of sequence b is row j % page_size of page
  /// page_table[b, j / page_size] of k and v, which are then [num_pages, page_size, heads_kv,
  /// head_dim], page_size any positive count (1 included: one token a page, as vLLM and SGLang
  /// run FlashInfer). Pages past a sequence's length are not read.
  TensorView page_table;
  /// [batch]: sequence b's cache row, FlashAttention's cache_batch_idx: a dense k and v are
  /// then [cache_batch, seqlen_k, heads_kv, head_dim] for any cache_batch, and sequence b's keys
  /// (and its appended ones) are in row cache_batch_idx[b], from 0 to cache_batch - 1; with a
  /// page table, it is [cache_batch, max_pages] and sequence b's pages are its row
  /// cache_batch_idx[b] (FlashAttention 3's rule). Not with packed keys. With k_new, two
  /// sequences must not share a row (the call is refused: InvalidArgument naming
  /// sequences.cache_batch_idx and both positions).
  TensorView cache_batch_idx;
  /// [batch]: where sequence b's keys start in its cache row, FlashAttention's cache_leftpad:
  /// its keys are rows [cache_leftpad[b], seqlens_k[b]) of a dense row, or those positions of
  /// its pages (seqlens_k counts from the row's start, the padding included; each pad from 0
  /// to seqlens_k[b]); masks align to the keys it has. Requires seqlens_k; not with packed
  /// keys. Rotary positions count from the row's start too.
  TensorView cache_leftpad;
  /// Appending to the cache in the same call (FlashAttention's flash_attn_with_kvcache with k
  /// and v): [batch, seqlen_new, heads_kv, head_dim] new keys and values (v_new head_dim_v
  /// wide), in the cache's dtype (q's; or e4m3 codes in an fp8 cache's scale, FlashAttention
  /// 3's rule), written into k and v (the cache: dense [batch, seqlen_k, heads_kv, head_dim],
  /// or paged) at positions seqlens_k[b] to seqlens_k[b] + seqlen_new - 1 of sequence b before
  /// the attention, which then sees seqlens_k[b] + seqlen_new keys. seqlens_k (the cached
  /// counts before the call, each at most seqlen_k - seqlen_new) is required and is not
  /// changed: the caller advances it. q is dense or packed (cu_seqlens_q), the keys are not
  /// packed (no cu_seqlens_k), two sequences share no cache row, and the cache must share no
  /// memory with any other tensor of the call. Both or neither.
  TensorView k_new;
  TensorView v_new;
  /// Rotary embedding (RoPE) applied to q and k_new on their way in, as flash_attn_with_kvcache
  /// does: fp32 [positions, rotary_dim / 2] tables of cos and sin (same shape, unit last
  /// stride), rotary_dim even and at most head_dim, positions at least seqlen_k. The first
  /// rotary_dim dims of each head rotate, the rest pass unchanged. New key i of sequence b sits
  /// at position seqlens_k[b] + i; query i at seqlens_k[b] + i when the call is causal or
  /// windowed (FlashAttention's rule, also past the new keys when a sequence has more queries
  /// than them: the tables must then reach seqlens_k[b] + its queries, checked with the index
  /// arrays), else every query at seqlens_k[b]. The rotated q is the kernel's (q itself is not
  /// written); the rotated keys are what the cache keeps (an fp8 cache's rounded back to e4m3).
  /// Requires k_new. Both or neither.
  TensorView rotary_cos;
  TensorView rotary_sin;
  /// Which dims rotate together: false pairs dim i with i + rotary_dim / 2 (GPT-NeoX and Llama's
  /// layout), true pairs 2i with 2i + 1 (GPT-J's; FlashAttention's default).
  bool rotary_interleaved = false;
  /// An fp8 KV cache: k and v (the cache, dense or paged) may be DType::e4m3 while q is fp16 or
  /// bf16 (o and lse as usual), for the inference forward (decoding and prefill over a cache):
  /// their blocks are converted to q's dtype in shared memory, exactly. Their true values are
  /// the stored ones times these fp32 descale factors: [1] (per tensor), [heads_kv] (per head)
  /// or [batch, heads_kv] (sequence b's, FlashAttention-3's), each optional (1), applied in
  /// fp32 to the scores and the output. Head dims (and head_dim_v) must be multiples of 16 and
  /// the cache's row and head strides multiples of 16 elements. An append (k_new) gives its
  /// new rows as e4m3 codes in this scale.
  TensorView k_descale;
  TensorView v_descale;
  /// Split-KV: how many CTAs share each query block's keys, each writing an fp32 partial result
  /// that a second kernel merges exactly (merge_states). 0 chooses from the GPU's SM count, the
  /// batch and the lengths (decoding splits; long prefill does not); 1 to 64 forces a count.
  int splits = 0;
};

/// How a [batch, seqlen, heads, head_dim] tensor is laid out in memory.
enum class Layout {
  bshd,  ///< [batch, seqlen, heads, head_dim], contiguous (FlashAttention's layout)
  bhsd,  ///< [batch, heads, seqlen, head_dim], contiguous (PyTorch SDPA's layout)
};

/// A contiguous tensor of logical shape [batch, seqlen, heads, head_dim] stored in `layout`.
/// Sizes may be 0 (an empty tensor); a negative one throws InvalidArgument naming it.
TensorView attention_tensor(void* data, DType dtype, Layout layout, std::int64_t batch,
                            std::int64_t seqlen, std::int64_t heads, std::int64_t head_dim);

/// The fp32 log-sum-exp tensor [batch, heads_q, seqlen_q], contiguous, for `attention`.
TensorView lse_tensor(float* data, const Attention& attention);

}  // namespace flashjit

/* The C API of flashjit (C99), for callers that cannot use C++: Python's ctypes, Rust, Go...
 * It mirrors the C++ API (flashjit/runtime.hpp, flashjit/attention.hpp): a runtime, tensor
 * descriptors (pointer, dtype, shape, strides in elements), the attention forward and backward,
 * the merge of partial attention states, and layer norm (and RMS norm) forward and backward.
 *
 * Conventions:
 * - Every function that can fail returns a flashjit_status; FLASHJIT_OK is 0. No exception
 *   crosses this boundary. After a failure, flashjit_last_error() says what went wrong, naming
 *   the offending argument for FLASHJIT_ERROR_INVALID_ARGUMENT ("invalid argument 'q.dtype':
 *   ...").
 * - Structs are plain data owned by the caller and only read during the call; the *_init
 *   functions fill them with the C++ API's defaults, so fields added later keep sensible
 *   values in code that sets only the fields it knows.
 * - Tensors live in the runtime's memory: device memory on the cuda backend, host memory on
 *   the emulator backend (flashjit_allocate gives either).
 * - Thread safety is that of flashjit::Runtime; the error message is per thread. */
#ifndef FLASHJIT_FLASHJIT_C_H
#define FLASHJIT_FLASHJIT_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status ---------------------------------------------------------------------------- */

/** Outcome of a call. One code per flashjit::ErrorKind; the values are fixed. */
typedef enum flashjit_status {
  FLASHJIT_OK = 0,
  FLASHJIT_ERROR_INVALID_ARGUMENT = 1, /**< a bad argument; nothing was launched */
  FLASHJIT_ERROR_NO_DRIVER = 2,        /**< libcuda.so.1 could not be loaded */
  FLASHJIT_ERROR_NO_DEVICE = 3,        /**< the driver loaded but reports no usable GPU */
  FLASHJIT_ERROR_DRIVER = 4,           /**< a CUDA driver call failed */
  FLASHJIT_ERROR_COMPILE = 5,          /**< NVRTC rejected a kernel; the message holds its log */
  FLASHJIT_ERROR_CACHE = 6,            /**< the kernel cache cannot serve a request */
  FLASHJIT_ERROR_IO = 7,               /**< a file could not be read or written */
  FLASHJIT_ERROR_UNSUPPORTED = 8,      /**< the backend lacks it (a kernel not in the emulator) */
  FLASHJIT_ERROR_KERNEL_FAULT = 9,     /**< a launch failed, or the emulator caught a fault */
  FLASHJIT_ERROR_INTERNAL = 10,        /**< any other failure (out of host memory, a bug) */
  FLASHJIT_ERROR_OUT_OF_MEMORY = 11    /**< an allocation the device (the emulator: the host)
                                            could not satisfy; nothing was allocated */
} flashjit_status;

/** The enumerator's name ("FLASHJIT_OK", "FLASHJIT_ERROR_NO_DRIVER", ...), or
 *  "FLASHJIT_UNKNOWN_STATUS" for a value that is none of them. Static storage; never NULL. */
const char* flashjit_status_name(flashjit_status status);

/** The message of the calling thread's most recent failed call, or "" when no call has failed
 *  on this thread. Each thread has its own. A failing call replaces the message; successful
 *  calls leave it as it is, so read it right after the call that returned an error. The
 *  pointer stays valid until the next failing call on the same thread. Never NULL. */
const char* flashjit_last_error(void);

/** The library's version, "major.minor.patch". Static storage. */
const char* flashjit_version(void);

/** Kinds of the library's own messages (flashjit_take_message). */
enum {
  FLASHJIT_MESSAGE_NOTICE = 0, /**< long work under way: a kernel compiled for the emulator */
  FLASHJIT_MESSAGE_WARNING = 1 /**< a problem worked around: an unusable cache, a fallback */
};

/** Where the library's messages go, process-wide: keep == 0 (the default) prints them to stderr
 *  ("flashjit: ..."); keep != 0 keeps them in order (up to 1024, the oldest dropped past that)
 *  for flashjit_take_message, so that a binding routes them to its own logging. */
void flashjit_keep_messages(int keep);

/** Takes the oldest kept message: returns 1 with its kind (FLASHJIT_MESSAGE_*) in *kind and its
 *  text in *text (valid until this thread's next call of this function), or 0 when none is
 *  kept. kind and text must not be NULL. */
int flashjit_take_message(int* kind, const char** text);

/* ---- Runtime --------------------------------------------------------------------------- */

/** A runtime: one GPU's context and the kernels loaded on it, or the CPU emulator. Opaque. */
typedef struct flashjit_runtime flashjit_runtime;

/** Values of flashjit_runtime_options.backend (flashjit::Backend). */
enum {
  FLASHJIT_BACKEND_CUDA = 0, /**< a CUDA GPU; tensors are device memory */
  /** The CPU emulator running the same kernel templates with out-of-bounds, race and barrier
   *  checks: tensors are host memory, launches are synchronous and slow (small shapes). The
   *  specializations built into flashjit run at once; any other is compiled by the host C++
   *  compiler on first use and cached (flashjit::Backend::emulator). Needs no driver or GPU. */
  FLASHJIT_BACKEND_EMULATOR = 1
};

/** Values of flashjit_runtime_options.tuning (flashjit::TuningPolicy). */
enum {
  FLASHJIT_TUNING_OFF = 0,    /**< the heuristic default config; the tuning database is unread */
  FLASHJIT_TUNING_CACHED = 1, /**< the tuning database's winner for the shape, else the default */
  FLASHJIT_TUNING_AUTO = 2    /**< as CACHED, but a missing shape is tuned first and persisted */
};

/** How a runtime is set up (flashjit::RuntimeOptions). */
typedef struct flashjit_runtime_options {
  int device;  /**< CUDA device ordinal (cuda backend; ignored by the emulator) */
  int backend; /**< FLASHJIT_BACKEND_CUDA or FLASHJIT_BACKEND_EMULATOR */
  int tuning;  /**< FLASHJIT_TUNING_*; the environment's FLASHJIT_TUNING, when set, wins */
  /** The GPU the emulator models, which decides the kernels it chooses: "sm_80" (an A100) or
   *  "sm_90a" (an H100: the Hopper kernels). NULL means "sm_80". Ignored by the cuda backend. */
  const char* emulated_arch;
  /** Nonzero: inference calls (flashjit_attention_forward_sequences) check their index arrays'
   *  values before any launch (flashjit::RuntimeOptions::check_indices); the emulator always
   *  checks. 0, the default, skips the check on a GPU: an out-of-range index then reads or
   *  writes outside the tensors. */
  int check_indices;
} flashjit_runtime_options;

/** Fills *options with the C++ defaults: device 0, the cuda backend, cached tuning, and a
 *  NULL emulated_arch (the emulator models an sm_80). Does nothing when options is NULL. */
void flashjit_runtime_options_init(flashjit_runtime_options* options);

/** Opens a runtime with *options (NULL: the defaults) and stores it in *out, or NULL on
 *  failure. Errors: INVALID_ARGUMENT for a NULL out, a bad backend or tuning code, an
 *  emulated_arch the emulator does not model (named 'emulated_arch'), or a bad device ordinal;
 *  NO_DRIVER or NO_DEVICE when the cuda backend cannot run here. The emulator backend always
 *  opens. Release it with flashjit_runtime_destroy. */
flashjit_status flashjit_runtime_create(const flashjit_runtime_options* options,
                                        flashjit_runtime** out);

/** Releases a runtime and the memory still allocated from it. NULL is ignored. */
void flashjit_runtime_destroy(flashjit_runtime* runtime);

/* ---- Memory ---------------------------------------------------------------------------- */

/** Allocates `bytes` of the runtime's memory (device memory; 256-byte aligned host memory
 *  filled with 0xff bytes on the emulator) and stores its address in *out (NULL on failure).
 *  Free it with flashjit_free, or it is freed with the runtime. OUT_OF_MEMORY when the device
 *  (on the emulator, the host) cannot hold it. */
flashjit_status flashjit_allocate(flashjit_runtime* runtime, size_t bytes, void** out);

/** Frees memory from flashjit_allocate on the same runtime. NULL is ignored; any other pointer
 *  that runtime did not allocate is an INVALID_ARGUMENT error. */
flashjit_status flashjit_free(flashjit_runtime* runtime, void* data);

/** Copies `bytes` from host memory `src` to the runtime's memory `dst`, synchronously. A `dst`
 *  inside a block from flashjit_allocate must leave room for `bytes` in it: INVALID_ARGUMENT
 *  naming 'bytes' if not, and nothing is copied. */
flashjit_status flashjit_copy_to_device(flashjit_runtime* runtime, void* dst, const void* src,
                                        size_t bytes);

/** Copies `bytes` from the runtime's memory `src` to host memory `dst`, synchronously. A `src`
 *  inside a block from flashjit_allocate is checked as flashjit_copy_to_device checks `dst`. */
flashjit_status flashjit_copy_to_host(flashjit_runtime* runtime, void* dst, const void* src,
                                      size_t bytes);

/** Waits for all work on `stream` (a CUstream; NULL is the default stream). Nothing to wait
 *  for on the emulator. */
flashjit_status flashjit_synchronize(flashjit_runtime* runtime, void* stream);

/* ---- Tensors --------------------------------------------------------------------------- */

/** Values of flashjit_tensor.dtype (flashjit::DType). */
enum {
  FLASHJIT_DTYPE_F16 = 0,  /**< IEEE binary16 */
  FLASHJIT_DTYPE_BF16 = 1, /**< bfloat16 */
  FLASHJIT_DTYPE_F32 = 2,  /**< IEEE binary32 */
  FLASHJIT_DTYPE_I32 = 3,  /**< int32: index arrays (sequence offsets and lengths, page tables) */
  FLASHJIT_DTYPE_E4M3 = 4  /**< fp8 e4m3: an fp8 KV cache (flashjit_sequences.k_descale), or the
                              fp8 forward's q, k, v (flashjit_attention.q_descale) */
};

/** The most dimensions a tensor has. */
#define FLASHJIT_MAX_RANK 4

/** A non-owning strided view (flashjit::TensorView). The first `rank` entries of shape and
 *  strides are used; strides count elements, not bytes. */
typedef struct flashjit_tensor {
  void* data;                         /**< the first element, in the runtime's memory */
  int dtype;                          /**< FLASHJIT_DTYPE_* */
  int rank;                           /**< 0 to FLASHJIT_MAX_RANK */
  int64_t shape[FLASHJIT_MAX_RANK];   /**< extents, outermost first */
  int64_t strides[FLASHJIT_MAX_RANK]; /**< elements between neighbours along each dimension */
} flashjit_tensor;

/* ---- Attention ------------------------------------------------------------------------- */

/** The most captures one call takes (flashjit_attention::num_captures). */
#define FLASHJIT_MAX_CAPTURES 4

/** A tensor the modifiers read by name (flashjit::Capture): `name` a NUL-terminated
 *  identifier, `tensor` rank 1 to 4, fp32, fp16, bf16 or int32; `grad` NULL, or an fp32 tensor
 *  of the tensor's shape and strides into which the backward adds the capture's gradient. */
typedef struct flashjit_capture {
  const char* name;
  flashjit_tensor tensor;
  const flashjit_tensor* grad;
} flashjit_capture;

/** One attention call, O = softmax(scale * Q K^T + mask) V per head (flashjit::Attention). */
typedef struct flashjit_attention {
  int64_t batch;    /**< sequences in the batch */
  int64_t heads_q;  /**< query heads */
  int64_t heads_kv; /**< key/value heads; heads_q must be a multiple (GQA/MQA) */
  int64_t seqlen_q; /**< query rows per sequence */
  int64_t seqlen_k; /**< keys per sequence */
  int64_t head_dim; /**< a multiple of 8 from 8 to 256; to 576 in
                         flashjit_attention_forward_sequences (MLA's absorbed decoding,
                         head_dim_v 512) */
  /** Nonzero: key j is visible to query i only if j <= i + seqlen_k - seqlen_q (bottom-right
   *  aligned). The window_right = 0 case; combining it with window_right > 0 is an error. */
  int causal;
  /** Sliding window: keys more than window_left before (window_right after) the diagonal
   *  i + seqlen_k - seqlen_q are masked; -1 means unbounded on that side. */
  int64_t window_left;
  int64_t window_right;
  /** The softmax scale. 0 or negative means unset, which is 1/sqrt(head_dim); NaN is an
   *  error. (The C++ API's std::optional has no C spelling; no useful scale is <= 0.) */
  float scale;
  /** Tanh soft-capping of the scores, s = softcap * tanh(s / softcap); 0 turns it off. */
  float softcap;
  /** Backward only: 0 (the default) sums dQ with fp32 atomic adds; non-zero computes dQ in a
   *  separate kernel without atomics. What each mode promises about repeated runs (which
   *  gradients are bit-identical, and when) is stated in one place: the comment of
   *  flashjit::Attention::deterministic in flashjit/attention.hpp. */
  int deterministic;
  /** A score modifier and a mask modifier: NUL-terminated C++ expressions, as
   *  flashjit::Attention::score_mod and mask_mod say (which calls take them, the rules they
   *  follow); NULL or "" for none. Read during the call only. */
  const char* score_mod;
  const char* mask_mod;
  /** mask_mod's block mask (flashjit_build_block_mask; flashjit::Attention::block_mask), or
   *  NULL for none. */
  const flashjit_tensor* block_mask;
  /** Tensors score_mod and mask_mod read by name (flashjit::Attention::captures, which says
   *  what they may be): num_captures entries, 0 to FLASHJIT_MAX_CAPTURES (checked before any
   *  entry is read), or NULL and 0 for none. Read during the call. */
  const flashjit_capture* captures;
  int num_captures;
  /** V's and O's head dim (dV's and dO's) where it differs from head_dim, as in MLA (192 and
   *  128); 0: head_dim. flashjit::Attention::head_dim_v says which calls take it. */
  int64_t head_dim_v;
  /** Learnable attention sinks, fp32 [heads_q] (flashjit::Attention::sinks: one logit per
   *  query head in every row's softmax denominator), or NULL for none. */
  const flashjit_tensor* sinks;
  /** Backward only: the sinks' gradient, fp32 [heads_q], written (flashjit::Attention::
   *  sinks_grad; needs sinks), or NULL for none. */
  const flashjit_tensor* sinks_grad;
  /** Dropout on the probabilities (flashjit::Attention::dropout_p, dropout_seed,
   *  dropout_offset): p in [0, 1), 0 for none; the backward needs the forward's three. */
  float dropout_p;
  uint64_t dropout_seed;
  uint64_t dropout_offset;
  /** The fp8 forward (q, k, v FLASHJIT_DTYPE_E4M3, o bf16): fp32 descale factors [1],
   *  [heads_kv] or [batch, heads_kv], the true values being the codes times these
   *  (flashjit::Attention::q_descale), or NULL for 1. */
  const flashjit_tensor* q_descale;
  const flashjit_tensor* k_descale;
  const flashjit_tensor* v_descale;
} flashjit_attention;

/** Fills *attention with the C++ defaults: batch, heads, sequence lengths 1, head_dim 64, not
 *  causal, unbounded window (-1, -1), scale unset (0), no softcap, not deterministic, no
 *  modifiers or block mask (NULL), head_dim_v 0 (head_dim's), no sinks (NULL), no dropout
 *  (p, seed and offset 0), no fp8 descale factors (NULL). NULL is ignored. */
void flashjit_attention_init(flashjit_attention* attention);

/** Makes ready the kernels a dense forward of *attention with q, k and v of `dtype`
 *  (FLASHJIT_DTYPE_F16, FLASHJIT_DTYPE_BF16, or FLASHJIT_DTYPE_E4M3 without backward)
 *  launches and, when `backward` is non-zero, its backward's: compiled concurrently or loaded
 *  from the kernel cache, none run (flashjit::Runtime::prepare). Errors: INVALID_ARGUMENT
 *  naming the argument. */
flashjit_status flashjit_attention_prepare(flashjit_runtime* runtime,
                                           const flashjit_attention* attention, int dtype,
                                           int backward);

/** Builds attention->mask_mod's block mask into *block_mask (int32 [batch, heads_q,
 *  ceil(seqlen_q / 16), 4]; flashjit::Runtime::build_block_mask), to set as
 *  attention->block_mask of forwards and backwards with the same mask and sizes. Errors:
 *  INVALID_ARGUMENT naming the argument (attention.mask_mod is required), nothing launched. */
flashjit_status flashjit_build_block_mask(flashjit_runtime* runtime,
                                          const flashjit_attention* attention,
                                          const flashjit_tensor* block_mask, void* stream);

/** Attention forward (flashjit::Runtime::forward): o = softmax(scale * q k^T + mask) v, and
 *  lse[b, h, i] = log sum_j exp(scale * q_i . k_j) over the visible keys.
 *  q is [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim]
 *  (v head_dim_v wide when it is set), o like q with v's head dim (logical shapes; any strides with
 * a unit head_dim stride, so [B, L, H, D] and [B, H, L, D] memory both work), all
 * FLASHJIT_DTYPE_F16 or all BF16. lse is F32 [batch, heads_q, seqlen_q] with unit last stride; lse
 * NULL, or its data NULL, skips it. A query row that sees no key gets o = 0 and lse = -inf.
 * `stream` is a CUstream (NULL: the default stream; ignored by the emulator). Errors:
 * INVALID_ARGUMENT naming the argument (nothing is launched then); UNSUPPORTED for a kernel the
 * emulator lacks; COMPILE, CACHE, DRIVER, KERNEL_FAULT from compiling or launching. */
flashjit_status flashjit_attention_forward(flashjit_runtime* runtime,
                                           const flashjit_attention* attention,
                                           const flashjit_tensor* q, const flashjit_tensor* k,
                                           const flashjit_tensor* v, const flashjit_tensor* o,
                                           const flashjit_tensor* lse, void* stream);

/** Attention backward (flashjit::Runtime::backward): given dout = dL/do of a forward call with
 *  the same arguments and its o and lse (required here), writes dq = dL/dq, dk = dL/dk and
 *  dv = dL/dv. Shapes, dtypes and strides as in flashjit_attention_forward; dout and dq like
 *  q, dk and dv like k. dk and dv sum over the query heads sharing a key/value head.
 *  attention->deterministic chooses how dq is summed, and so which gradients repeat bit for
 *  bit between runs (see that field). Errors as in flashjit_attention_forward. */
flashjit_status flashjit_attention_backward(flashjit_runtime* runtime,
                                            const flashjit_attention* attention,
                                            const flashjit_tensor* q, const flashjit_tensor* k,
                                            const flashjit_tensor* v, const flashjit_tensor* o,
                                            const flashjit_tensor* lse, const flashjit_tensor* dout,
                                            const flashjit_tensor* dq, const flashjit_tensor* dk,
                                            const flashjit_tensor* dv, void* stream);

/** The batch of an inference forward call (flashjit::Sequences): each member NULL (or with
 *  NULL data) when absent; index arrays are FLASHJIT_DTYPE_I32 with unit last stride.
 *  attention->batch is the number of sequences, seqlen_q and seqlen_k the longest lengths. */
typedef struct flashjit_sequences {
  /** [batch + 1] from 0, nondecreasing: q and o packed [total_q, heads_q, head_dim], lse
   *  [heads_q, total_q]. */
  const flashjit_tensor* cu_seqlens_q;
  /** [batch + 1]: k and v packed [total_k, heads_kv, head_dim]; not with a page table. */
  const flashjit_tensor* cu_seqlens_k;
  /** [batch]: each sequence's key count (required with a page table; with cu_seqlens_k, how
   *  many of its packed keys are used). */
  const flashjit_tensor* seqlens_k;
  /** [batch, max_pages]: k and v are [num_pages, page_size, heads_kv, head_dim] pages,
   *  page_size any positive count (1 included). */
  const flashjit_tensor* page_table;
  /** Split-KV CTAs per query block: 0 chooses, 1 to 64 forces. */
  int splits;
  /** [batch, seqlen_new, heads_kv, head_dim]: new keys and values written into the cache (k
   *  and v) at positions seqlens_k[b] onward before the attention, which then sees
   *  seqlens_k[b] + seqlen_new keys (flashjit::Sequences::k_new). Both or neither. */
  const flashjit_tensor* k_new;
  const flashjit_tensor* v_new;
  /** fp32 [positions, rotary_dim / 2]: rotary embedding of q and k_new on their way in
   *  (flashjit::Sequences::rotary_cos). Both or neither; requires k_new. */
  const flashjit_tensor* rotary_cos;
  const flashjit_tensor* rotary_sin;
  /** Nonzero: dims 2i and 2i + 1 rotate together (GPT-J); zero: i and i + rotary_dim / 2. */
  int rotary_interleaved;
  /** [batch]: sequence b's row of a dense cache (flashjit::Sequences::cache_batch_idx). */
  const flashjit_tensor* cache_batch_idx;
  /** [batch]: where sequence b's keys start in its cache row (Sequences::cache_leftpad). */
  const flashjit_tensor* cache_leftpad;
  /** fp32 [1], [heads_kv] or [batch, heads_kv]: an E4M3 cache's descale factors, its true keys
   *  and values being the stored ones times these (flashjit::Sequences::k_descale). Each
   *  optional (1). */
  const flashjit_tensor* k_descale;
  const flashjit_tensor* v_descale;
  /** [batch]: how many of sequence b's queries are used (flashjit::Sequences::seqused_q):
   *  rows past it are not read, their o (dq) rows written 0 and lse -inf. */
  const flashjit_tensor* seqused_q;
} flashjit_sequences;

/** Fills *sequences with no arrays, splits 0 (chosen) and no append. NULL is ignored. */
void flashjit_sequences_init(flashjit_sequences* sequences);

/** Attention forward for inference batches (flashjit::Runtime::forward with Sequences):
 *  variable lengths, paged KV caches, decoding with GQA packing and split-KV, the splits merged
 *  exactly. Arguments as flashjit_attention_forward except where *sequences packs them.
 *  Errors: INVALID_ARGUMENT naming the argument ("sequences.page_table" with the position and
 *  value of a bad index, ...), nothing launched or written then; others as
 *  flashjit_attention_forward. */
flashjit_status flashjit_attention_forward_sequences(
    flashjit_runtime* runtime, const flashjit_attention* attention,
    const flashjit_sequences* sequences, const flashjit_tensor* q, const flashjit_tensor* k,
    const flashjit_tensor* v, const flashjit_tensor* o, const flashjit_tensor* lse, void* stream);

/** Attention backward of a variable-length batch (flashjit::Runtime::backward with Sequences):
 *  sequences may hold cu_seqlens_q, cu_seqlens_k, seqlens_k and seqused_q only (the used keys
 *  and queries; the rest is forward-only). dout and dq like q, dk and dv like k, lse as the forward
 * wrote it (required). attention->deterministic as in flashjit_attention_backward. Errors as
 *  flashjit_attention_forward_sequences. */
flashjit_status flashjit_attention_backward_sequences(
    flashjit_runtime* runtime, const flashjit_attention* attention,
    const flashjit_sequences* sequences, const flashjit_tensor* q, const flashjit_tensor* k,
    const flashjit_tensor* v, const flashjit_tensor* o, const flashjit_tensor* lse,
    const flashjit_tensor* dout, const flashjit_tensor* dq, const flashjit_tensor* dk,
    const flashjit_tensor* dv, void* stream);

/* ---- Merging partial states ------------------------------------------------------------ */

/** Merges partial attention states over disjoint key sets into the exact state over their
 *  union (flashjit::Runtime::merge_states): per (token, head), lse = log sum_i exp(lse_i) and
 *  o = sum_i exp(lse_i - lse) o_i. partial_o is [num_partials, tokens, heads, head_dim]
 *  (F16, BF16 or F32; num_partials >= 1, head_dim 1 to 1024, unit head_dim stride);
 *  partial_lse F32 [num_partials, tokens, heads]; o [tokens, heads, head_dim] in partial_o's
 *  dtype or F32 (F32 partials into any), unit head_dim stride; lse F32 [tokens, heads], or NULL (or
 * NULL data) to skip it. LSEs are natural-log, as flashjit_attention_forward writes them
 * (FlashInfer's are base 2: multiply by ln 2 first). A partial with lse_i = -inf contributes
 * nothing; a row where all are -inf gets o = 0, lse = -inf. Outputs must not overlap the inputs or
 * each other. Errors: INVALID_ARGUMENT naming the argument (nothing is launched then); others as in
 * flashjit_attention_forward. */
flashjit_status flashjit_merge_states(flashjit_runtime* runtime, const flashjit_tensor* partial_o,
                                      const flashjit_tensor* partial_lse, const flashjit_tensor* o,
                                      const flashjit_tensor* lse, void* stream);

/** Merges state b into state a in place (flashjit::Runtime::merge_state_in_place), cascade
 *  attention's step: o_a and o_b [tokens, heads, head_dim] of one dtype (F16, BF16 or F32),
 *  unit head_dim stride; lse_a and lse_b F32 [tokens, heads], natural log. (o_a, lse_a) is
 *  replaced by the merged state; b is only read and must not overlap a. Errors as in
 *  flashjit_merge_states. */
flashjit_status flashjit_merge_state_in_place(flashjit_runtime* runtime, const flashjit_tensor* o_a,
                                              const flashjit_tensor* lse_a,
                                              const flashjit_tensor* o_b,
                                              const flashjit_tensor* lse_b, void* stream);

/* ---- Layer norm ------------------------------------------------------------------------ */

/** How a layer norm call normalizes, and the fused add before it (flashjit::LayerNorm). The
 *  tensor members are NULL (or have NULL data) when absent. */
typedef struct flashjit_layer_norm {
  /** Added to the variance (the mean square for RMS norm); finite and > 0 (default 1e-5). */
  float epsilon;
  /** Nonzero: RMS norm, y = x / sqrt(mean(x^2) + epsilon) * gamma; no mean, no beta. */
  int rms;
  /** Forward only: [cols], added to every row of the input before the norm. */
  const flashjit_tensor* bias;
  /** Forward only: [rows, cols], added to the input before the norm. */
  const flashjit_tensor* residual;
  /** Forward only, written: [rows, cols], input + bias + residual rounded to the dtype (the
   *  tensor normalized, and the backward's x). */
  const flashjit_tensor* sum;
} flashjit_layer_norm;

/** Fills *options with the C++ defaults: epsilon 1e-5, layer norm (not RMS), no fused add.
 *  NULL is ignored. */
void flashjit_layer_norm_init(flashjit_layer_norm* options);

/** Layer norm forward (flashjit::Runtime::layer_norm) over each row of x [rows, cols], cols 1 to
 *  65536: y = (x - mean) / sqrt(var + epsilon) * gamma + beta (var biased), or RMS norm. x, y
 *  (and residual, sum) have unit column stride; gamma, beta (and bias) are contiguous [cols];
 *  one dtype, F16, BF16 or F32. mean and rstd are F32 [rows] with any stride, written for the
 *  backward, each
 *  skipped when NULL (or NULL data); RMS norm takes no beta and writes no mean (both NULL).
 *  Errors: INVALID_ARGUMENT naming the argument (nothing is launched or written then); others as
 *  in flashjit_attention_forward. */
flashjit_status flashjit_layer_norm_forward(flashjit_runtime* runtime,
                                            const flashjit_layer_norm* options,
                                            const flashjit_tensor* x, const flashjit_tensor* gamma,
                                            const flashjit_tensor* beta, const flashjit_tensor* y,
                                            const flashjit_tensor* mean,
                                            const flashjit_tensor* rstd, void* stream);

/** Layer norm backward (flashjit::Runtime::layer_norm_backward): given dy of a forward call with
 *  the same options->rms, its x (its sum when fused), gamma, mean (NULL for RMS norm) and rstd,
 *  writes dx (also the gradient of a fused call's input and residual), dgamma, dbeta (NULL for
 *  RMS norm) and, when not NULL, dbias (the column sums of dx). options' bias, residual and sum
 *  must be NULL. dgamma, dbeta and dbias are summed in a fixed order: the same bits on every
 *  run. Errors as in flashjit_layer_norm_forward. */
flashjit_status flashjit_layer_norm_backward(
    flashjit_runtime* runtime, const flashjit_layer_norm* options, const flashjit_tensor* x,
    const flashjit_tensor* gamma, const flashjit_tensor* mean, const flashjit_tensor* rstd,
    const flashjit_tensor* dy, const flashjit_tensor* dx, const flashjit_tensor* dgamma,
    const flashjit_tensor* dbeta, const flashjit_tensor* dbias, void* stream);

/* ---- Multi-scale attention (retention) ------------------------------------------------ */

/** Which mask a multi-scale attention call applies (flashjit::MultiScaleMask). */
typedef enum flashjit_multiscale_mask {
  /** M[n, m] = gamma_h^(n - m) for m <= n (n = i + seqlen_k - seqlen_q), else 0: the mask
   *  argument is F32 [heads_q], one rate per query head, in [0, 1]. */
  FLASHJIT_MULTISCALE_DECAY = 0,
  /** M given as an F32 tensor [heads_q, seqlen_q, seqlen_k] with unit last stride. */
  FLASHJIT_MULTISCALE_TENSOR = 1
} flashjit_multiscale_mask;

/** Shape and options of a multi-scale attention call (flashjit::MultiScaleAttention). */
typedef struct flashjit_multiscale_attention {
  int64_t batch;
  int64_t heads_q;
  int64_t heads_kv; /**< heads_q a multiple of it (GQA/MQA) */
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t head_dim; /**< a multiple of 8 from 8 to 256 */
  /** The factor of q k^T; 0 means 1/sqrt(head_dim). */
  float scale;
  flashjit_multiscale_mask mask;
} flashjit_multiscale_attention;

/** Fills *attention with the C++ defaults: sizes 1, head_dim 64, scale 0 (1/sqrt(head_dim)),
 *  the decay mask. NULL is ignored. */
void flashjit_multiscale_attention_init(flashjit_multiscale_attention* attention);

/** Multi-scale attention forward (flashjit::Runtime::multiscale_forward): per (batch, query
 *  head), S = scale * (q k^T) o M, r = rowsum(|S|), o = S v / max(r, 1). q, k, v, o as in
 *  flashjit_attention_forward (F16 or BF16); mask as attention->mask says; rowsum is F32
 *  [batch, heads_q, seqlen_q] with unit last stride (r, for the backward), or NULL (or NULL
 *  data) to skip it. Errors: INVALID_ARGUMENT naming the argument (nothing is launched then);
 *  others as in flashjit_attention_forward. */
flashjit_status flashjit_multiscale_forward(flashjit_runtime* runtime,
                                            const flashjit_multiscale_attention* attention,
                                            const flashjit_tensor* q, const flashjit_tensor* k,
                                            const flashjit_tensor* v, const flashjit_tensor* mask,
                                            const flashjit_tensor* o, const flashjit_tensor* rowsum,
                                            void* stream);

/** Multi-scale attention backward (flashjit::Runtime::multiscale_backward): given dout of a
 *  forward call with the same arguments, its o and rowsum (required), writes dq, dk, dv (dk and
 *  dv summed over the query heads sharing a key/value head) and, for the mask tensor when dmask
 *  is not NULL, dmask = dL/dM [heads_q, seqlen_q, seqlen_k] F32 summed over the batch. No
 *  atomics: the same inputs give the same bits on every run with the same kernel config, as
 *  the attention backward's deterministic mode. Errors as in flashjit_multiscale_forward. */
flashjit_status flashjit_multiscale_backward(
    flashjit_runtime* runtime, const flashjit_multiscale_attention* attention,
    const flashjit_tensor* q, const flashjit_tensor* k, const flashjit_tensor* v,
    const flashjit_tensor* mask, const flashjit_tensor* o, const flashjit_tensor* rowsum,
    const flashjit_tensor* dout, const flashjit_tensor* dq, const flashjit_tensor* dk,
    const flashjit_tensor* dv, const flashjit_tensor* dmask, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FLASHJIT_FLASHJIT_C_H */

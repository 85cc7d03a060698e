#pragma once
// Host side of the forward's inference layouts (Runtime::forward with Sequences): variable
// lengths, paged K/V, GQA packing and split-KV on the mma.sync kernel, with the split
// partials merged by the merge_states op. Validation, the index checks, the kernel's arguments
// and the launches; the configs (layout flags, split count, the decoding space) are in
// attention_inference_config.hpp.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "attention/attention_calls.hpp"
#include "attention/attention_forward.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "flashjit/attention.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// A validated inference call's tensors as the kernel sees them: packed tensors become rank-4
/// views with batch 1 (batch stride 0), paged k and v keep their [pages, page_size, ...].
struct InferenceTensors {
  TensorView q, k, v, o, lse;
  std::int64_t total_q = 0;  ///< query rows over the batch (tokens of the split partials)
  std::int64_t num_pages = 0;
  std::int64_t page_size = 0;
  std::int64_t seqlen_new = 0;  ///< keys each sequence appends (Sequences::k_new), else 0
  std::int64_t cache_rows = 0;  ///< batch rows of dense k and v (cache_batch_idx's range)
  std::int64_t rotary_positions = 0;    ///< positions of the rotary tables (0: no rotary)
  bool rotary_queries_advance = false;  ///< kvcache_append.hpp's rotary_queries_advance
};

/// q, o (dout, dq) of an inference call, checked: packed [total_q, heads_q, head_dim] when
/// `packed` (of `total_q` rows when that is >= 0), else [batch, seqlen_q, heads_q, head_dim].
/// `value`: o's and dout's head dim, attention.value_head_dim(), instead of head_dim.
/// Returns the kernels' rank-4 view (a packed one as batch 1 with batch stride 0).
TensorView inference_query_tensor(const TensorView& view, const std::string& name,
                                  const Attention& attention, bool packed, std::int64_t total_q,
                                  bool value = false);
/// k, v (dk, dv) likewise: packed [total_k, heads_kv, head_dim] or dense (`value`: v's and
/// dv's head dim).
TensorView inference_key_tensor(const TensorView& view, const std::string& name,
                                const Attention& attention, bool packed, std::int64_t total_k,
                                bool value = false);

/// Checks an inference call's host-visible arguments (shapes, dtypes, strides, the index
/// arrays' shapes and dtypes); throws InvalidArgument naming the first bad one
/// ("sequences.page_table", "k.shape", ...). Returns the kernel's views of the tensors.
InferenceTensors validate_inference_arguments(const Attention& attention,
                                              const Sequences& sequences, const TensorView& q,
                                              const TensorView& k, const TensorView& v,
                                              const TensorView& o, const TensorView& lse);

/// Host copies of the index arrays (empty where absent).
struct HostIndices {
  std::vector<std::int32_t> cu_seqlens_q, cu_seqlens_k, seqlens_k, seqused_q, page_table;
  std::int64_t page_table_row = 0;  ///< elements between the page table's rows
  std::vector<std::int32_t> cache_batch_idx, cache_leftpad;
};

/// One index array of a call, with the name errors give it ("sequences.page_table").
struct IndexArray {
  const TensorView* view;
  const char* name;
};
/// The call's index arrays (cu_seqlens_q, cu_seqlens_k, seqlens_k, seqused_q, page_table,
/// cache_batch_idx, cache_leftpad), each possibly absent: the one list that launches and
/// overlap checks walk.
std::array<IndexArray, 7> index_arrays(const Sequences& sequences);

/// The index arrays a launch reads, named for the emulator's findings, added to `buffers`.
void add_index_buffers(const Sequences& sequences, std::vector<detail::KernelBuffer>& buffers);

/// The kernels' view of the index arrays (SequenceIndex), with pages of `page_size` keys.
SequenceIndex sequence_index(const Sequences& sequences, std::int64_t page_size);

/// Host copies of the call's index arrays (a synchronous copy on a GPU).
HostIndices read_indices(detail::RuntimeBackend& backend, const Sequences& sequences);

/// Checks the index arrays' values against the validated call: cu_seqlens from 0 and
/// nondecreasing, each sequence within the longest and the packed tensors, key counts within
/// seqlen_k (and the packed keys, less the appended keys), used query counts within the
/// sequence's rows, page table entries of the pages a
/// sequence uses within [0, num_pages), cache rows within the cache, left pads within the
/// sequence's count. Throws InvalidArgument("sequences.<array>") naming the position and value.
void check_index_values(const Attention& attention, const InferenceTensors& tensors,
                        const HostIndices& indices);

/// The device-side index check's kernel (ops/attention/inference/index_check_kernel.cuh) for
/// `arch`: op "attention-forward", readable name "attention_index_check".
detail::KernelSpec index_check_spec(const std::string& arch);

/// The first bad index the device-side pass finds: its sequence, what it is (IndexViolation)
/// and where (clamped to 2^24 - 1), or none.
struct IndexViolationFound {
  bool found = false;
  std::int64_t sequence = 0;
  unsigned kind = 0;
  std::int64_t position = 0;
};

/// Runs the device-side pass over the index arrays of a validated call on `backend` (in
/// `stream`, then waits for it: the answer decides whether the call may launch).
IndexViolationFound find_index_violation(detail::RuntimeBackend& backend,
                                         const Attention& attention, const Sequences& sequences,
                                         const InferenceTensors& tensors, Stream stream);

/// The index check of a validated call: on the emulator, the host check of the copied arrays
/// (always); on a GPU with `check_indices`, the device-side pass, and only when it finds a bad
/// index the host check that names it. Off, nothing.
void check_indices_of(detail::RuntimeBackend& backend, const Attention& attention,
                      const Sequences& sequences, const InferenceTensors& tensors,
                      bool check_indices, Stream stream);

/// An inference forward with an explicit config (the autotuner, tests) on `backend`: validates
/// the call, checks the index arrays as run_attention_forward_sequences does, and that
/// `config` has the call's layout flags (InvalidArgument "config" otherwise), then launches the
/// forward and, with splits, the merge. Nothing is launched or written on bad input.
void attention_forward_sequences(detail::RuntimeBackend& backend, const Attention& attention,
                                 const Sequences& sequences, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& o,
                                 const TensorView& lse, const InferenceConfig& config,
                                 bool check_indices, Stream stream);

/// Runtime::forward(attention, sequences, ...) on `backend`: validates, checks the index
/// arrays (always on the emulator, on the cuda backend when `check_indices`), then launches
/// the forward and, with splits, the merge. A decoding call (seqlen_q at most
/// kMaxDecodeQueries) that leaves the split count to the library runs the config `choice`
/// gives (the tuned one); other calls run default_inference_config. Nothing is launched or
/// written on bad input.
void run_attention_forward_sequences(detail::RuntimeBackend& backend, ConfigChoice& choice,
                                     const Attention& attention, const Sequences& sequences,
                                     const TensorView& q, const TensorView& k, const TensorView& v,
                                     const TensorView& o, const TensorView& lse, bool check_indices,
                                     Stream stream);

/// Runtime::backward(attention, sequences, ...) on `backend`: the backward of a variable-length
/// batch (cu_seqlens_q and/or cu_seqlens_k; no pages, no per-sequence key counts, no splits).
/// Validates everything first and checks the index arrays as the forward does; dk and dv are
/// written for every packed key row of a sequence. Nothing is launched or written on bad input.
void run_attention_backward_sequences(detail::RuntimeBackend& backend, const Attention& attention,
                                      const Sequences& sequences, const TensorView& q,
                                      const TensorView& k, const TensorView& v, const TensorView& o,
                                      const TensorView& lse, const TensorView& dout,
                                      const TensorView& dq, const TensorView& dk,
                                      const TensorView& dv, bool check_indices, Stream stream);

}  // namespace flashjit::kernels

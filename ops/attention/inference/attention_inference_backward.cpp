// The backward of a variable-length batch: the inference forward's validation for q, k, v, o
// and lse, the gradients checked like them, then the dense backward's default kernels in their
// Varlen specialization (each CTA rebases the params to its own sequence).
#include <utility>

#include "attention/attention_backward.hpp"
#include "attention/attention_common.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/inference/unused_rows.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

/// What the backward takes of Sequences: packed queries and keys, their used counts (seqused_q,
/// seqlens_k), nothing forward-only.
void check_backward_sequences(const Sequences& s) {
  if (present(s.page_table)) {
    throw InvalidArgument("sequences.page_table",
                          "is forward-only: the backward takes packed or dense keys, not pages");
  }
  if (s.splits != 0) {
    throw InvalidArgument("sequences.splits", "is forward-only (split-KV); leave it 0");
  }
  const std::pair<const TensorView*, const char*> forward_only[] = {
      {&s.cache_batch_idx, "sequences.cache_batch_idx"},
      {&s.cache_leftpad, "sequences.cache_leftpad"},
      {&s.k_new, "sequences.k_new"},
      {&s.v_new, "sequences.v_new"},
      {&s.rotary_cos, "sequences.rotary_cos"},
      {&s.rotary_sin, "sequences.rotary_sin"},
      {&s.k_descale, "sequences.k_descale"},
      {&s.v_descale, "sequences.v_descale"}};
  for (const auto& [view, name] : forward_only) {
    if (present(*view))
      throw InvalidArgument(name, "is forward-only (a KV cache's); leave it absent");
  }
}

}  // namespace

void run_attention_backward_sequences(detail::RuntimeBackend& backend, const Attention& a,
                                      const Sequences& s, const TensorView& q, const TensorView& k,
                                      const TensorView& v, const TensorView& o,
                                      const TensorView& lse, const TensorView& dout,
                                      const TensorView& dq, const TensorView& dk,
                                      const TensorView& dv, bool check_indices, Stream stream) {
  validate_attention(a);  // head dims up to 256 (the inference forward's past them are not here)
  check_backward_sequences(s);
  for (const auto& [view, name] : {std::pair{&k, "k"}, std::pair{&v, "v"}}) {
    if (view->dtype == DType::e4m3) {
      throw InvalidArgument(std::string(name) + ".dtype",
                            "is e4m3; an fp8 cache is for the forward (decoding): the backward "
                            "takes fp16 or bf16");
    }
  }
  if (!present(lse)) throw InvalidArgument("lse", "is required: the backward recomputes P from it");
  const InferenceTensors t = validate_inference_arguments(a, s, q, k, v, o, lse);
  const bool packed_q = present(s.cu_seqlens_q), packed_k = present(s.cu_seqlens_k);
  const TensorView dout4 = inference_query_tensor(dout, "dout", a, packed_q, t.total_q, true);
  const TensorView dq4 = inference_query_tensor(dq, "dq", a, packed_q, t.total_q);
  const std::int64_t total_k = packed_k ? k.shape[0] : -1;
  const TensorView dk4 = inference_key_tensor(dk, "dk", a, packed_k, total_k);
  const TensorView dv4 = inference_key_tensor(dv, "dv", a, packed_k, total_k, true);
  check_same_dtype(dout, q, "dout", "q");
  check_same_dtype(dq, q, "dq", "q");
  check_same_dtype(dk, q, "dk", "q");
  check_same_dtype(dv, q, "dv", "q");
  check_gradients_disjoint(a, q, k, v, o, lse, dout, dq, dk, dv);
  for (const auto& [index, name] : {std::pair{&s.cu_seqlens_q, "sequences.cu_seqlens_q"},
                                    std::pair{&s.cu_seqlens_k, "sequences.cu_seqlens_k"}}) {
    if (!present(*index)) continue;
    for (const auto& [gradient, gradient_name] :
         {std::pair{&dq, "dq"}, std::pair{&dk, "dk"}, std::pair{&dv, "dv"}}) {
      check_disjoint(*gradient, *index, gradient_name, name, Role::input);
    }
  }
  check_indices_of(backend, a, s, t, check_indices, stream);
  if (a.batch == 0) return;
  // The dense backward's default in its varlen form: on sm_90a the TMA backward where it is the
  // default (each CTA its sequence's rows), the mma.sync kernels elsewhere.
  const std::string& arch = backend.info().arch();
  BackwardConfig config =
      score_modifiers(a).empty()
          ? default_backward_config(q.dtype, static_cast<int>(a.head_dim), forward_mask_kind(a),
                                    a.softcap > 0.0f, a.deterministic, arch)
          : modifiers_backward_config(q.dtype, a, arch);
  if (config.tma &&
      (a.value_head_dim() != a.head_dim || present(s.seqused_q) || present(s.seqlens_k))) {
    // The TMA backward's packed form writes dV head_dim wide (checking head_dim_v there made it
    // spill): a smaller value head dim takes the mma.sync kernels. So do used counts: TMA's
    // last blocks read on past them into rows that may hold anything (0 · NaN is NaN), where
    // mma.sync's loads stop at the length.
    config = fallback_backward_config(q.dtype, static_cast<int>(a.head_dim), forward_mask_kind(a),
                                      a.softcap > 0.0f, a.deterministic, arch);
  }
  config.varlen = true;
  check_config_fits_device(config.shared_bytes(), backend.info());
  std::vector<detail::KernelBuffer> index_buffers;
  add_index_buffers(s, index_buffers);
  launch_attention_backward_sequences(backend, a, sequence_index(s, 0), index_buffers, t.q, t.k,
                                      t.v, t.o, t.lse, dout4, dq4, dk4, dv4, config, stream);
  // The rows past the used queries and keys: gradients 0 (they touched nothing).
  const SequenceRows queries{s.cu_seqlens_q, s.seqused_q, a.batch, a.seqlen_q};
  const SequenceRows keys{s.cu_seqlens_k, s.seqlens_k, a.batch, a.seqlen_k};
  fill_unused_rows(backend, dq4, false, queries, 0.0f, stream);
  fill_unused_rows(backend, dk4, false, keys, 0.0f, stream);
  fill_unused_rows(backend, dv4, false, keys, 0.0f, stream);
}

}  // namespace flashjit::kernels

// Attention's public face: Runtime::forward, backward and build_block_mask
// (flashjit/runtime.hpp) and their C functions (flashjit_c.h), built into the facade (api/) from
// this folder.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "api/c_api_support.hpp"
#include "api/runtime_parts.hpp"
#include "attention/attention_calls.hpp"
#include "attention/attention_forward.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/modifiers/automatic_block_mask.hpp"
#include "attention/modifiers/block_mask.hpp"
#include "attention/sinks/attention_sinks.hpp"
#include "autotune/tuning_state.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/error.hpp"

namespace flashjit {

void Runtime::forward(const Attention& attention, const TensorView& q, const TensorView& k,
                      const TensorView& v, const TensorView& o, const TensorView& lse,
                      Stream stream) {
  detail::RuntimeBackend& backend = detail::backend_of(*this);
  kernels::validate_sinks(attention, false);
  // With sinks the forward's lse is needed even where the caller skips it.
  const kernels::SinkLse written = kernels::lse_for_sinks(
      backend, attention, lse, {attention.batch, attention.heads_q, attention.seqlen_q}, stream);
  kernels::run_attention_forward(backend, detail::tuning_of(*this), attention, q, k, v, o,
                                 written.view, stream);
  kernels::apply_sinks(backend, attention, o, written.view, stream);
}

void Runtime::prepare(const Attention& attention, DType dtype, bool backward) {
  if (dtype != DType::f16 && dtype != DType::bf16 && dtype != DType::e4m3) {
    throw InvalidArgument("dtype", "is " + std::string(dtype_name(dtype)) +
                                       "; must be f16, bf16 or e4m3 (the fp8 forward)");
  }
  if (dtype == DType::e4m3 && backward) {
    throw InvalidArgument("backward", "is true with dtype e4m3: the fp8 forward has no backward");
  }
  kernels::validate_attention(attention);
  detail::RuntimeBackend& backend = detail::backend_of(*this);
  autotune::TuningState& tuning = detail::tuning_of(*this);
  const std::string arch = backend.info().arch();
  std::vector<detail::KernelSpec> specs;
  const auto add = [&](bool is_backward, const Attention& call) {
    const kernels::AttentionProblem problem(is_backward, dtype, call);
    if (problem.empty()) return;
    autotune::TunedConfig config = autotune::known_config(tuning, problem);
    if (!is_backward) {  // as the forward adjusts it (plan_attention_forward)
      config = autotune::TunedConfig(
          kernels::launched_forward_config(call, config.get<kernels::ForwardConfig>()));
    }
    for (detail::KernelSpec& spec : problem.specs(config, arch)) specs.push_back(std::move(spec));
  };
  const Attention call = kernels::with_automatic_block_mask(backend, attention, Stream{});
  add(false, call);
  if (backward) add(true, call);
  backend.executor().prepare(specs);
}

void Runtime::build_block_mask(const Attention& attention, const TensorView& block_mask,
                               Stream stream) {
  kernels::run_build_block_mask(detail::backend_of(*this), attention, block_mask, stream);
}

void Runtime::forward(const Attention& attention, const Sequences& sequences, const TensorView& q,
                      const TensorView& k, const TensorView& v, const TensorView& o,
                      const TensorView& lse, Stream stream) {
  detail::RuntimeBackend& backend = detail::backend_of(*this);
  kernels::validate_sinks(attention, false);
  const bool packed = q.rank == 3;  // [total_q, heads_q, head_dim]; lse [heads_q, total_q]
  const kernels::SinkLse written = kernels::lse_for_sinks(
      backend, attention, lse,
      packed ? std::initializer_list<std::int64_t>{attention.heads_q, q.shape[0]}
             : std::initializer_list<std::int64_t>{attention.batch, attention.heads_q,
                                                   attention.seqlen_q},
      stream);
  kernels::run_attention_forward_sequences(backend, detail::tuning_of(*this), attention,
                                           sequences, q, k, v, o, written.view,
                                           detail::RuntimeParts::check_indices(*this), stream);
  kernels::apply_sinks(backend, attention, o, written.view, stream);
}

void Runtime::backward(const Attention& attention, const TensorView& q, const TensorView& k,
                       const TensorView& v, const TensorView& o, const TensorView& lse,
                       const TensorView& dout, const TensorView& dq, const TensorView& dk,
                       const TensorView& dv, Stream stream) {
  kernels::validate_sinks(attention, true);
  kernels::run_attention_backward(detail::backend_of(*this), detail::tuning_of(*this), attention, q,
                                  k, v, o, lse, dout, dq, dk, dv, stream);
  kernels::sink_gradient(detail::backend_of(*this), attention, o, lse, dout, stream);
}

void Runtime::backward(const Attention& attention, const Sequences& sequences, const TensorView& q,
                       const TensorView& k, const TensorView& v, const TensorView& o,
                       const TensorView& lse, const TensorView& dout, const TensorView& dq,
                       const TensorView& dk, const TensorView& dv, Stream stream) {
  kernels::validate_sinks(attention, true);
  kernels::run_attention_backward_sequences(detail::backend_of(*this), attention, sequences, q, k,
                                            v, o, lse, dout, dq, dk, dv,
                                            detail::RuntimeParts::check_indices(*this), stream);
  kernels::sink_gradient(detail::backend_of(*this), attention, o, lse, dout, stream);
}

}  // namespace flashjit

namespace {

using flashjit::InvalidArgument;
using flashjit::c_api::guarded;
using flashjit::c_api::optional_view;
using flashjit::c_api::required;
using flashjit::c_api::required_view;
using flashjit::c_api::to_view;

static_assert(FLASHJIT_MAX_CAPTURES == flashjit::Capture::kMaxPerCall);

flashjit::Attention to_attention(const flashjit_attention& a) {
  flashjit::Attention attention{.batch = a.batch,
                                .heads_q = a.heads_q,
                                .heads_kv = a.heads_kv,
                                .seqlen_q = a.seqlen_q,
                                .seqlen_k = a.seqlen_k,
                                .head_dim = a.head_dim,
                                .head_dim_v = a.head_dim_v,
                                .causal = a.causal != 0,
                                .window_left = a.window_left,
                                .window_right = a.window_right,
                                .softcap = a.softcap,
                                .deterministic = a.deterministic != 0,
                                .dropout_p = a.dropout_p,
                                .dropout_seed = a.dropout_seed,
                                .dropout_offset = a.dropout_offset};
  // NaN is neither "unset" (<= 0) nor a scale; left through it would silently mean unset.
  if (std::isnan(a.scale)) throw InvalidArgument("attention.scale", "is NaN");
  if (a.scale > 0.0f) attention.scale = a.scale;
  if (a.score_mod != nullptr) attention.score_mod = a.score_mod;
  if (a.mask_mod != nullptr) attention.mask_mod = a.mask_mod;
  attention.block_mask = optional_view(a.block_mask, "attention.block_mask");
  attention.sinks = optional_view(a.sinks, "attention.sinks");
  attention.sinks_grad = optional_view(a.sinks_grad, "attention.sinks_grad");
  attention.q_descale = optional_view(a.q_descale, "attention.q_descale");
  attention.k_descale = optional_view(a.k_descale, "attention.k_descale");
  attention.v_descale = optional_view(a.v_descale, "attention.v_descale");
  // The count is checked before any entry is read: a count past the array would read past it.
  if (a.num_captures < 0 || a.num_captures > FLASHJIT_MAX_CAPTURES) {
    throw InvalidArgument("attention.num_captures",
                          "is " + std::to_string(a.num_captures) + "; must be 0 to " +
                              std::to_string(FLASHJIT_MAX_CAPTURES) + " (FLASHJIT_MAX_CAPTURES)");
  }
  if (a.num_captures > 0 && a.captures == nullptr) {
    throw InvalidArgument("attention.num_captures", "is " + std::to_string(a.num_captures) +
                                                        " but attention.captures is NULL");
  }
  for (int i = 0; i < a.num_captures; ++i) {
    const std::string field = "attention.captures[" + std::to_string(i) + "]";
    const flashjit_capture& c = a.captures[i];
    if (c.name == nullptr) throw InvalidArgument(field + ".name", "is NULL");
    attention.captures.push_back(
        {c.name, to_view(c.tensor, field + ".tensor"), optional_view(c.grad, field + ".grad")});
  }
  return attention;
}

flashjit::Sequences to_sequences(const flashjit_sequences& s) {
  flashjit::Sequences cpp;
  cpp.cu_seqlens_q = optional_view(s.cu_seqlens_q, "sequences.cu_seqlens_q");
  cpp.cu_seqlens_k = optional_view(s.cu_seqlens_k, "sequences.cu_seqlens_k");
  cpp.seqlens_k = optional_view(s.seqlens_k, "sequences.seqlens_k");
  cpp.page_table = optional_view(s.page_table, "sequences.page_table");
  cpp.splits = s.splits;
  cpp.k_new = optional_view(s.k_new, "sequences.k_new");
  cpp.v_new = optional_view(s.v_new, "sequences.v_new");
  cpp.rotary_cos = optional_view(s.rotary_cos, "sequences.rotary_cos");
  cpp.rotary_sin = optional_view(s.rotary_sin, "sequences.rotary_sin");
  cpp.rotary_interleaved = s.rotary_interleaved != 0;
  cpp.cache_batch_idx = optional_view(s.cache_batch_idx, "sequences.cache_batch_idx");
  cpp.cache_leftpad = optional_view(s.cache_leftpad, "sequences.cache_leftpad");
  cpp.k_descale = optional_view(s.k_descale, "sequences.k_descale");
  cpp.v_descale = optional_view(s.v_descale, "sequences.v_descale");
  cpp.seqused_q = optional_view(s.seqused_q, "sequences.seqused_q");
  return cpp;
}

}  // namespace

extern "C" {

void flashjit_attention_init(flashjit_attention* attention) {
  if (attention == nullptr) return;
  const flashjit::Attention defaults;
  *attention = {.batch = defaults.batch,
                .heads_q = defaults.heads_q,
                .heads_kv = defaults.heads_kv,
                .seqlen_q = defaults.seqlen_q,
                .seqlen_k = defaults.seqlen_k,
                .head_dim = defaults.head_dim,
                .causal = defaults.causal ? 1 : 0,
                .window_left = defaults.window_left,
                .window_right = defaults.window_right,
                .scale = defaults.scale.value_or(0.0f),
                .softcap = defaults.softcap,
                .deterministic = defaults.deterministic ? 1 : 0,
                .score_mod = nullptr,
                .mask_mod = nullptr,
                .block_mask = nullptr,
                .captures = nullptr,
                .num_captures = 0,
                .head_dim_v = defaults.head_dim_v,
                .sinks = nullptr,
                .sinks_grad = nullptr,
                .dropout_p = defaults.dropout_p,
                .dropout_seed = defaults.dropout_seed,
                .dropout_offset = defaults.dropout_offset,
                .q_descale = nullptr,
                .k_descale = nullptr,
                .v_descale = nullptr};
}

flashjit_status flashjit_attention_forward(flashjit_runtime* runtime,
                                           const flashjit_attention* attention,
                                           const flashjit_tensor* q, const flashjit_tensor* k,
                                           const flashjit_tensor* v, const flashjit_tensor* o,
                                           const flashjit_tensor* lse, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::Attention attn = to_attention(*required(attention, "attention"));
    // Converted one by one, left to right: the first bad argument is the one reported.
    const flashjit::TensorView q_view = required_view(q, "q"), k_view = required_view(k, "k"),
                               v_view = required_view(v, "v"), o_view = required_view(o, "o");
    // The forward may skip lse: a NULL descriptor or NULL data both mean "not wanted".
    const flashjit::TensorView lse_view =
        lse == nullptr || lse->data == nullptr ? flashjit::TensorView{} : to_view(*lse, "lse");
    rt.runtime.forward(attn, q_view, k_view, v_view, o_view, lse_view, stream);
  });
}

flashjit_status flashjit_attention_prepare(flashjit_runtime* runtime,
                                           const flashjit_attention* attention, int dtype,
                                           int backward) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::Attention attn = to_attention(*required(attention, "attention"));
    if (dtype != FLASHJIT_DTYPE_F16 && dtype != FLASHJIT_DTYPE_BF16 &&
        dtype != FLASHJIT_DTYPE_E4M3) {
      throw InvalidArgument("dtype", "is " + std::to_string(dtype) +
                                         "; must be FLASHJIT_DTYPE_F16, FLASHJIT_DTYPE_BF16 or "
                                         "FLASHJIT_DTYPE_E4M3 (the fp8 forward, backward 0)");
    }
    rt.runtime.prepare(attn, static_cast<flashjit::DType>(dtype), backward != 0);
  });
}

flashjit_status flashjit_build_block_mask(flashjit_runtime* runtime,
                                          const flashjit_attention* attention,
                                          const flashjit_tensor* block_mask, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::Attention attn = to_attention(*required(attention, "attention"));
    rt.runtime.build_block_mask(attn, required_view(block_mask, "block_mask"), stream);
  });
}

void flashjit_sequences_init(flashjit_sequences* sequences) {
  if (sequences == nullptr) return;
  *sequences = {.cu_seqlens_q = nullptr,
                .cu_seqlens_k = nullptr,
                .seqlens_k = nullptr,
                .page_table = nullptr,
                .splits = flashjit::Sequences{}.splits,
                .k_new = nullptr,
                .v_new = nullptr,
                .rotary_cos = nullptr,
                .rotary_sin = nullptr,
                .rotary_interleaved = 0,
                .cache_batch_idx = nullptr,
                .cache_leftpad = nullptr,
                .k_descale = nullptr,
                .v_descale = nullptr,
                .seqused_q = nullptr};
}

flashjit_status flashjit_attention_forward_sequences(
    flashjit_runtime* runtime, const flashjit_attention* attention,
    const flashjit_sequences* sequences, const flashjit_tensor* q, const flashjit_tensor* k,
    const flashjit_tensor* v, const flashjit_tensor* o, const flashjit_tensor* lse, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::Attention attn = to_attention(*required(attention, "attention"));
    const flashjit::Sequences s = to_sequences(*required(sequences, "sequences"));
    const flashjit::TensorView q_view = required_view(q, "q"), k_view = required_view(k, "k"),
                               v_view = required_view(v, "v"), o_view = required_view(o, "o");
    rt.runtime.forward(attn, s, q_view, k_view, v_view, o_view, optional_view(lse, "lse"), stream);
  });
}

flashjit_status flashjit_attention_backward_sequences(
    flashjit_runtime* runtime, const flashjit_attention* attention,
    const flashjit_sequences* sequences, const flashjit_tensor* q, const flashjit_tensor* k,
    const flashjit_tensor* v, const flashjit_tensor* o, const flashjit_tensor* lse,
    const flashjit_tensor* dout, const flashjit_tensor* dq, const flashjit_tensor* dk,
    const flashjit_tensor* dv, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::Attention attn = to_attention(*required(attention, "attention"));
    const flashjit::Sequences s = to_sequences(*required(sequences, "sequences"));
    const flashjit::TensorView q_view = required_view(q, "q"), k_view = required_view(k, "k"),
                               v_view = required_view(v, "v"), o_view = required_view(o, "o"),
                               lse_view = required_view(lse, "lse"),
                               dout_view = required_view(dout, "dout"),
                               dq_view = required_view(dq, "dq"), dk_view = required_view(dk, "dk"),
                               dv_view = required_view(dv, "dv");
    rt.runtime.backward(attn, s, q_view, k_view, v_view, o_view, lse_view, dout_view, dq_view,
                        dk_view, dv_view, stream);
  });
}

flashjit_status flashjit_attention_backward(flashjit_runtime* runtime,
                                            const flashjit_attention* attention,
                                            const flashjit_tensor* q, const flashjit_tensor* k,
                                            const flashjit_tensor* v, const flashjit_tensor* o,
                                            const flashjit_tensor* lse, const flashjit_tensor* dout,
                                            const flashjit_tensor* dq, const flashjit_tensor* dk,
                                            const flashjit_tensor* dv, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::Attention attn = to_attention(*required(attention, "attention"));
    const flashjit::TensorView q_view = required_view(q, "q"), k_view = required_view(k, "k"),
                               v_view = required_view(v, "v"), o_view = required_view(o, "o"),
                               lse_view = required_view(lse, "lse"),
                               dout_view = required_view(dout, "dout"),
                               dq_view = required_view(dq, "dq"), dk_view = required_view(dk, "dk"),
                               dv_view = required_view(dv, "dv");
    rt.runtime.backward(attn, q_view, k_view, v_view, o_view, lse_view, dout_view, dq_view, dk_view,
                        dv_view, stream);
  });
}

}  // extern "C"

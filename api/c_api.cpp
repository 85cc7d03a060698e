// The C API (flashjit_c.h): converters from its plain structs to the C++ types, and one guard
// that turns every exception into a status and a per-thread message, so nothing unwinds
// through a C caller's frames.
#include <cmath>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>

#include "flashjit/attention.hpp"
#include "flashjit/error.hpp"
#include "flashjit/flashjit_c.h"
#include "flashjit/layer_norm.hpp"
#include "flashjit/runtime.hpp"
#include "flashjit/tensor.hpp"
#include "flashjit/version.hpp"

// The runtime and the buffers handed out by flashjit_allocate, which C frees by address.
struct flashjit_runtime {
  explicit flashjit_runtime(const flashjit::RuntimeOptions& options) : runtime(options) {}

  flashjit::Runtime runtime;
  std::mutex buffers_mutex;
  // Declared after `runtime`: destroyed first, while the runtime can still free them.
  std::unordered_map<void*, flashjit::DeviceBuffer> buffers;
};

namespace {

using flashjit::InvalidArgument;

static_assert(FLASHJIT_MAX_RANK == flashjit::TensorView::kMaxRank);
static_assert(FLASHJIT_MAX_CAPTURES == flashjit::Capture::kMaxPerCall);

// The message flashjit_last_error() returns. `message` may fail to grow (out of memory), so
// the pointer handed out is kept separately and can fall back to a literal.
thread_local std::string last_message;
thread_local const char* last_error_text = "";

flashjit_status fail(flashjit_status status, const char* message) noexcept {
  try {
    last_message = message;
    last_error_text = last_message.c_str();
  } catch (...) {
    last_error_text = "out of host memory (while recording an error message)";
  }
  return status;
}

// Indexed by flashjit_status, whose values are 0, 1, 2, ... in this order.
constexpr const char* kStatusNames[] = {"FLASHJIT_OK",
                                        "FLASHJIT_ERROR_INVALID_ARGUMENT",
                                        "FLASHJIT_ERROR_NO_DRIVER",
                                        "FLASHJIT_ERROR_NO_DEVICE",
                                        "FLASHJIT_ERROR_DRIVER",
                                        "FLASHJIT_ERROR_COMPILE",
                                        "FLASHJIT_ERROR_CACHE",
                                        "FLASHJIT_ERROR_IO",
                                        "FLASHJIT_ERROR_UNSUPPORTED",
                                        "FLASHJIT_ERROR_KERNEL_FAULT",
                                        "FLASHJIT_ERROR_INTERNAL",
                                        "FLASHJIT_ERROR_OUT_OF_MEMORY"};
static_assert(std::size(kStatusNames) == FLASHJIT_ERROR_OUT_OF_MEMORY + 1);

flashjit_status status_of(flashjit::ErrorKind kind) {
  using flashjit::ErrorKind;
  switch (kind) {
    case ErrorKind::invalid_argument:
      return FLASHJIT_ERROR_INVALID_ARGUMENT;
    case ErrorKind::no_driver:
      return FLASHJIT_ERROR_NO_DRIVER;
    case ErrorKind::no_device:
      return FLASHJIT_ERROR_NO_DEVICE;
    case ErrorKind::driver:
      return FLASHJIT_ERROR_DRIVER;
    case ErrorKind::compile:
      return FLASHJIT_ERROR_COMPILE;
    case ErrorKind::cache:
      return FLASHJIT_ERROR_CACHE;
    case ErrorKind::io:
      return FLASHJIT_ERROR_IO;
    case ErrorKind::unsupported:
      return FLASHJIT_ERROR_UNSUPPORTED;
    case ErrorKind::kernel_fault:
      return FLASHJIT_ERROR_KERNEL_FAULT;
    case ErrorKind::out_of_memory:
      return FLASHJIT_ERROR_OUT_OF_MEMORY;
  }
  return FLASHJIT_ERROR_INTERNAL;
}

/// Runs `body`, mapping whatever it throws to a status (and the thread's message).
template <class Body>
flashjit_status guarded(Body&& body) noexcept {
  try {
    body();
    return FLASHJIT_OK;
  } catch (const flashjit::Error& error) {
    return fail(status_of(error.kind()), error.what());
  } catch (const std::bad_alloc&) {
    return fail(FLASHJIT_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& error) {
    return fail(FLASHJIT_ERROR_INTERNAL, error.what());
  } catch (...) {
    return fail(FLASHJIT_ERROR_INTERNAL, "unknown exception");
  }
}

/// `pointer`, or InvalidArgument naming `name` when it is NULL.
template <class T>
T* required(T* pointer, const char* name) {
  if (pointer == nullptr) throw InvalidArgument(name, "is NULL");
  return pointer;
}

/// A code of one of the C enums, checked to lie in [0, count).
int checked_code(int code, int count, const std::string& name) {
  if (code < 0 || code >= count) {
    throw InvalidArgument(name, "is " + std::to_string(code) + "; not a valid code (0 to " +
                                    std::to_string(count - 1) + ")");
  }
  return code;
}

flashjit::RuntimeOptions to_options(const flashjit_runtime_options& options) {
  static_assert(FLASHJIT_BACKEND_CUDA == static_cast<int>(flashjit::Backend::cuda) &&
                FLASHJIT_BACKEND_EMULATOR == static_cast<int>(flashjit::Backend::emulator));
  static_assert(FLASHJIT_TUNING_OFF == static_cast<int>(flashjit::TuningPolicy::off) &&
                FLASHJIT_TUNING_CACHED == static_cast<int>(flashjit::TuningPolicy::cached) &&
                FLASHJIT_TUNING_AUTO == static_cast<int>(flashjit::TuningPolicy::automatic));
  flashjit::RuntimeOptions cpp{
      .device = options.device,
      .backend =
          static_cast<flashjit::Backend>(checked_code(options.backend, 2, "options.backend")),
      .tuning =
          static_cast<flashjit::TuningPolicy>(checked_code(options.tuning, 3, "options.tuning"))};
  if (options.emulated_arch != nullptr) cpp.emulated_arch = options.emulated_arch;
  cpp.check_indices = options.check_indices != 0;
  return cpp;
}

flashjit::TensorView to_view(const flashjit_tensor& tensor, const std::string& name) {
  static_assert(FLASHJIT_DTYPE_F16 == static_cast<int>(flashjit::DType::f16) &&
                FLASHJIT_DTYPE_BF16 == static_cast<int>(flashjit::DType::bf16) &&
                FLASHJIT_DTYPE_F32 == static_cast<int>(flashjit::DType::f32) &&
                FLASHJIT_DTYPE_I32 == static_cast<int>(flashjit::DType::i32) &&
                FLASHJIT_DTYPE_E4M3 == static_cast<int>(flashjit::DType::e4m3));
  flashjit::TensorView view;
  view.data = tensor.data;
  view.dtype = static_cast<flashjit::DType>(checked_code(tensor.dtype, 5, name + ".dtype"));
  view.rank = checked_code(tensor.rank, FLASHJIT_MAX_RANK + 1, name + ".rank");
  for (int i = 0; i < view.rank; ++i) {
    view.shape[i] = tensor.shape[i];
    view.strides[i] = tensor.strides[i];
  }
  return view;
}

/// A required tensor argument's view.
flashjit::TensorView required_view(const flashjit_tensor* tensor, const char* name) {
  return to_view(*required(tensor, name), name);
}

flashjit::TensorView optional_view(const flashjit_tensor* t, const std::string& name);

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
                                .deterministic = a.deterministic != 0};
  // NaN is neither "unset" (<= 0) nor a scale; left through it would silently mean unset.
  if (std::isnan(a.scale)) throw InvalidArgument("attention.scale", "is NaN");
  if (a.scale > 0.0f) attention.scale = a.scale;
  if (a.score_mod != nullptr) attention.score_mod = a.score_mod;
  if (a.mask_mod != nullptr) attention.mask_mod = a.mask_mod;
  attention.block_mask = optional_view(a.block_mask, "attention.block_mask");
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

flashjit::MultiScaleAttention to_multiscale(const flashjit_multiscale_attention& a) {
  if (a.mask != FLASHJIT_MULTISCALE_DECAY && a.mask != FLASHJIT_MULTISCALE_TENSOR) {
    throw InvalidArgument("attention.mask", "is " + std::to_string(static_cast<int>(a.mask)) +
                                                "; use FLASHJIT_MULTISCALE_DECAY or _TENSOR");
  }
  return {a.batch,
          a.heads_q,
          a.heads_kv,
          a.seqlen_q,
          a.seqlen_k,
          a.head_dim,
          a.scale,
          a.mask == FLASHJIT_MULTISCALE_DECAY ? flashjit::MultiScaleMask::decay
                                              : flashjit::MultiScaleMask::tensor};
}

/// An absent C tensor: a NULL descriptor or NULL data.
flashjit::TensorView optional_view(const flashjit_tensor* t, const std::string& name) {
  return t == nullptr || t->data == nullptr ? flashjit::TensorView{} : to_view(*t, name);
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

flashjit::LayerNorm to_layer_norm(const flashjit_layer_norm& options) {
  flashjit::LayerNorm cpp{.epsilon = options.epsilon, .rms = options.rms != 0};
  cpp.bias = optional_view(options.bias, "options.bias");
  cpp.residual = optional_view(options.residual, "options.residual");
  cpp.sum = optional_view(options.sum, "options.sum");
  return cpp;
}

}  // namespace

extern "C" {

const char* flashjit_status_name(flashjit_status status) {
  // A C caller may pass any int; widened first, as the enum's own type may be unsigned.
  const auto index = static_cast<long long>(status);
  if (index < 0 || index >= std::ssize(kStatusNames)) return "FLASHJIT_UNKNOWN_STATUS";
  return kStatusNames[index];
}

const char* flashjit_last_error(void) { return last_error_text; }

const char* flashjit_version(void) { return flashjit::kVersion; }

void flashjit_runtime_options_init(flashjit_runtime_options* options) {
  if (options == nullptr) return;
  const flashjit::RuntimeOptions defaults;
  options->device = defaults.device;
  options->backend = static_cast<int>(defaults.backend);
  options->tuning = static_cast<int>(defaults.tuning);
  options->emulated_arch = nullptr;  // the C++ default, "sm_80"
  options->check_indices = defaults.check_indices ? 1 : 0;
}

flashjit_status flashjit_runtime_create(const flashjit_runtime_options* options,
                                        flashjit_runtime** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    flashjit_runtime** result = required(out, "out");
    const flashjit::RuntimeOptions cpp_options =
        options == nullptr ? flashjit::RuntimeOptions{} : to_options(*options);
    *result = new flashjit_runtime(cpp_options);
  });
}

void flashjit_runtime_destroy(flashjit_runtime* runtime) { delete runtime; }

flashjit_status flashjit_allocate(flashjit_runtime* runtime, size_t bytes, void** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    void** result = required(out, "out");
    flashjit::DeviceBuffer buffer = rt.runtime.allocate(bytes);
    void* data = buffer.data();
    const std::lock_guard lock(rt.buffers_mutex);
    rt.buffers.emplace(data, std::move(buffer));
    *result = data;
  });
}

flashjit_status flashjit_free(flashjit_runtime* runtime, void* data) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    if (data == nullptr) return;
    const std::lock_guard lock(rt.buffers_mutex);
    if (rt.buffers.erase(data) == 0) {
      throw InvalidArgument("data", "was not allocated by flashjit_allocate on this runtime");
    }
  });
}

flashjit_status flashjit_copy_to_device(flashjit_runtime* runtime, void* dst, const void* src,
                                        size_t bytes) {
  return guarded([&] {
    required(runtime, "runtime")
        ->runtime.copy_to_device(required(dst, "dst"), required(src, "src"), bytes);
  });
}

flashjit_status flashjit_copy_to_host(flashjit_runtime* runtime, void* dst, const void* src,
                                      size_t bytes) {
  return guarded([&] {
    required(runtime, "runtime")
        ->runtime.copy_to_host(required(dst, "dst"), required(src, "src"), bytes);
  });
}

flashjit_status flashjit_synchronize(flashjit_runtime* runtime, void* stream) {
  return guarded([&] { required(runtime, "runtime")->runtime.synchronize(stream); });
}

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
                .head_dim_v = defaults.head_dim_v};
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

flashjit_status flashjit_merge_states(flashjit_runtime* runtime, const flashjit_tensor* partial_o,
                                      const flashjit_tensor* partial_lse, const flashjit_tensor* o,
                                      const flashjit_tensor* lse, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::TensorView partial_o_view = required_view(partial_o, "partial_o"),
                               partial_lse_view = required_view(partial_lse, "partial_lse"),
                               o_view = required_view(o, "o");
    // The merged LSE is optional: a NULL descriptor or NULL data both mean "not wanted".
    const flashjit::TensorView lse_view =
        lse == nullptr || lse->data == nullptr ? flashjit::TensorView{} : to_view(*lse, "lse");
    rt.runtime.merge_states(partial_o_view, partial_lse_view, o_view, lse_view, stream);
  });
}

flashjit_status flashjit_merge_state_in_place(flashjit_runtime* runtime, const flashjit_tensor* o_a,
                                              const flashjit_tensor* lse_a,
                                              const flashjit_tensor* o_b,
                                              const flashjit_tensor* lse_b, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::TensorView o_a_view = required_view(o_a, "o_a"),
                               lse_a_view = required_view(lse_a, "lse_a"),
                               o_b_view = required_view(o_b, "o_b"),
                               lse_b_view = required_view(lse_b, "lse_b");
    rt.runtime.merge_state_in_place(o_a_view, lse_a_view, o_b_view, lse_b_view, stream);
  });
}

void flashjit_layer_norm_init(flashjit_layer_norm* options) {
  if (options == nullptr) return;
  const flashjit::LayerNorm defaults;
  *options = {defaults.epsilon, defaults.rms ? 1 : 0, nullptr, nullptr, nullptr};
}

flashjit_status flashjit_layer_norm_forward(flashjit_runtime* runtime,
                                            const flashjit_layer_norm* options,
                                            const flashjit_tensor* x, const flashjit_tensor* gamma,
                                            const flashjit_tensor* beta, const flashjit_tensor* y,
                                            const flashjit_tensor* mean,
                                            const flashjit_tensor* rstd, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::LayerNorm cpp = to_layer_norm(*required(options, "options"));
    const flashjit::TensorView x_view = required_view(x, "x"),
                               gamma_view = required_view(gamma, "gamma"),
                               beta_view = optional_view(beta, "beta"),
                               y_view = required_view(y, "y");
    rt.runtime.layer_norm(cpp, x_view, gamma_view, beta_view, y_view, optional_view(mean, "mean"),
                          optional_view(rstd, "rstd"), stream);
  });
}

flashjit_status flashjit_layer_norm_backward(
    flashjit_runtime* runtime, const flashjit_layer_norm* options, const flashjit_tensor* x,
    const flashjit_tensor* gamma, const flashjit_tensor* mean, const flashjit_tensor* rstd,
    const flashjit_tensor* dy, const flashjit_tensor* dx, const flashjit_tensor* dgamma,
    const flashjit_tensor* dbeta, const flashjit_tensor* dbias, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::LayerNorm cpp = to_layer_norm(*required(options, "options"));
    const flashjit::TensorView x_view = required_view(x, "x"),
                               gamma_view = required_view(gamma, "gamma"),
                               mean_view = optional_view(mean, "mean"),
                               rstd_view = optional_view(rstd, "rstd"),
                               dy_view = required_view(dy, "dy"), dx_view = required_view(dx, "dx"),
                               dgamma_view = required_view(dgamma, "dgamma");
    rt.runtime.layer_norm_backward(cpp, x_view, gamma_view, mean_view, rstd_view, dy_view, dx_view,
                                   dgamma_view, optional_view(dbeta, "dbeta"),
                                   optional_view(dbias, "dbias"), stream);
  });
}

void flashjit_multiscale_attention_init(flashjit_multiscale_attention* attention) {
  if (attention == nullptr) return;
  const flashjit::MultiScaleAttention d;
  *attention = {d.batch,    d.heads_q,  d.heads_kv, d.seqlen_q,
                d.seqlen_k, d.head_dim, d.scale,    FLASHJIT_MULTISCALE_DECAY};
}

flashjit_status flashjit_multiscale_forward(flashjit_runtime* runtime,
                                            const flashjit_multiscale_attention* attention,
                                            const flashjit_tensor* q, const flashjit_tensor* k,
                                            const flashjit_tensor* v, const flashjit_tensor* mask,
                                            const flashjit_tensor* o, const flashjit_tensor* rowsum,
                                            void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::MultiScaleAttention a = to_multiscale(*required(attention, "attention"));
    const flashjit::TensorView q_view = required_view(q, "q"), k_view = required_view(k, "k"),
                               v_view = required_view(v, "v"),
                               mask_view = required_view(mask, "mask"),
                               o_view = required_view(o, "o");
    rt.runtime.multiscale_forward(a, q_view, k_view, v_view, mask_view, o_view,
                                  optional_view(rowsum, "rowsum"), stream);
  });
}

flashjit_status flashjit_multiscale_backward(
    flashjit_runtime* runtime, const flashjit_multiscale_attention* attention,
    const flashjit_tensor* q, const flashjit_tensor* k, const flashjit_tensor* v,
    const flashjit_tensor* mask, const flashjit_tensor* o, const flashjit_tensor* rowsum,
    const flashjit_tensor* dout, const flashjit_tensor* dq, const flashjit_tensor* dk,
    const flashjit_tensor* dv, const flashjit_tensor* dmask, void* stream) {
  return guarded([&] {
    flashjit_runtime& rt = *required(runtime, "runtime");
    const flashjit::MultiScaleAttention a = to_multiscale(*required(attention, "attention"));
    const flashjit::TensorView q_view = required_view(q, "q"), k_view = required_view(k, "k"),
                               v_view = required_view(v, "v"),
                               mask_view = required_view(mask, "mask"),
                               o_view = required_view(o, "o"),
                               rowsum_view = required_view(rowsum, "rowsum"),
                               dout_view = required_view(dout, "dout"),
                               dq_view = required_view(dq, "dq"), dk_view = required_view(dk, "dk"),
                               dv_view = required_view(dv, "dv");
    rt.runtime.multiscale_backward(a, q_view, k_view, v_view, mask_view, o_view, rowsum_view,
                                   dout_view, dq_view, dk_view, dv_view,
                                   optional_view(dmask, "dmask"), stream);
  });
}

}  // extern "C"

// Multi-scale attention's public face: Runtime::multiscale_forward and multiscale_backward
// (flashjit/runtime.hpp) and their C functions (flashjit_c.h), built into the facade (api/) from
// this folder.
#include <cstring>
#include <string>

#include "api/c_api_support.hpp"
#include "api/runtime_parts.hpp"
#include "flashjit/multiscale_attention.hpp"
#include "multiscale/multiscale_attention.hpp"

namespace flashjit {

void Runtime::multiscale_forward(const MultiScaleAttention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& mask,
                                 const TensorView& o, const TensorView& rowsum, Stream stream) {
  kernels::run_multiscale_forward(detail::backend_of(*this), detail::tuning_of(*this), attention, q,
                                  k, v, mask, o, rowsum, stream);
}

void Runtime::multiscale_backward(const MultiScaleAttention& attention, const TensorView& q,
                                  const TensorView& k, const TensorView& v, const TensorView& mask,
                                  const TensorView& o, const TensorView& rowsum,
                                  const TensorView& dout, const TensorView& dq,
                                  const TensorView& dk, const TensorView& dv,
                                  const TensorView& dmask, Stream stream) {
  kernels::run_multiscale_backward(detail::backend_of(*this), detail::tuning_of(*this), attention,
                                   q, k, v, mask, o, rowsum, dout, dq, dk, dv, dmask, stream);
}

}  // namespace flashjit

namespace {

using flashjit::InvalidArgument;
using flashjit::c_api::guarded;
using flashjit::c_api::optional_view;
using flashjit::c_api::required;
using flashjit::c_api::required_view;

flashjit::MultiScaleAttention to_multiscale(const flashjit_multiscale_attention& a) {
  // A C caller may have stored any int in the enum field, and loading a value outside the
  // enum's range as the enum is undefined in C++: its bytes are read as the int they are.
  int mask = 0;
  static_assert(sizeof mask == sizeof a.mask);
  std::memcpy(&mask, &a.mask, sizeof mask);
  if (mask != FLASHJIT_MULTISCALE_DECAY && mask != FLASHJIT_MULTISCALE_TENSOR) {
    throw InvalidArgument("attention.mask", "is " + std::to_string(mask) +
                                                "; use FLASHJIT_MULTISCALE_DECAY or _TENSOR");
  }
  return {a.batch,
          a.heads_q,
          a.heads_kv,
          a.seqlen_q,
          a.seqlen_k,
          a.head_dim,
          a.scale,
          mask == FLASHJIT_MULTISCALE_DECAY ? flashjit::MultiScaleMask::decay
                                            : flashjit::MultiScaleMask::tensor};
}

}  // namespace

extern "C" {

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

// Merging attention states' public face: Runtime::merge_states and merge_state_in_place
// (flashjit/runtime.hpp) and their C functions (flashjit_c.h), built into the facade (api/) from
// this folder.
#include "api/c_api_support.hpp"
#include "api/runtime_parts.hpp"
#include "merge_states/merge_states.hpp"

namespace flashjit {

void Runtime::merge_states(const TensorView& partial_o, const TensorView& partial_lse,
                           const TensorView& o, const TensorView& lse, Stream stream) {
  kernels::run_merge_states(detail::backend_of(*this), partial_o, partial_lse, o, lse, stream);
}

void Runtime::merge_state_in_place(const TensorView& o_a, const TensorView& lse_a,
                                   const TensorView& o_b, const TensorView& lse_b, Stream stream) {
  kernels::run_merge_state_pair(detail::backend_of(*this), o_a, lse_a, o_b, lse_b, stream);
}

}  // namespace flashjit

namespace {

using flashjit::c_api::guarded;
using flashjit::c_api::required;
using flashjit::c_api::required_view;
using flashjit::c_api::to_view;

}  // namespace

extern "C" {

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

}  // extern "C"

// Layer norm's public face: Runtime::layer_norm and layer_norm_backward (flashjit/runtime.hpp)
// and their C functions (flashjit_c.h), built into the facade (api/) from this folder.
#include "api/c_api_support.hpp"
#include "api/runtime_parts.hpp"
#include "flashjit/layer_norm.hpp"
#include "layer_norm/layer_norm.hpp"

namespace flashjit {

void Runtime::layer_norm(const LayerNorm& options, const TensorView& x, const TensorView& gamma,
                         const TensorView& beta, const TensorView& y, const TensorView& mean,
                         const TensorView& rstd, Stream stream) {
  kernels::run_layer_norm(detail::backend_of(*this), detail::tuning_of(*this), options, x, gamma,
                          beta, y, mean, rstd, stream);
}

void Runtime::layer_norm_backward(const LayerNorm& options, const TensorView& x,
                                  const TensorView& gamma, const TensorView& mean,
                                  const TensorView& rstd, const TensorView& dy,
                                  const TensorView& dx, const TensorView& dgamma,
                                  const TensorView& dbeta, const TensorView& dbias, Stream stream) {
  kernels::run_layer_norm_backward(detail::backend_of(*this), detail::tuning_of(*this), options, x,
                                   gamma, mean, rstd, dy, dx, dgamma, dbeta, dbias, stream);
}

}  // namespace flashjit

namespace {

using flashjit::c_api::guarded;
using flashjit::c_api::optional_view;
using flashjit::c_api::required;
using flashjit::c_api::required_view;

flashjit::LayerNorm to_layer_norm(const flashjit_layer_norm& options) {
  flashjit::LayerNorm cpp{.epsilon = options.epsilon, .rms = options.rms != 0};
  cpp.bias = optional_view(options.bias, "options.bias");
  cpp.residual = optional_view(options.residual, "options.residual");
  cpp.sum = optional_view(options.sum, "options.sum");
  return cpp;
}

}  // namespace

extern "C" {

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

}  // extern "C"

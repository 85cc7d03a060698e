#pragma once
// Host side of the attention backward op: its configs (the host mirror of
// templates/attention/backward_space.cuh), the heuristic default, kernel specs, argument
// validation, and the launch sequence (D = rowsum(dO ∘ O), then dQ, then dK/dV). Gradients are
// written without atomics, so every run gives the same bits.
#include <string>
#include <vector>

#include "attention/backward_space.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "flashjit/tensor.hpp"
#include "kernels/attention_forward.hpp"
#include "runtime/kernel_spec.hpp"

namespace flashjit::kernels {

/// One specialization of the backward kernels (flashjit::BackwardTraits on the template side).
struct BackwardConfig {
  DType dtype = DType::bf16;  ///< f16 or bf16
  int head_dim = 64;
  int block_m = 64;  ///< query rows per block
  int block_n = 64;  ///< key rows per block
  int warps = 4;
  MaskKind mask = MaskKind::none;
  bool softcap = false;
  bool operator==(const BackwardConfig&) const = default;
};

/// Every valid config for (dtype, head_dim, mask, softcap), in a fixed order.
std::vector<BackwardConfig> backward_configs(DType dtype, int head_dim, MaskKind mask,
                                             bool softcap);

/// The heuristic config for (dtype, head_dim, mask, softcap) on `arch` (until the autotuner).
BackwardConfig default_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                       const std::string& arch);

/// The kernels one backward call launches, in order.
struct BackwardSpecs {
  detail::KernelSpec delta;  ///< attention_backward_delta_kernel<T>: D = rowsum(dO ∘ O)
  detail::KernelSpec dq;     ///< attention_backward_dq_kernel<traits, KeyGradients::both>
  /// attention_backward_dkdv_kernel: one spec (KeyGradients::both) for head dims up to 64,
  /// two (dk, then dv) above (attention_backward_space::split_key_gradients).
  std::vector<detail::KernelSpec> key_gradients;
};

/// The specs of `config` for target `arch`.
BackwardSpecs backward_specs(const BackwardConfig& config, const std::string& arch);

/// Checks backward's arguments (see Runtime::backward); throws InvalidArgument naming the
/// first bad one ("dout", "lse.shape", "dk", ...). Nothing is launched or written.
void validate_backward_arguments(const Attention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& o,
                                 const TensorView& lse, const TensorView& dout,
                                 const TensorView& dq, const TensorView& dk,
                                 const TensorView& dv);

/// Runtime::backward with an explicit config (tests, the autotuner). The config must match the
/// call's dtype, head dim, mask kind and softcap (InvalidArgument("config") otherwise).
void attention_backward(Runtime& runtime, const Attention& attention, const TensorView& q,
                        const TensorView& k, const TensorView& v, const TensorView& o,
                        const TensorView& lse, const TensorView& dout, const TensorView& dq,
                        const TensorView& dk, const TensorView& dv, const BackwardConfig& config,
                        Stream stream);

}  // namespace flashjit::kernels

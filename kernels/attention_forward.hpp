#pragma once
// Host side of the attention forward op: its configs (the host mirror of
// templates/attention/forward_space.cuh), the heuristic default, kernel specs, argument
// validation, and the launch.
#include <string>
#include <vector>

#include "attention/forward_space.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/runtime.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/kernel_spec.hpp"

namespace flashjit::kernels {

using attention_forward_space::MaskKind;

/// One specialization of the forward kernel (flashjit::ForwardTraits on the template side).
struct ForwardConfig {
  DType dtype = DType::bf16;  ///< f16 or bf16
  int head_dim = 64;
  int block_m = 128;  ///< Br
  int block_n = 64;   ///< Bc
  int warps = 4;
  int stages = 2;
  MaskKind mask = MaskKind::none;
  bool softcap = false;
  bool operator==(const ForwardConfig&) const = default;
};

/// Every valid config for (dtype, head_dim, mask, softcap), in a fixed order.
std::vector<ForwardConfig> forward_configs(DType dtype, int head_dim, MaskKind mask, bool softcap);

/// The heuristic config for (dtype, head_dim, mask, softcap) on `arch` (until the autotuner).
ForwardConfig default_forward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                     const std::string& arch);

/// The kernel spec of `config` for target `arch`.
detail::KernelSpec forward_spec(const ForwardConfig& config, const std::string& arch);

/// The mask kind a call needs: window when causal or a window is set, else none.
MaskKind forward_mask_kind(const Attention& attention);

/// Checks forward's arguments (see Runtime::forward); throws InvalidArgument naming the first
/// bad one ("q", "k.shape", "attention.heads_kv", ...). Nothing is launched or written.
void validate_forward_arguments(const Attention& attention, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& o,
                                const TensorView& lse);

/// Runtime::forward with an explicit config (tests, the autotuner). The config must match the
/// call's dtype, head dim, mask kind and softcap (InvalidArgument("config") otherwise).
void attention_forward(Runtime& runtime, const Attention& attention, const TensorView& q,
                       const TensorView& k, const TensorView& v, const TensorView& o,
                       const TensorView& lse, const ForwardConfig& config, Stream stream);

}  // namespace flashjit::kernels

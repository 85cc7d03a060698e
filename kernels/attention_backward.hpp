#pragma once
// Host side of the attention backward op: its configs (the host mirror of
// templates/attention/backward_space.cuh), the heuristic default, kernel specs, argument
// validation, and the launch sequence (D = rowsum(dO ∘ O), then dQ, then dK/dV). Gradients are
// written without atomics, so every run gives the same bits.
#include <cstddef>
#include <string>
#include <vector>

#include "attention/backward_params.cuh"
#include "attention/backward_space.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/device.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/tensor.hpp"
#include "kernels/attention_forward.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

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

  /// Whether the templates accept this config (attention_backward_space::config_valid and a
  /// 16-bit dtype).
  bool valid() const;
  /// Bytes of dynamic shared memory a block of either main kernel (dQ, dK/dV) uses.
  int shared_bytes() const;
};

/// Query rows per block of the delta kernel (declared beside the template's space).
using attention_backward_space::kDeltaRowsPerBlock;

/// Every valid config for (dtype, head_dim, mask, softcap), in a fixed order (Br, then Bc and
/// warps ascending). Empty when the dtype or head dim is not supported.
std::vector<BackwardConfig> backward_configs(DType dtype, int head_dim, MaskKind mask,
                                             bool softcap);

/// The heuristic config for (dtype, head_dim, mask, softcap) on `arch` (until the autotuner):
/// Br = Bc = 64 over 4 warps, or 32 x 32 over 2 past head dim 144 (104 with softcap) or where
/// those do not fit the arch's shared memory (arch_shared_memory_limit; preferred_tiles in
/// attention_backward.cpp). No kernel of it spills registers at any head dim, dtype, mask or
/// softcap, on sm_80 or sm_90a (NVRTC 13.0; tests/kernels/test_attention_backward_compile.cpp
/// checks the registry's matrix). Always valid and within the arch's shared memory. Throws
/// InvalidArgument("head_dim") or ("dtype") for a dim or dtype the kernels lack, ("arch") for
/// an arch flashjit cannot target.
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

/// The specs of `config` for target `arch`: op "attention-backward", readable names such as
/// "attention_backward.delta.bf16" and "attention_backward.dq.hdim128.bf16.window.br64.bc64.w4"
/// (".softcap" after the mask when on; no mask part for none), likewise ".dkdv." (head dims up
/// to 64) or ".dk." and ".dv." (above). Throws InvalidArgument("config") outside the space.
BackwardSpecs backward_specs(const BackwardConfig& config, const std::string& arch);

/// Checks backward's arguments (see Runtime::backward); throws InvalidArgument naming the
/// first bad one ("dout", "lse.shape", "dk", ...). Nothing is launched or written.
void validate_backward_arguments(const Attention& attention, const TensorView& q,
                                 const TensorView& k, const TensorView& v, const TensorView& o,
                                 const TensorView& lse, const TensorView& dout,
                                 const TensorView& dq, const TensorView& dk, const TensorView& dv);

/// Throws InvalidArgument("config") unless `config` is valid and can run the validated call
/// (as check_forward_config: same dtype, head dim and softcap, a mask kind covering the call's).
void check_backward_config(const BackwardConfig& config, const Attention& attention,
                           const TensorView& q);

/// Whether a backward call of `attention` has nothing to write (batch 0, or no query and no
/// key): a successful no-op. With seqlen_q 0 alone, dK and dV are written as zeros (no query
/// sees a key); with seqlen_k 0 alone, dQ is.
bool backward_is_empty(const Attention& attention);

/// Bytes of the fp32 workspace D = rowsum(dO ∘ O), [batch, heads_q, seqlen_q] contiguous.
std::size_t backward_delta_bytes(const Attention& attention);

/// The kernels' arguments for a validated call: every field AttentionForwardParams has too is
/// filled exactly as forward_params fills it; `delta` is the workspace of backward_delta_bytes.
AttentionBackwardParams backward_params(const Attention& attention, const TensorView& q,
                                        const TensorView& k, const TensorView& v,
                                        const TensorView& o, const TensorView& lse,
                                        const TensorView& dout, const TensorView& dq,
                                        const TensorView& dk, const TensorView& dv, float* delta);

/// Grid, block and shared memory of each launch for a validated call.
struct BackwardLaunchShapes {
  /// (ceil(seqlen_q / kDeltaRowsPerBlock), heads_q, batch), kDeltaRowsPerBlock warps, no
  /// shared memory.
  detail::LaunchShape delta;
  /// (ceil(seqlen_q / Br), heads_q, batch), Warps x 32 threads, the config's shared memory.
  detail::LaunchShape dq;
  /// (ceil(seqlen_k / Bc), heads_kv, batch), as dq otherwise; every key-gradient launch.
  detail::LaunchShape key_gradients;
};
BackwardLaunchShapes backward_launch_shapes(const BackwardConfig& config,
                                            const Attention& attention, Stream stream);

/// Runtime::backward with an explicit config (tests, the autotuner) on `backend`. The config
/// must match the call's dtype, head dim, mask kind and softcap (InvalidArgument("config")
/// otherwise) and fit the device's shared memory. The delta workspace is allocated in
/// `stream`'s order and freed in it: the call returns once the kernels are queued.
void attention_backward(detail::RuntimeBackend& backend, const Attention& attention,
                        const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& o, const TensorView& lse, const TensorView& dout,
                        const TensorView& dq, const TensorView& dk, const TensorView& dv,
                        const BackwardConfig& config, Stream stream);

}  // namespace flashjit::kernels

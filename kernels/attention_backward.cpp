#include "attention_backward.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "attention_common.hpp"
#include "flashjit/error.hpp"
#include "kernels/config_choice.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace space = flashjit::attention_backward_space;
using space::KeyGradients;

namespace {

/// The backward tiles per head dim, best first: Br = Bc = 64 over 4 warps up to head dim 144
/// (104 with softcap, which keeps tanh's slope per score beside S and dP), then 32 x 32 over 2
/// warps, which is within the accumulator budget (attention_backward_space::config_valid) at
/// every head dim and needs less shared memory (at head dim 128, 64 x 64 takes 102 KB, over the
/// 99 KB of sm_86 and sm_89). Each head dim's first choice compiles without spills for both
/// dtypes, both masks and softcap on or off, on sm_80 and sm_90a (NVRTC 13.0, see
/// tests/kernels/test_attention_backward_compile.cpp). The cut-offs are where 64 x 64 stopped
/// compiling without spills before the tiles' loads were rolled (tile/shared_tile.cuh); larger
/// tiles further on, and Br = Bc = 128 over 8 warps, may be faster but are untimed: the
/// autotuner will say.
std::vector<TileShape> preferred_tiles(int head_dim, bool softcap) {
  if (head_dim <= (softcap ? 104 : 144)) return {{64, 64, 4}, {32, 32, 2}};
  return {{32, 32, 2}};
}

std::string key_gradients_name(KeyGradients gradients) {
  switch (gradients) {
    case KeyGradients::dk:
      return "dk";
    case KeyGradients::dv:
      return "dv";
    case KeyGradients::both:
      break;
  }
  return "both";
}

/// The BackwardTraits of `config` with `gradients`, as a C++ type.
std::string traits_type(const BackwardConfig& config, KeyGradients gradients) {
  return "flashjit::BackwardTraits<" + template_element(config.dtype) + ", " +
         std::to_string(config.head_dim) + ", " + std::to_string(config.block_m) + ", " +
         std::to_string(config.block_n) + ", " + std::to_string(config.warps) +
         ", flashjit::MaskKind::" + (config.mask == MaskKind::window ? "window" : "none") + ", " +
         (config.softcap ? "true" : "false") +
         ", flashjit::attention_backward_space::KeyGradients::" + key_gradients_name(gradients) +
         ">";
}

/// One main kernel of `config`: `kernel` is "dq" or "dkdv", `part` what its readable name
/// calls it ("dq", "dkdv", "dk", "dv").
detail::KernelSpec main_spec(const BackwardConfig& config, const std::string& arch,
                             const std::string& kernel, const std::string& part,
                             KeyGradients gradients) {
  detail::KernelSpec spec;
  spec.op = "attention-backward";
  spec.header = "attention/backward_" + kernel + "_kernel.cuh";
  spec.name_expression =
      "flashjit::attention_backward_" + kernel + "_kernel<" + traits_type(config, gradients) + ">";
  spec.arch = arch;
  spec.role = part;
  spec.head_dim = config.head_dim;
  spec.traits = {std::string(dtype_name(config.dtype))};
  if (config.mask == MaskKind::window) spec.traits.push_back("window");
  if (config.softcap) spec.traits.push_back("softcap");
  for (const std::string& tile :
       {detail::trait("br", config.block_m), detail::trait("bc", config.block_n),
        detail::trait("w", config.warps)}) {
    spec.traits.push_back(tile);
  }
  spec.readable_name = detail::name_of("attention_backward." + part, spec.head_dim, spec.traits);
  spec.threads = config.warps * 32;
  spec.dynamic_shared_bytes = config.shared_bytes();
  return spec;
}

detail::KernelSpec delta_spec(DType dtype, const std::string& arch) {
  detail::KernelSpec spec;
  spec.op = "attention-backward";
  spec.header = "attention/backward_delta_kernel.cuh";
  spec.name_expression =
      "flashjit::attention_backward_delta_kernel<" + template_element(dtype) + ">";
  spec.arch = arch;
  spec.role = "delta";
  spec.traits = {std::string(dtype_name(dtype))};
  spec.readable_name = detail::name_of("attention_backward.delta", 0, spec.traits);
  spec.threads = kDeltaRowsPerBlock * 32;  // one warp per row
  return spec;
}

/// Grid (ceil(rows / rows_per_block), heads, batch) of `warps` warps.
detail::LaunchShape launch_shape(std::int64_t rows, int rows_per_block, std::int64_t heads,
                                 std::int64_t batch, int warps, int shared_bytes, Stream stream) {
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block);
  shape.grid_y = static_cast<unsigned>(heads);
  shape.grid_z = static_cast<unsigned>(batch);
  shape.block_x = static_cast<unsigned>(warps * 32);
  shape.dynamic_shared_bytes = static_cast<std::size_t>(shared_bytes);
  shape.stream = static_cast<CUstream>(stream);
  return shape;
}

/// The tensors of one call, bundled for the launch helpers.
struct BackwardTensors {
  const TensorView& q;
  const TensorView& k;
  const TensorView& v;
  const TensorView& o;
  const TensorView& lse;
  const TensorView& dout;
  const TensorView& dq;
  const TensorView& dk;
  const TensorView& dv;
};

std::vector<detail::KernelBuffer> backward_buffers(const BackwardTensors& t,
                                                   const DeviceBuffer& delta) {
  return {kernel_buffer(t.q, "q"),     kernel_buffer(t.k, "k"),
          kernel_buffer(t.v, "v"),     kernel_buffer(t.o, "o"),
          kernel_buffer(t.lse, "lse"), kernel_buffer(t.dout, "dout"),
          kernel_buffer(t.dq, "dq"),   kernel_buffer(t.dk, "dk"),
          kernel_buffer(t.dv, "dv"),   {delta.data(), delta.size(), "delta"}};
}

/// Launches a validated call with a config already checked against it: D, then dQ, then dK
/// and dV (one launch, or dK then dV), all on `stream`. The D workspace (4 bytes per query row
/// and head) is allocated and freed in the stream's order, so nothing waits on the host, and a
/// launch that throws halfway still frees it after the kernels already queued.
void launch_backward(detail::RuntimeBackend& backend, const Attention& attention,
                     const BackwardTensors& t, const BackwardConfig& config, Stream stream) {
  const BackwardSpecs specs = backward_specs(config, backend.info().arch());
  const BackwardLaunchShapes shapes = backward_launch_shapes(config, attention, stream);
  const DeviceBuffer delta =
      backend.allocate_buffer_on_stream(backward_delta_bytes(attention), stream);
  const AttentionBackwardParams params =
      backward_params(attention, t.q, t.k, t.v, t.o, t.lse, t.dout, t.dq, t.dk, t.dv,
                      static_cast<float*>(delta.data()));
  const std::vector<detail::KernelBuffer> buffers = backward_buffers(t, delta);
  detail::Executor& executor = backend.executor();
  detail::launch_kernel(executor, specs.delta, shapes.delta, buffers, params);  // D
  detail::launch_kernel(executor, specs.dq, shapes.dq, buffers, params);        // dQ
  for (const detail::KernelSpec& spec : specs.key_gradients) {
    detail::launch_kernel(executor, spec, shapes.key_gradients, buffers, params);  // dK, dV
  }
}

}  // namespace

bool BackwardConfig::valid() const {
  return (dtype == DType::f16 || dtype == DType::bf16) &&
         space::config_valid(head_dim, block_m, block_n, warps);
}

int BackwardConfig::shared_bytes() const { return space::shared_bytes(head_dim, block_m, block_n); }

std::vector<BackwardConfig> backward_configs(DType dtype, int head_dim, MaskKind mask,
                                             bool softcap) {
  std::vector<BackwardConfig> configs;
  for (int block_m : space::kBlockM) {
    for (int block_n : space::kBlockN) {
      for (int warps : space::kWarps) {
        BackwardConfig config{dtype, head_dim, block_m, block_n, warps, mask, softcap};
        if (config.valid()) configs.push_back(config);
      }
    }
  }
  return configs;
}

BackwardConfig default_backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                       const std::string& arch) {
  check_attention_support(dtype, head_dim);
  const int limit = arch_shared_memory_limit(arch);
  for (const TileShape& tile : preferred_tiles(head_dim, softcap)) {
    BackwardConfig config{dtype, head_dim, tile.block_m, tile.block_n, tile.warps, mask, softcap};
    if (config.valid() && config.shared_bytes() <= limit) return config;
  }
  // Unreachable with today's tables (the last preference is valid at every head dim and fits
  // 99 KB); kept so that the result stays valid if the space changes.
  return least_shared_memory(backward_configs(dtype, head_dim, mask, softcap));
}

BackwardSpecs backward_specs(const BackwardConfig& config, const std::string& arch) {
  if (!config.valid()) {
    throw InvalidArgument("config",
                          "is not in the backward config space (see "
                          "attention_backward_space::config_valid)");
  }
  BackwardSpecs specs;
  specs.delta = delta_spec(config.dtype, arch);
  specs.dq = main_spec(config, arch, "dq", "dq", KeyGradients::both);
  if (space::split_key_gradients(config.head_dim)) {
    specs.key_gradients = {main_spec(config, arch, "dkdv", "dk", KeyGradients::dk),
                           main_spec(config, arch, "dkdv", "dv", KeyGradients::dv)};
  } else {
    specs.key_gradients = {main_spec(config, arch, "dkdv", "dkdv", KeyGradients::both)};
  }
  return specs;
}

void check_backward_config(const BackwardConfig& config, const Attention& attention,
                           const TensorView& q) {
  if (!config.valid()) throw InvalidArgument("config", "is not in the backward config space");
  check_config_class({config.dtype, config.head_dim, config.mask, config.softcap}, attention, q);
}

bool backward_is_empty(const Attention& attention) {
  return attention.batch == 0 || (attention.seqlen_q == 0 && attention.seqlen_k == 0);
}

std::size_t backward_delta_bytes(const Attention& attention) {
  return static_cast<std::size_t>(attention.batch * attention.heads_q * attention.seqlen_q) *
         sizeof(float);
}

AttentionBackwardParams backward_params(const Attention& attention, const TensorView& q,
                                        const TensorView& k, const TensorView& v,
                                        const TensorView& o, const TensorView& lse,
                                        const TensorView& dout, const TensorView& dq,
                                        const TensorView& dk, const TensorView& dv, float* delta) {
  // The fields both passes have come from the forward's own filling, so they cannot drift.
  const AttentionForwardParams forward = forward_params(attention, q, k, v, o, lse);
  AttentionBackwardParams params{};
  params.q = forward.q;
  params.k = forward.k;
  params.v = forward.v;
  params.o = forward.o;
  params.dout = head_tensor(dout);
  params.dq = head_tensor(dq);
  params.dk = head_tensor(dk);
  params.dv = head_tensor(dv);
  params.lse = forward.lse;
  params.lse_batch_stride = forward.lse_batch_stride;
  params.lse_head_stride = forward.lse_head_stride;
  params.delta = delta;
  params.batch = static_cast<int>(attention.batch);
  params.heads_q = static_cast<int>(attention.heads_q);
  params.seqlen_q = forward.seqlen_q;
  params.seqlen_k = forward.seqlen_k;
  params.head_dim = forward.head_dim;
  params.heads_per_kv = forward.heads_per_kv;
  params.window_left = forward.window_left;
  params.window_right = forward.window_right;
  params.score_scale = forward.score_scale;
  params.softcap_log2 = forward.softcap_log2;
  params.scale = static_cast<float>(softmax_scale(attention));
  return params;
}

BackwardLaunchShapes backward_launch_shapes(const BackwardConfig& config,
                                            const Attention& attention, Stream stream) {
  const Attention& a = attention;
  const int shared = config.shared_bytes();
  constexpr int kDelta = kDeltaRowsPerBlock;  // one warp per row
  return {
      launch_shape(a.seqlen_q, kDelta, a.heads_q, a.batch, kDelta, 0, stream),
      launch_shape(a.seqlen_q, config.block_m, a.heads_q, a.batch, config.warps, shared, stream),
      launch_shape(a.seqlen_k, config.block_n, a.heads_kv, a.batch, config.warps, shared, stream)};
}

void attention_backward(detail::RuntimeBackend& backend, const Attention& attention,
                        const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& o, const TensorView& lse, const TensorView& dout,
                        const TensorView& dq, const TensorView& dk, const TensorView& dv,
                        const BackwardConfig& config, Stream stream) {
  validate_backward_arguments(attention, q, k, v, o, lse, dout, dq, dk, dv);
  check_backward_config(config, attention, q);
  check_config_fits_device(config.shared_bytes(), backend.info());
  if (backward_is_empty(attention)) return;
  launch_backward(backend, attention, {q, k, v, o, lse, dout, dq, dk, dv}, config, stream);
}

void run_attention_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                            const Attention& attention, const TensorView& q, const TensorView& k,
                            const TensorView& v, const TensorView& o, const TensorView& lse,
                            const TensorView& dout, const TensorView& dq, const TensorView& dk,
                            const TensorView& dv, Stream stream) {
  validate_backward_arguments(attention, q, k, v, o, lse, dout, dq, dk, dv);
  if (backward_is_empty(attention)) return;
  launch_backward(backend, attention, {q, k, v, o, lse, dout, dq, dk, dv},
                  choice.backward_config(attention, q.dtype), stream);
}

}  // namespace flashjit::kernels

#include "multiscale/multiscale_attention.hpp"

#include <cmath>
#include <vector>

#include "attention/attention_common.hpp"
#include "autotune/tuning_problem.hpp"
#include "flashjit/error.hpp"
#include "multiscale/multiscale_tuning.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace {

const char* mask_name(MultiScaleMask mask) {
  return mask == MultiScaleMask::decay ? "decay" : "tensor";
}

/// An attention kernel's spec made multi-scale attention's: the same traits type, multi-scale
/// attention's entry point in `header`, the mask kind as the last template argument.
detail::KernelSpec multiscale_spec(detail::KernelSpec spec, const std::string& attention_entry,
                                   const std::string& multiscale_entry, const std::string& header,
                                   MultiScaleMask mask, const std::string& stem) {
  const std::string from = "flashjit::" + attention_entry + "<";
  const std::string traits =
      spec.name_expression.substr(from.size(), spec.name_expression.size() - from.size() - 1);
  spec.op = "multiscale";
  spec.header = header;
  spec.name_expression = "flashjit::" + multiscale_entry + "<" + traits +
                         ", flashjit::MultiScaleMaskKind::" + mask_name(mask) + ">";
  spec.traits.insert(spec.traits.begin() + 1, mask_name(mask));  // after the dtype
  spec.readable_name = detail::name_of(stem, spec.head_dim, spec.traits);
  return spec;
}

/// The kernels' arguments: the attention backward's (sizes, tensors, scale, δ) and the mask's.
MultiScaleParams multiscale_params(const MultiScaleAttention& attention, const TensorView& q,
                                   const TensorView& k, const TensorView& v, const TensorView& mask,
                                   const TensorView& o, const TensorView& rowsum,
                                   const TensorView& dout, const TensorView& dq,
                                   const TensorView& dk, const TensorView& dv,
                                   const TensorView& dmask, float* delta) {
  MultiScaleParams p{};
  p.attention = backward_params(multiscale_as_attention(attention), q, k, v, o, rowsum, dout, dq,
                                dk, dv, delta, nullptr);
  p.rowsum = static_cast<float*>(rowsum.data);
  if (rowsum.data != nullptr) {
    p.rowsum_batch_stride = rowsum.strides[0];
    p.rowsum_head_stride = rowsum.strides[1];
  }
  p.mask = static_cast<const float*>(mask.data);
  if (mask.rank == 3) {
    p.mask_head_stride = mask.strides[0];
    p.mask_row_stride = mask.strides[1];
  }
  p.dmask = static_cast<float*>(dmask.data);
  if (dmask.data != nullptr) {
    p.dmask_head_stride = dmask.strides[0];
    p.dmask_row_stride = dmask.strides[1];
  }
  return p;
}

/// The tensors a launch touches, named for the emulator's findings (absent ones left out).
std::vector<detail::KernelBuffer> multiscale_buffers(
    std::initializer_list<std::pair<const TensorView*, const char*>> views) {
  std::vector<detail::KernelBuffer> buffers;
  for (const auto& [view, name] : views) {
    if (view->data != nullptr) buffers.push_back(kernel_buffer(*view, name));
  }
  return buffers;
}

}  // namespace

MultiScaleMaskKind multiscale_mask_kind(MultiScaleMask mask) {
  return mask == MultiScaleMask::decay ? MultiScaleMaskKind::decay : MultiScaleMaskKind::tensor;
}

Attention multiscale_as_attention(const MultiScaleAttention& m) {
  Attention a;
  a.batch = m.batch;
  a.heads_q = m.heads_q;
  a.heads_kv = m.heads_kv;
  a.seqlen_q = m.seqlen_q;
  a.seqlen_k = m.seqlen_k;
  a.head_dim = m.head_dim;
  a.scale = m.scale != 0.0f ? m.scale : static_cast<float>(1.0 / std::sqrt(double(m.head_dim)));
  a.deterministic = true;  // the backward's dQ kernel: no atomics
  return a;
}

std::vector<ForwardConfig> multiscale_forward_configs(DType dtype, int head_dim) {
  std::vector<ForwardConfig> configs = forward_configs(dtype, head_dim, MaskKind::none, false);
  std::erase_if(configs, [](const ForwardConfig& c) { return c.path() != ForwardPath::mma_sync; });
  return configs;
}

std::vector<BackwardConfig> multiscale_backward_configs(DType dtype, int head_dim) {
  // The mma.sync kernels' deterministic tiles: the TMA backward knows no multi-scale mask.
  std::vector<BackwardConfig> configs =
      backward_configs(dtype, head_dim, MaskKind::none, false, /*deterministic=*/true);
  std::erase_if(configs, [](const BackwardConfig& c) { return c.tma; });
  return configs;
}

ForwardConfig default_multiscale_forward_config(DType dtype, int head_dim,
                                                const std::string& arch) {
  // 64-row query blocks: at 128 rows over 4 warps, the mask's addressing beside 32 rows of
  // scores and O per warp spills (NVRTC 13.0, sm_80 and sm_90a).
  constexpr std::int64_t kRows = 64;
  return mma_sync_forward_config(dtype, head_dim, MaskKind::none, false, arch, kRows,
                                 /*inference=*/true);
}

BackwardConfig default_multiscale_backward_config(DType dtype, int head_dim,
                                                  const std::string& arch) {
  // The mma.sync kernels (the TMA backward knows no decay mask), in their deterministic mode.
  return fallback_backward_config(dtype, head_dim, MaskKind::none, false, /*deterministic=*/true,
                                  arch);
}

detail::KernelSpec multiscale_forward_spec(const ForwardConfig& config, MultiScaleMask mask,
                                           const std::string& arch) {
  if (config.path() != ForwardPath::mma_sync || config.inference_layout() ||
      config.mask != MaskKind::none || config.softcap) {
    throw InvalidArgument("config",
                          "is not a multi-scale forward config (the mma.sync path's "
                          "tiles, no mask kind, softcap or inference layout)");
  }
  return multiscale_spec(forward_spec(config, arch), "attention_forward_kernel",
                         "multiscale_forward_kernel", "multiscale/multiscale_forward_kernel.cuh",
                         mask, "multiscale_forward");
}

std::vector<detail::KernelSpec> multiscale_backward_specs(const BackwardConfig& config,
                                                          MultiScaleMask mask,
                                                          const std::string& arch) {
  if (!config.deterministic || config.mask != MaskKind::none || config.softcap || config.varlen) {
    throw InvalidArgument("config",
                          "is not a multi-scale backward config (deterministic tiles, "
                          "no mask kind, softcap or variable lengths)");
  }
  const BackwardSpecs specs = backward_specs(config, arch);
  return {specs.delta,
          multiscale_spec(
              specs.dkdv, "attention_backward_dkdv_kernel", "multiscale_backward_dkdv_kernel",
              "multiscale/multiscale_backward_dkdv_kernel.cuh", mask, "multiscale_backward.dkdv"),
          multiscale_spec(specs.dq, "attention_backward_dq_kernel", "multiscale_backward_dq_kernel",
                          "multiscale/multiscale_backward_dq_kernel.cuh", mask,
                          "multiscale_backward.dq")};
}

namespace {

/// multiscale_forward after validation: checks the config, then launches.
void launch_multiscale_forward(detail::RuntimeBackend& backend,
                               const MultiScaleAttention& attention, const TensorView& q,
                               const TensorView& k, const TensorView& v, const TensorView& mask,
                               const TensorView& o, const TensorView& rowsum,
                               const ForwardConfig& config, Stream stream) {
  const Attention a = multiscale_as_attention(attention);
  check_forward_config(config, a, q, k, v, o);
  const detail::KernelSpec spec =
      multiscale_forward_spec(config, attention.mask, backend.info().arch());
  check_config_fits_device(config.shared_bytes(), backend.info());
  if (attention.batch == 0 || attention.seqlen_q == 0) return;
  const TensorView none{};
  const MultiScaleParams params =
      multiscale_params(attention, q, k, v, mask, o, rowsum, none, none, none, none, none, nullptr);
  detail::launch_kernel(
      backend.executor(), spec, forward_launch_shape(config, a, stream),
      multiscale_buffers(
          {{&q, "q"}, {&k, "k"}, {&v, "v"}, {&mask, "mask"}, {&o, "o"}, {&rowsum, "rowsum"}}),
      params);
}

/// multiscale_backward after validation: checks the config, then launches.
void launch_multiscale_backward(detail::RuntimeBackend& backend,
                                const MultiScaleAttention& attention, const TensorView& q,
                                const TensorView& k, const TensorView& v, const TensorView& mask,
                                const TensorView& o, const TensorView& rowsum,
                                const TensorView& dout, const TensorView& dq, const TensorView& dk,
                                const TensorView& dv, const TensorView& dmask,
                                const BackwardConfig& config, Stream stream) {
  const Attention a = multiscale_as_attention(attention);
  check_backward_config(config, a, q);
  const std::vector<detail::KernelSpec> specs =
      multiscale_backward_specs(config, attention.mask, backend.info().arch());
  check_config_fits_device(config.shared_bytes(), backend.info());
  if (attention.batch == 0 && dmask.data != nullptr && dmask.numel() > 0) {
    // No sequence: dL/dM is 0, which no kernel would write.
    const std::vector<float> zeros(static_cast<std::size_t>(dmask.numel()), 0.0f);
    backend.copy_to_device(dmask.data, zeros.data(), zeros.size() * sizeof(float));
  }
  if (attention.batch == 0) return;
  const DeviceBuffer delta = backend.allocate_buffer_on_stream(backward_delta_bytes(a), stream);
  const MultiScaleParams params =
      multiscale_params(attention, q, k, v, mask, o, rowsum, dout, dq, dk, dv, dmask,
                        static_cast<float*>(delta.data()));
  const TensorView delta_view = TensorView::contiguous(
      delta.data(), DType::f32, {attention.batch, attention.heads_q, attention.seqlen_q});
  const std::vector<detail::KernelBuffer> buffers = multiscale_buffers({{&q, "q"},
                                                                        {&k, "k"},
                                                                        {&v, "v"},
                                                                        {&mask, "mask"},
                                                                        {&o, "o"},
                                                                        {&rowsum, "rowsum"},
                                                                        {&dout, "dout"},
                                                                        {&dq, "dq"},
                                                                        {&dk, "dk"},
                                                                        {&dv, "dv"},
                                                                        {&dmask, "dmask"},
                                                                        {&delta_view, "delta"}});
  BackwardLaunchShapes shapes = backward_launch_shapes(config, a, stream);
  if (dmask.data != nullptr) shapes.dq.grid_z = 1;  // each CTA sums dM over the batch
  detail::Executor& executor = backend.executor();
  if (attention.seqlen_q > 0) {
    detail::launch_kernel(executor, specs[0], shapes.delta, buffers, params.attention);  // δ
  }
  if (attention.seqlen_k > 0) {
    detail::launch_kernel(executor, specs[1], shapes.dkdv, buffers, params);  // dK, dV
  }
  if (attention.seqlen_q > 0) {
    detail::launch_kernel(executor, specs[2], shapes.dq, buffers, params);  // dQ (dM)
  }
}

}  // namespace

void multiscale_forward(detail::RuntimeBackend& backend, const MultiScaleAttention& attention,
                        const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& mask, const TensorView& o, const TensorView& rowsum,
                        const ForwardConfig& config, Stream stream) {
  validate_multiscale_forward(attention, q, k, v, mask, o, rowsum);
  launch_multiscale_forward(backend, attention, q, k, v, mask, o, rowsum, config, stream);
}

void multiscale_backward(detail::RuntimeBackend& backend, const MultiScaleAttention& attention,
                         const TensorView& q, const TensorView& k, const TensorView& v,
                         const TensorView& mask, const TensorView& o, const TensorView& rowsum,
                         const TensorView& dout, const TensorView& dq, const TensorView& dk,
                         const TensorView& dv, const TensorView& dmask,
                         const BackwardConfig& config, Stream stream) {
  validate_multiscale_backward(attention, q, k, v, mask, o, rowsum, dout, dq, dk, dv, dmask);
  launch_multiscale_backward(backend, attention, q, k, v, mask, o, rowsum, dout, dq, dk, dv, dmask,
                             config, stream);
}

void run_multiscale_forward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                            const MultiScaleAttention& attention, const TensorView& q,
                            const TensorView& k, const TensorView& v, const TensorView& mask,
                            const TensorView& o, const TensorView& rowsum, Stream stream) {
  validate_multiscale_forward(attention, q, k, v, mask, o, rowsum);
  const ForwardConfig config =
      attention.batch == 0 || attention.seqlen_q == 0
          ? default_multiscale_forward_config(q.dtype, static_cast<int>(attention.head_dim),
                                              backend.info().arch())
          : choice.choose_as<MultiScaleForwardConfig>(MultiScaleProblem(false, q.dtype, attention))
                .tile;
  launch_multiscale_forward(backend, attention, q, k, v, mask, o, rowsum, config, stream);
}

void run_multiscale_backward(detail::RuntimeBackend& backend, ConfigChoice& choice,
                             const MultiScaleAttention& attention, const TensorView& q,
                             const TensorView& k, const TensorView& v, const TensorView& mask,
                             const TensorView& o, const TensorView& rowsum, const TensorView& dout,
                             const TensorView& dq, const TensorView& dk, const TensorView& dv,
                             const TensorView& dmask, Stream stream) {
  validate_multiscale_backward(attention, q, k, v, mask, o, rowsum, dout, dq, dk, dv, dmask);
  const BackwardConfig config =
      attention.batch == 0
          ? default_multiscale_backward_config(q.dtype, static_cast<int>(attention.head_dim),
                                               backend.info().arch())
          : choice.choose_as<MultiScaleBackwardConfig>(MultiScaleProblem(true, q.dtype, attention))
                .tiles;
  launch_multiscale_backward(backend, attention, q, k, v, mask, o, rowsum, dout, dq, dk, dv, dmask,
                             config, stream);
}

}  // namespace flashjit::kernels

namespace flashjit {

TensorView multiscale_rowsum_tensor(float* data, const MultiScaleAttention& attention) {
  return TensorView::contiguous(data, DType::f32,
                                {attention.batch, attention.heads_q, attention.seqlen_q});
}

TensorView multiscale_mask_tensor(float* data, const MultiScaleAttention& attention) {
  if (attention.mask == MultiScaleMask::decay) {
    return TensorView::contiguous(data, DType::f32, {attention.heads_q});
  }
  return TensorView::contiguous(data, DType::f32,
                                {attention.heads_q, attention.seqlen_q, attention.seqlen_k});
}

}  // namespace flashjit

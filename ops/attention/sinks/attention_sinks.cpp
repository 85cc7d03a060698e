#include "attention/sinks/attention_sinks.hpp"

#include <algorithm>
#include <limits>

#include "attention/attention_common.hpp"
#include "attention/sinks/sinks_params.cuh"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace {

void check_per_head(const TensorView& view, const std::string& name, std::int64_t heads) {
  if (view.dtype != DType::f32) {
    throw InvalidArgument(name, "is " + std::string(dtype_name(view.dtype)) +
                                    "; must be fp32 (one logit per query head)");
  }
  if (view.rank != 1 || view.shape[0] != heads) {
    throw InvalidArgument(name + ".shape", "must be [heads_q] = [" + std::to_string(heads) +
                                               "], one logit per query head");
  }
}

/// lse's [batch, heads, rows] as the kernels see it: rows of width one.
HeadTensor lse_rows_of(const TensorView& lse) {
  return {lse.data, lse.strides[0], lse.strides[2], lse.strides[1]};
}

int narrow(std::int64_t value, const char* name) {
  if (value > std::numeric_limits<int>::max()) {
    throw InvalidArgument(name, "is too large for the sink kernels (at most 2^31 - 1)");
  }
  return static_cast<int>(value);
}

detail::LaunchShape shape_of(std::int64_t blocks, int threads, Stream stream) {
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(narrow(blocks, "o.shape"));
  shape.block_x = static_cast<unsigned>(threads);
  shape.stream = static_cast<CUstream>(stream);
  return shape;
}

}  // namespace

void validate_sinks(const Attention& attention, bool backward) {
  if (present(attention.sinks))
    check_per_head(attention.sinks, "attention.sinks", attention.heads_q);
  if (!backward || !present(attention.sinks_grad)) return;
  if (!present(attention.sinks)) {
    throw InvalidArgument("attention.sinks_grad",
                          "needs attention.sinks, the logits the forward used");
  }
  check_per_head(attention.sinks_grad, "attention.sinks_grad", attention.heads_q);
}

detail::KernelSpec sinks_spec(SinkKernel kernel, DType dtype, const std::string& arch) {
  static const char* kRoles[] = {"sinks", "sink_gradient", "sink_gradient_sum"};
  detail::KernelSpec spec;
  spec.op = kernel == SinkKernel::apply ? "attention-forward" : "attention-backward";
  spec.header = "attention/sinks/sinks_kernel.cuh";
  spec.arch = arch;
  spec.role = kRoles[static_cast<int>(kernel)];
  spec.name_expression = "flashjit::attention_" + spec.role + "_kernel";
  if (kernel != SinkKernel::gradient_sum) {  // the sum reads fp32 partials only
    spec.name_expression += "<" + template_element(dtype) + ">";
    spec.traits = {std::string(dtype_name(dtype))};
  }
  spec.readable_name = detail::name_of("attention_" + spec.role, 0, spec.traits);
  spec.threads = kernel == SinkKernel::apply ? kSinkBlockThreads : 32;
  return spec;
}

std::vector<detail::KernelSpec> sinks_specs(const std::string& arch) {
  std::vector<detail::KernelSpec> specs;
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (SinkKernel kernel : {SinkKernel::apply, SinkKernel::gradient}) {
      specs.push_back(sinks_spec(kernel, dtype, arch));
    }
  }
  specs.push_back(sinks_spec(SinkKernel::gradient_sum, DType::f32, arch));
  return specs;
}

SinkLse lse_for_sinks(detail::RuntimeBackend& backend, const Attention& attention,
                      const TensorView& lse, std::initializer_list<std::int64_t> shape,
                      Stream stream) {
  if (!present(attention.sinks) || present(lse)) return {DeviceBuffer{}, lse};
  std::int64_t elements = 1;
  for (std::int64_t size : shape) elements *= size;
  DeviceBuffer workspace =
      backend.allocate_buffer_on_stream(static_cast<std::size_t>(elements) * sizeof(float), stream);
  const TensorView view = TensorView::contiguous(workspace.data(), DType::f32, shape);
  return {std::move(workspace), view};
}

SinkTensors sink_tensors(const TensorView& rows, const TensorView& lse) {
  if (rows.rank == 4) return {rows, lse};
  const std::int64_t total = rows.shape[0];
  return {TensorView::strided(rows.data, rows.dtype, {1, total, rows.shape[1], rows.shape[2]},
                              {0, rows.strides[0], rows.strides[1], rows.strides[2]}),
          TensorView::strided(lse.data, lse.dtype, {1, lse.shape[0], total},
                              {0, lse.strides[0], lse.strides[1]})};
}

void apply_sinks(detail::RuntimeBackend& backend, const Attention& attention, const TensorView& o,
                 const TensorView& lse, Stream stream) {
  if (!present(attention.sinks)) return;
  const SinkTensors t = sink_tensors(o, lse);
  const SinkRowsParams p{head_tensor(t.rows),
                         lse_rows_of(t.lse),
                         static_cast<const float*>(attention.sinks.data),
                         attention.sinks.strides[0],
                         narrow(t.rows.shape[0], "o.shape"),
                         narrow(t.rows.shape[1], "o.shape"),
                         narrow(t.rows.shape[2], "o.shape"),
                         narrow(t.rows.shape[3], "o.shape")};
  const std::int64_t rows = t.rows.shape[0] * t.rows.shape[1] * t.rows.shape[2];
  constexpr int kRowsPerBlock = kSinkBlockThreads / 32;
  const std::vector<detail::KernelBuffer> buffers = {
      kernel_buffer(o, "o"), kernel_buffer(lse, "lse"), kernel_buffer(attention.sinks, "sinks")};
  detail::launch_kernel(
      backend.executor(), sinks_spec(SinkKernel::apply, o.dtype, backend.info().arch()),
      shape_of((rows + kRowsPerBlock - 1) / kRowsPerBlock, kSinkBlockThreads, stream), buffers, p);
}

void sink_gradient(detail::RuntimeBackend& backend, const Attention& attention, const TensorView& o,
                   const TensorView& lse, const TensorView& dout, Stream stream) {
  if (!present(attention.sinks_grad)) return;
  const SinkTensors t = sink_tensors(o, lse);
  const TensorView d = sink_tensors(dout, lse).rows;
  const std::int64_t rows = t.rows.shape[0] * t.rows.shape[1], heads = t.rows.shape[2];
  const std::int64_t chunks = (rows + kSinkRowsPerChunk - 1) / kSinkRowsPerChunk;
  const DeviceBuffer partials = backend.allocate_buffer_on_stream(
      static_cast<std::size_t>(std::max<std::int64_t>(chunks * heads, 1)) * sizeof(float), stream);
  const SinkGradientParams p{head_tensor(t.rows),
                             lse_rows_of(t.lse),
                             head_tensor(d),
                             static_cast<const float*>(attention.sinks.data),
                             attention.sinks.strides[0],
                             static_cast<float*>(attention.sinks_grad.data),
                             attention.sinks_grad.strides[0],
                             static_cast<float*>(partials.data()),
                             narrow(chunks, "o.shape"),
                             narrow(t.rows.shape[0], "o.shape"),
                             narrow(t.rows.shape[1], "o.shape"),
                             narrow(heads, "o.shape"),
                             narrow(t.rows.shape[3], "o.shape")};
  const std::vector<detail::KernelBuffer> buffers = {
      kernel_buffer(o, "o"),
      kernel_buffer(lse, "lse"),
      kernel_buffer(dout, "dout"),
      kernel_buffer(attention.sinks, "sinks"),
      kernel_buffer(attention.sinks_grad, "sinks_grad"),
      {partials.data(), partials.size(), "sink_partials"}};
  const std::string& arch = backend.info().arch();
  detail::LaunchShape shape = shape_of(chunks, 32, stream);
  shape.grid_y = static_cast<unsigned>(p.heads);
  detail::launch_kernel(backend.executor(), sinks_spec(SinkKernel::gradient, o.dtype, arch), shape,
                        buffers, p);  // each chunk's partial sum
  detail::launch_kernel(backend.executor(), sinks_spec(SinkKernel::gradient_sum, o.dtype, arch),
                        shape_of(heads, 32, stream), buffers, p);  // each head's, in order
}

}  // namespace flashjit::kernels

#include "attention/inference/unused_rows.hpp"

#include <algorithm>

#include "attention/attention_common.hpp"
#include "attention/inference/unused_rows_params.cuh"
#include "runtime/executor.hpp"

namespace flashjit::kernels {

detail::KernelSpec unused_rows_spec(DType dtype, const std::string& arch) {
  detail::KernelSpec spec;
  spec.op = "attention-forward";
  spec.header = "attention/inference/unused_rows_kernel.cuh";
  const std::string element = dtype == DType::f32 ? "float" : template_element(dtype);
  spec.name_expression = "flashjit::unused_rows_kernel<" + element + ">";
  spec.arch = arch;
  spec.role = "unused_rows";
  spec.traits = {std::string(dtype_name(dtype))};
  spec.readable_name = detail::name_of("attention_unused_rows", 0, spec.traits);
  spec.threads = kUnusedRowsThreads;
  return spec;
}

std::vector<detail::KernelSpec> unused_rows_specs(const std::string& arch) {
  return {unused_rows_spec(DType::f16, arch), unused_rows_spec(DType::bf16, arch),
          unused_rows_spec(DType::f32, arch)};
}

void fill_unused_rows(detail::RuntimeBackend& backend, const TensorView& view, bool lse,
                      const SequenceRows& rows, float value, Stream stream) {
  if (rows.used.data == nullptr || rows.batch == 0 || view.data == nullptr) return;
  UnusedRowsParams p{};
  // [batch, rows, heads, width], or lse's [batch, heads, rows] as rows of width 1.
  p.rows = lse ? HeadTensor{view.data, view.strides[0], view.strides[2], view.strides[1]}
               : HeadTensor{view.data, view.strides[0], view.strides[1], view.strides[2]};
  p.cu_seqlens = static_cast<const int*>(rows.cu_seqlens.data);
  p.used = static_cast<const int*>(rows.used.data);
  p.seqlen = static_cast<int>(rows.seqlen);
  p.heads = static_cast<int>(lse ? view.shape[1] : view.shape[2]);
  p.width = lse ? 1 : static_cast<int>(view.shape[3]);
  p.value = value;
  std::vector<detail::KernelBuffer> buffers = {kernel_buffer(view, lse ? "lse" : "rows"),
                                               kernel_buffer(rows.used, "used")};
  if (p.cu_seqlens != nullptr) buffers.push_back(kernel_buffer(rows.cu_seqlens, "cu_seqlens"));
  // Enough blocks for the longest sequence's rows at one element a thread, at most 64 a
  // sequence (the threads stride over the rest).
  const std::int64_t elements = rows.seqlen * p.heads * p.width;
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>(
      std::clamp<std::int64_t>((elements + kUnusedRowsThreads - 1) / kUnusedRowsThreads, 1, 64));
  shape.grid_y = static_cast<unsigned>(rows.batch);
  shape.block_x = kUnusedRowsThreads;
  shape.stream = static_cast<CUstream>(stream);
  detail::launch_kernel(backend.executor(), unused_rows_spec(view.dtype, backend.info().arch()),
                        shape, buffers, p);
}

}  // namespace flashjit::kernels

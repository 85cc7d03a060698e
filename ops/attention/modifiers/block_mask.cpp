#include "attention/modifiers/block_mask.hpp"

#include "attention/attention_common.hpp"
#include "attention/attention_forward.hpp"
#include "attention/modifiers/attention_captures.hpp"
#include "attention/modifiers/score_modifiers.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {
namespace {

constexpr int kBuilderThreads = 128;  // the kernel's __launch_bounds__

std::string str(std::int64_t value) { return std::to_string(value); }

/// `view` as a block mask of `attention`, named `name` in errors.
void check_block_mask_tensor(const Attention& a, const TensorView& view, const std::string& name) {
  if (a.mask_mod.empty()) {
    throw InvalidArgument(name,
                          "needs attention.mask_mod: a block mask summarizes a mask "
                          "modifier (set the one it was built from)");
  }
  check_tensor(view, name, 4);
  if (view.dtype != DType::i32) {
    throw InvalidArgument(name + ".dtype",
                          "is " + std::string(dtype_name(view.dtype)) + "; must be int32");
  }
  check_shape(view, name, {a.batch, a.heads_q, block_mask_slabs(a), 4},
              "[batch, heads_q, ceil(seqlen_q / 16), 4]");
  if (view.strides[3] != 1 || view.strides[2] != 4) {
    throw InvalidArgument(name + ".strides",
                          "end in " + str(view.strides[2]) + ", " + str(view.strides[3]) +
                              "; must end in 4, 1 (each slab's four entries together)");
  }
}

}  // namespace

std::int64_t block_mask_slabs(const Attention& a) {
  return (a.seqlen_q + kBlockMaskRows - 1) / kBlockMaskRows;
}

void check_block_mask(const Attention& a) {
  if (a.block_mask.data == nullptr) return;
  check_block_mask_tensor(a, a.block_mask, "attention.block_mask");
}

BlockMaskView block_mask_view(const Attention& a) {
  if (a.block_mask.data == nullptr) return {nullptr, 0, 0};
  return {static_cast<const int*>(a.block_mask.data), a.block_mask.strides[0],
          a.block_mask.strides[1]};
}

detail::KernelSpec block_mask_spec(const Attention& a, const std::string& arch) {
  ScoreModifiers mask = score_modifiers(a);
  mask.score.clear();  // the score modifier plays no part
  detail::KernelSpec spec;
  spec.op = "attention-forward";
  spec.header = "attention/modifiers/block_mask_kernel.cuh";
  spec.name_expression = "flashjit::attention_block_mask_kernel<" + mask.type_name() + ">";
  spec.prelude = mask.definition();
  spec.arch = arch;
  spec.role = "block_mask";
  spec.traits = {"mod" + mask.digest().substr(0, 8)};
  spec.readable_name = detail::name_of("attention_block_mask", 0, spec.traits);
  spec.threads = kBuilderThreads;
  return spec;
}

void run_build_block_mask(detail::RuntimeBackend& backend, const Attention& a,
                          const TensorView& block_mask, Stream stream) {
  Attention checked = a;
  checked.block_mask = {};  // the one being built is the argument
  validate_attention(checked);
  if (block_mask.data == nullptr) throw InvalidArgument("block_mask", "is required");
  check_block_mask_tensor(a, block_mask, "block_mask");
  check_no_self_overlap(block_mask, "block_mask");
  BlockMaskParams params{static_cast<int*>(block_mask.data),
                         block_mask.strides[0],
                         block_mask.strides[1],
                         static_cast<int>(block_mask_slabs(a)),
                         static_cast<int>(a.seqlen_q),
                         static_cast<int>(a.seqlen_k),
                         capture_table(a)};
  detail::LaunchShape shape;
  shape.grid_x = static_cast<unsigned>((params.slabs + kBuilderThreads - 1) / kBuilderThreads);
  shape.grid_y = static_cast<unsigned>(a.heads_q);
  shape.grid_z = static_cast<unsigned>(a.batch);
  shape.block_x = kBuilderThreads;
  shape.stream = static_cast<CUstream>(stream);
  std::vector<detail::KernelBuffer> buffers = {kernel_buffer(block_mask, "block_mask")};
  add_capture_buffers(a, buffers);
  detail::launch_kernel(backend.executor(), block_mask_spec(a, backend.info().arch()), shape,
                        buffers, params);
}

}  // namespace flashjit::kernels

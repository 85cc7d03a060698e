// Softmax's entry in the op registry: its name and its compile matrix.
#include "common/op_registry.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_emulated.hpp"
#include "softmax/softmax_space.cuh"

namespace flashjit::kernels {
namespace {

std::vector<detail::KernelSpec> softmax_specs(const std::string& arch, SpecSet set) {
  std::vector<SoftmaxConfig> configs;
  if (set == SpecSet::all) {
    configs = softmax_configs();
  } else {
    for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
      for (int max_cols : softmax_space::kMaxColsBuckets) {
        // The default for the bucket's widest row; the open bucket takes rows longer than all.
        constexpr int kLongerThanAnyBucket = 1 << 30;
        configs.push_back(
            default_softmax_config(dtype, max_cols != 0 ? max_cols : kLongerThanAnyBucket));
      }
    }
  }
  std::vector<detail::KernelSpec> specs;
  for (const SoftmaxConfig& config : configs) specs.push_back(softmax_spec(config, arch));
  return specs;
}

}  // namespace

OpInfo softmax_op() {
  return {"softmax",
          "row-wise softmax (online softmax), fp16/bf16/fp32",
          softmax_specs,
          {},
          emulated::add_softmax_kernels};
}

}  // namespace flashjit::kernels

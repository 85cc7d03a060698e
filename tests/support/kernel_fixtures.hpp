#pragma once
// Small real kernels to exercise the cache and compiler with (the softmax op's specs).
#include "runtime/kernel_cache.hpp"
#include "runtime/kernel_spec.hpp"
#include "softmax/softmax.hpp"

namespace flashjit::testing {

/// A softmax spec for `arch`; `variant` picks different configs (and so different keys).
inline detail::KernelSpec sample_spec(int variant = 0, const std::string& arch = "sm_90a") {
  const auto configs = kernels::softmax_configs();
  return kernels::softmax_spec(configs[static_cast<std::size_t>(variant) % configs.size()], arch);
}

/// Kernel cache options for a disk cache at `dir`, everything else default.
inline detail::KernelCache::Options cache_options(const std::filesystem::path& dir) {
  detail::KernelCache::Options options;
  options.dir = dir;
  return options;
}

}  // namespace flashjit::testing

#pragma once
// `flashjit run --counters`: the emulator's work counters of an op's kernels, and how they
// compare with the least work the problem needs (DESIGN.md section 5).
#include <string>
#include <vector>

#include "flashjit/attention.hpp"
#include "flashjit/work_counters.hpp"

namespace flashjit::tools {

/// The least global traffic of an attention call in `dtype`: every input read once and every
/// output written once (forward: Q, K, V in; O and LSE out; backward: Q, K, V, O, dO and LSE
/// in; dQ, dK, dV out). Workspaces are not part of the minimum.
double minimum_global_bytes(const Attention& attention, DType dtype, bool backward);

/// Prints the summed counters of the kernels in `work` whose names start with `prefix`, one
/// `name value` line each, then tensor_flops_ratio (against `useful_flops`), global_bytes_ratio
/// (against `minimum_bytes`) and shared_bytes_per_tensor_flop.
void print_work(const std::vector<KernelWork>& work, const std::string& prefix, double useful_flops,
                double minimum_bytes);

}  // namespace flashjit::tools

#pragma once
// Runs forward-attention test cases on the GPU (attention/attention_case) and checks their
// verdicts: the runtime's own config, and for bf16 head dims 64 and 128 every config of the
// space that fits the device's shared memory (gpu/case_sweep.hpp). Cases are built with
// support/forward_case_builders.hpp.
#include <vector>

#include "attention/check/attention_case.hpp"
#include "gpu/case_sweep.hpp"
#include "support/forward_case_builders.hpp"

namespace flashjit::testing {

/// Runs every case (with the configs `sweep` asks for) and checks each verdict; a run that
/// throws fails with its label and message, and the others still run.
void check_cases(const std::vector<ForwardCase>& cases,
                 ConfigSweep sweep = ConfigSweep::every_config);

}  // namespace flashjit::testing

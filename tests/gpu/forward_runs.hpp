#pragma once
// Runs forward-attention test cases on the GPU (tests/support/attention_case) and checks their
// verdicts: the runtime's own config, and for bf16 head dims 64 and 128 every config of the
// space that fits the device's shared memory. Every kernel the runs need is compiled ahead, in
// parallel, so that NVRTC's minutes are spent once and on all cores.
#include <cstdint>
#include <vector>

#include "flashjit/runtime.hpp"
#include "support/attention_case.hpp"

namespace flashjit::testing {

/// The GPU, opened once for the whole binary. Without one, every test fails with the Error
/// saying what is missing (no driver, no device).
Runtime& gpu();

/// A single-batch bf16 [B, L, H, D] case; the seed follows from the shape.
ForwardCase make_case(std::int64_t heads_q, std::int64_t heads_kv, std::int64_t seqlen_q,
                      std::int64_t seqlen_k, std::int64_t head_dim, bool causal = false);

/// Which configs a case runs with.
enum class ConfigSweep {
  default_only,  ///< the runtime's choice
  every_config,  ///< also every config that fits the device, for bf16 head dims 64 and 128
};

/// Runs every case (with the configs `sweep` asks for) and checks each verdict; a run that
/// throws fails with its label and message, and the others still run.
void check_cases(const std::vector<ForwardCase>& cases,
                 ConfigSweep sweep = ConfigSweep::every_config);

}  // namespace flashjit::testing

#pragma once
// The TMA forward's tensor maps (AttentionTmaMaps, templates/attention/tma_forward_traits.cuh),
// described for the executor to encode. Internal to kernels/.
#include <cstdint>
#include <vector>

#include "attention/forward_params.cuh"
#include "emulator/ptx_api.hpp"
#include "flashjit/attention.hpp"

namespace flashjit::kernels {

/// The maps of Q, K, V and O, in AttentionTmaMaps' order, for a validated call whose kernel
/// arguments are `params`, with Br = block_m and Bc = block_n.
std::vector<emulator::TensorMap> forward_tma_maps(const AttentionForwardParams& params,
                                                  const Attention& attention, int block_m,
                                                  int block_n);

}  // namespace flashjit::kernels

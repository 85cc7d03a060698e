#pragma once
// Host side of block masks (Attention::block_mask): their checks, the builder kernel's spec and
// launch (Runtime::build_block_mask), and the forward kernel's view of one.
#include <string>

#include "attention/parts/block_mask_params.cuh"
#include "flashjit/attention.hpp"
#include "runtime/kernel_spec.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::kernels {

/// Slabs of 16 query rows a block mask of `attention` has.
std::int64_t block_mask_slabs(const Attention& attention);

/// Checks attention.block_mask when present: mask_mod set, int32 [batch, heads_q, slabs, 4]
/// with unit strides in the last two dimensions. Throws InvalidArgument("attention.block_mask"
/// ...) otherwise. validate_attention calls it.
void check_block_mask(const Attention& attention);

/// The forward kernel's view of attention.block_mask (zero when absent).
BlockMaskView block_mask_view(const Attention& attention);

/// The builder kernel for `attention`'s mask_mod on `arch`.
detail::KernelSpec block_mask_spec(const Attention& attention, const std::string& arch);

/// Runtime::build_block_mask: validates `attention` (mask_mod required) and `block_mask` (as
/// check_block_mask checks attention.block_mask), then evaluates mask_mod over every (batch,
/// query head, query, key) into it. Nothing is launched on bad input.
void run_build_block_mask(detail::RuntimeBackend& backend, const Attention& attention,
                          const TensorView& block_mask, Stream stream);

}  // namespace flashjit::kernels

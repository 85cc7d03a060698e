#pragma once
// Shared by the forward files of the emulated kernel table: configs are written once, as data,
// and each becomes both the template instance (ForwardTraits) and, through forward_spec, the
// name expression it is found by, so the two cannot disagree.
#include <algorithm>
#include <array>

#include "attention/attention_forward.hpp"
#include "attention/emulated/forward_shares.hpp"
#include "attention/fa2/forward_kernel.cuh"
#include "common/emulated_kernel.hpp"

namespace flashjit::kernels::emulated {

/// Br, Bc, warps and stages of a forward config, and whether Q stays in registers.
struct Tile {
  int block_m;
  int block_n;
  int warps;
  int stages;
  bool q_in_registers = false;
};

/// The forward config of `tile` with the other fields given.
constexpr ForwardConfig forward_config(DType dtype, int head_dim, Tile tile, MaskKind mask,
                                       bool softcap) {
  return {dtype,       head_dim, tile.block_m, tile.block_n,       tile.warps,
          tile.stages, mask,     softcap,      tile.q_in_registers};
}

/// `tile` at `head_dim` for fp16 and bf16, each without and with the window mask; no softcap.
constexpr std::array<ForwardConfig, 4> every_dtype_and_mask(int head_dim, Tile tile) {
  return {forward_config(DType::f16, head_dim, tile, MaskKind::none, false),
          forward_config(DType::f16, head_dim, tile, MaskKind::window, false),
          forward_config(DType::bf16, head_dim, tile, MaskKind::none, false),
          forward_config(DType::bf16, head_dim, tile, MaskKind::window, false)};
}

/// `tile` at `head_dim` for bf16 without and with the window mask.
constexpr std::array<ForwardConfig, 2> bf16_both_masks(int head_dim, Tile tile,
                                                       bool softcap = false) {
  return {forward_config(DType::bf16, head_dim, tile, MaskKind::none, softcap),
          forward_config(DType::bf16, head_dim, tile, MaskKind::window, softcap)};
}

/// The configs of every part, in order.
template <std::size_t... N>
constexpr auto concat(const std::array<ForwardConfig, N>&... parts) {
  std::array<ForwardConfig, (N + ...)> all{};
  auto out = all.begin();
  ((out = std::copy(parts.begin(), parts.end(), out)), ...);
  return all;
}

/// Adds the host-compiled forward kernel of every config in `Configs`.
template <const auto& Configs>
void add_forward_configs(detail::EmulatedKernelTable& table) {
  for_each_config<Configs>([&]<ForwardConfig C>() {
    using Traits = ForwardTraits<Element<C.dtype>, C.head_dim, C.block_m, C.block_n, C.warps,
                                 C.stages, C.mask, C.softcap, C.q_in_registers>;
    table.add({forward_spec(C, detail::kEmulatorArch),
               &HostLauncher<&attention_forward_kernel<Traits>>::launch});
  });
}

// default_forward_config(dtype, head_dim, mask, softcap, "sm_80") per head dim (the tiles of
// ops/attention/attention_forward.cpp's preferred_tiles, two K/V stages where they fit sm_80's
// 163 KB). test_backends checks these are the defaults; when the heuristic changes, that test
// names the kernels to put here.
inline constexpr Tile kDefaultUpTo64{128, 64, 4, 2, /*q_in_registers=*/true};
inline constexpr Tile kDefaultUpTo96{128, 64, 4, 2};
inline constexpr Tile kDefaultUpTo128{128, 64, 4, 2};
inline constexpr Tile kDefault256{128, 32, 8, 2};

}  // namespace flashjit::kernels::emulated

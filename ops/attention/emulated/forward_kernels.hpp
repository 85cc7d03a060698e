#pragma once
// Shared by the forward files of the emulated kernel table: instances are written once, as data,
// and each becomes both the template instance (ForwardTraits) and, through its config and
// forward_spec, the name expression it is found by, so the two cannot disagree.
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

/// One mma.sync forward instance of the table, as data a template parameter can be (a
/// ForwardConfig holds a std::variant, which cannot): `tile` with the other fields given.
struct Fa2Instance {
  DType dtype;
  int head_dim;
  Tile tile;
  MaskKind mask;
  bool softcap;

  /// The config the instance is found by.
  ForwardConfig config() const {
    return {dtype,        head_dim,   tile.block_m,
            tile.block_n, tile.warps, tile.stages,
            mask,         softcap,    Fa2Options{tile.q_in_registers}};
  }
};

/// `tile` at `head_dim` for fp16 and bf16, each without and with the window mask; no softcap.
constexpr std::array<Fa2Instance, 4> every_dtype_and_mask(int head_dim, Tile tile) {
  return {Fa2Instance{DType::f16, head_dim, tile, MaskKind::none, false},
          Fa2Instance{DType::f16, head_dim, tile, MaskKind::window, false},
          Fa2Instance{DType::bf16, head_dim, tile, MaskKind::none, false},
          Fa2Instance{DType::bf16, head_dim, tile, MaskKind::window, false}};
}

/// `tile` at `head_dim` for bf16 without and with the window mask.
constexpr std::array<Fa2Instance, 2> bf16_both_masks(int head_dim, Tile tile,
                                                     bool softcap = false) {
  return {Fa2Instance{DType::bf16, head_dim, tile, MaskKind::none, softcap},
          Fa2Instance{DType::bf16, head_dim, tile, MaskKind::window, softcap}};
}

/// The instances of every part, in order.
template <std::size_t... N>
constexpr auto concat(const std::array<Fa2Instance, N>&... parts) {
  std::array<Fa2Instance, (N + ...)> all{};
  auto out = all.begin();
  ((out = std::copy(parts.begin(), parts.end(), out)), ...);
  return all;
}

/// Adds the host-compiled forward kernel of every instance in `Instances`.
template <const auto& Instances>
void add_forward_configs(detail::EmulatedKernelTable& table) {
  for_each_config<Instances>([&]<Fa2Instance I>() {
    using Traits =
        ForwardTraits<Element<I.dtype>, I.head_dim, I.tile.block_m, I.tile.block_n, I.tile.warps,
                      I.tile.stages, I.mask, I.softcap, I.tile.q_in_registers>;
    table.add({forward_spec(I.config(), detail::kEmulatorArch),
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

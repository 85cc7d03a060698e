#pragma once
// Shared by the backward files of the emulated kernel table. Configs are written once, as data;
// each becomes both the template instances of every kernel backward_specs names for it (the
// dtype's delta kernel, dQ, and dK/dV in one launch or as dK then dV) and, through
// backward_specs, the name expressions they are found by, so the two cannot disagree.
#include <algorithm>
#include <array>

#include "attention/backward_delta_kernel.cuh"
#include "attention/backward_dkdv_kernel.cuh"
#include "attention/backward_dq_kernel.cuh"
#include "backward_shares.hpp"
#include "emulated_kernel.hpp"
#include "kernels/attention_backward.hpp"

namespace flashjit::kernels::emulated {

/// Br, Bc and warps of a backward config.
struct BackwardTile {
  int block_m;
  int block_n;
  int warps;
};

/// The dynamic shared memory sm_80, the GPU the emulator models, lets a block opt into
/// (arch_shared_memory_limit("sm_80"), which is not constexpr).
inline constexpr int kEmulatorSharedBytes = 163 * 1024;

/// The backward config of `tile` with the other fields given.
constexpr BackwardConfig backward_config(DType dtype, int head_dim, BackwardTile tile,
                                         MaskKind mask, bool softcap) {
  return {dtype, head_dim, tile.block_m, tile.block_n, tile.warps, mask, softcap};
}

/// Whether `tile` is in the backward space at `head_dim` and fits the emulated sm_80.
constexpr bool emulator_can_run(int head_dim, BackwardTile tile) {
  namespace space = attention_backward_space;
  return space::config_valid(head_dim, tile.block_m, tile.block_n, tile.warps) &&
         space::shared_bytes(head_dim, tile.block_m, tile.block_n) <= kEmulatorSharedBytes;
}

/// How many tiles the space has at `HeadDim` (see every_tile).
template <int HeadDim>
constexpr int tile_count() {
  namespace space = attention_backward_space;
  int count = 0;
  for (int block_m : space::kBlockM)
    for (int block_n : space::kBlockN)
      for (int warps : space::kWarps) count += emulator_can_run(HeadDim, {block_m, block_n, warps});
  return count;
}

/// Every tile of the backward space at `HeadDim` that fits sm_80, in backward_configs' order.
/// The spaces of head dims 64 and up are small (three tiles or fewer), so the table holds them
/// whole: the tests sweep them, and any default the heuristic picks is there.
template <int HeadDim>
constexpr std::array<BackwardTile, tile_count<HeadDim>()> every_tile() {
  namespace space = attention_backward_space;
  std::array<BackwardTile, tile_count<HeadDim>()> tiles{};
  auto out = tiles.begin();
  for (int block_m : space::kBlockM)
    for (int block_n : space::kBlockN)
      for (int warps : space::kWarps)
        if (emulator_can_run(HeadDim, {block_m, block_n, warps}))
          *out++ = {block_m, block_n, warps};
  return tiles;
}

/// Every combination of `tiles`, `dtypes` and `masks` at `head_dim`.
template <std::size_t Tiles, std::size_t DTypes, std::size_t Masks>
constexpr std::array<BackwardConfig, Tiles * DTypes * Masks> combine(
    int head_dim, const std::array<BackwardTile, Tiles>& tiles,
    const std::array<DType, DTypes>& dtypes, const std::array<MaskKind, Masks>& masks,
    bool softcap = false) {
  std::array<BackwardConfig, Tiles * DTypes * Masks> configs{};
  auto out = configs.begin();
  for (DType dtype : dtypes)
    for (MaskKind mask : masks)
      for (BackwardTile tile : tiles)
        *out++ = backward_config(dtype, head_dim, tile, mask, softcap);
  return configs;
}

inline constexpr std::array<DType, 2> kBothDTypes = {DType::f16, DType::bf16};
inline constexpr std::array<MaskKind, 2> kBothMasks = {MaskKind::none, MaskKind::window};

/// The configs of every part, in order.
template <std::size_t... N>
constexpr auto concat(const std::array<BackwardConfig, N>&... parts) {
  std::array<BackwardConfig, (N + ...)> all{};
  auto out = all.begin();
  ((out = std::copy(parts.begin(), parts.end(), out)), ...);
  return all;
}

/// The template instance of `C` computing `Gradients` (the dQ kernel always takes both).
template <BackwardConfig C, attention_backward_space::KeyGradients Gradients>
using BackwardTraitsOf = BackwardTraits<Element<C.dtype>, C.head_dim, C.block_m, C.block_n, C.warps,
                                        C.mask, C.softcap, Gradients>;

/// Adds every kernel backward_specs names for each config in `Configs`, each with its spec. A
/// dtype's delta kernel comes with each of its configs; the table keeps one.
template <const auto& Configs>
void add_backward_configs(detail::EmulatedKernelTable& table) {
  using attention_backward_space::KeyGradients;
  for_each_config<Configs>([&]<BackwardConfig C>() {
    const BackwardSpecs specs = backward_specs(C, detail::kEmulatorArch);
    table.add(
        {specs.delta, &HostLauncher<&attention_backward_delta_kernel<Element<C.dtype>>>::launch});
    table.add(
        {specs.dq,
         &HostLauncher<
             &attention_backward_dq_kernel<BackwardTraitsOf<C, KeyGradients::both>>>::launch});
    if constexpr (attention_backward_space::split_key_gradients(C.head_dim)) {
      // backward_specs lists dK's launch, then dV's.
      table.add(
          {specs.key_gradients.at(0),
           &HostLauncher<
               &attention_backward_dkdv_kernel<BackwardTraitsOf<C, KeyGradients::dk>>>::launch});
      table.add(
          {specs.key_gradients.at(1),
           &HostLauncher<
               &attention_backward_dkdv_kernel<BackwardTraitsOf<C, KeyGradients::dv>>>::launch});
    } else {
      table.add(
          {specs.key_gradients.at(0),
           &HostLauncher<
               &attention_backward_dkdv_kernel<BackwardTraitsOf<C, KeyGradients::both>>>::launch});
    }
  });
}

// default_backward_config(dtype, head_dim, mask, softcap, "sm_80") for head dims up to 64 (the
// first tile of kernels/attention_backward.cpp's preferred_tiles that fits). test_backends
// checks this is the default; when the heuristic changes, that test names the kernels to put
// here. Head dims 64 and up need no such constant: their whole spaces are in the table.
inline constexpr BackwardTile kBackwardDefaultUpTo64{64, 64, 4};

}  // namespace flashjit::kernels::emulated

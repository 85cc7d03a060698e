#pragma once
// Shared by the backward files of the emulated kernel table. Configs are written once, as data;
// each becomes both the template instances of every kernel backward_specs names for it (the
// dtype's delta kernel, dK/dV, and dQ or the dQ-convert kernel) and, through backward_specs, the
// name expressions they are found by, so the two cannot disagree. Configs not listed here are
// compiled for the host when first used (runtime/host_kernels), so the table holds what the
// tests run most: every default, and a few alternatives at head dims 64 and 128.
#include <algorithm>
#include <array>

#include "attention/attention_backward.hpp"
#include "attention/emulated/backward_shares.hpp"
#include "attention/fa2/backward_delta_kernel.cuh"
#include "attention/fa2/backward_dkdv_kernel.cuh"
#include "attention/fa2/backward_dq_convert_kernel.cuh"
#include "attention/fa2/backward_dq_kernel.cuh"
#include "common/emulated_kernel.hpp"

namespace flashjit::kernels::emulated {

/// The tiles of one backward config; `query` matters only when deterministic.
struct BackwardTiles {
  KeyBlockTile key;
  QueryBlockTile query{};
};

/// default_backward_config(dtype, head_dim, mask, softcap, deterministic, "sm_80")'s tiles (the
/// first entries of preferred_key_tiles and preferred_query_tiles in attention_backward.cpp that
/// fit). test_backends checks that the table holds every default; when the heuristic changes,
/// that test names the kernels to put here.
constexpr BackwardTiles default_tiles(int head_dim, bool softcap, bool deterministic) {
  // 8 warps split the atomic dQ block (64 rows) in two: not at padded widths 16 and 48.
  const bool splits = deterministic || attention_forward_space::padded_head_dim(head_dim) % 32 == 0;
  const KeyBlockTile key = head_dim > 128  ? KeyBlockTile{32, 64, 8, 2}
                           : head_dim > 64 ? KeyBlockTile{32, 128, 8, 2}
                           : splits        ? KeyBlockTile{64, 128, 8, 2}
                                           : KeyBlockTile{64, 64, 4, 2};
  if (!deterministic) return {key};
  const bool large = head_dim > (softcap ? 104 : 144);
  return {key, large ? QueryBlockTile{32, 32, 2} : QueryBlockTile{64, 64, 4}};
}

/// The backward config of `tiles` with the other fields given.
constexpr BackwardConfig backward_config(DType dtype, int head_dim, MaskKind mask, bool softcap,
                                         bool deterministic, BackwardTiles tiles) {
  return {dtype,
          head_dim,
          mask,
          softcap,
          deterministic,
          tiles.key,
          deterministic ? tiles.query : QueryBlockTile{}};
}

inline constexpr std::array<DType, 2> kBothDTypes = {DType::f16, DType::bf16};
inline constexpr std::array<MaskKind, 2> kBothMasks = {MaskKind::none, MaskKind::window};

/// The defaults at `head_dim` of both modes, for every dtype and mask given.
template <std::size_t DTypes, std::size_t Masks>
constexpr std::array<BackwardConfig, 2 * DTypes * Masks> defaults(
    int head_dim, const std::array<DType, DTypes>& dtypes, const std::array<MaskKind, Masks>& masks,
    bool softcap = false) {
  std::array<BackwardConfig, 2 * DTypes * Masks> configs{};
  auto out = configs.begin();
  for (bool deterministic : {false, true})
    for (DType dtype : dtypes)
      for (MaskKind mask : masks)
        *out++ = backward_config(dtype, head_dim, mask, softcap, deterministic,
                                 default_tiles(head_dim, softcap, deterministic));
  return configs;
}

/// `tiles` at `head_dim` in bf16 (no softcap), both masks, in the given mode.
template <std::size_t Tiles>
constexpr std::array<BackwardConfig, 2 * Tiles> alternatives(
    int head_dim, bool deterministic, const std::array<BackwardTiles, Tiles>& tiles) {
  std::array<BackwardConfig, 2 * Tiles> configs{};
  auto out = configs.begin();
  for (MaskKind mask : kBothMasks)
    for (BackwardTiles t : tiles)
      *out++ = backward_config(DType::bf16, head_dim, mask, false, deterministic, t);
  return configs;
}

/// The configs of every part, in order.
template <std::size_t... N>
constexpr auto concat(const std::array<BackwardConfig, N>&... parts) {
  std::array<BackwardConfig, (N + ...)> all{};
  auto out = all.begin();
  ((out = std::copy(parts.begin(), parts.end(), out)), ...);
  return all;
}

/// The template instances of `C`'s dK/dV and dQ kernels.
template <BackwardConfig C>
using KeyTraitsOf =
    BackwardKeyTraits<Element<C.dtype>, C.head_dim, C.key.block_m, C.key.block_n, C.key.warps,
                      C.key.stages, C.mask, C.softcap, !C.deterministic>;
template <BackwardConfig C>
using QueryTraitsOf = BackwardQueryTraits<Element<C.dtype>, C.head_dim, C.query.block_m,
                                          C.query.block_n, C.query.warps, C.mask, C.softcap>;

/// Adds every kernel backward_specs names for each config in `Configs`, each with its spec. The
/// per-row kernels come with each config of their dtype; the table keeps one of each.
template <const auto& Configs>
void add_backward_configs(detail::EmulatedKernelTable& table) {
  for_each_config<Configs>([&]<BackwardConfig C>() {
    using T = Element<C.dtype>;
    const BackwardSpecs specs = backward_specs(C, detail::kEmulatorArch);
    table.add({specs.delta, &HostLauncher<&attention_backward_delta_kernel<T>>::launch});
    table.add({specs.dkdv, &HostLauncher<&attention_backward_dkdv_kernel<KeyTraitsOf<C>>>::launch});
    if constexpr (C.deterministic) {
      table.add({specs.dq, &HostLauncher<&attention_backward_dq_kernel<QueryTraitsOf<C>>>::launch});
    } else {
      table.add({specs.dq, &HostLauncher<&attention_backward_dq_convert_kernel<T>>::launch});
    }
  });
}

}  // namespace flashjit::kernels::emulated

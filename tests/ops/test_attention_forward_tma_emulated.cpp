// The warp-specialized Hopper forward (ops/attention/hopper/tma_forward_kernel.cuh) on the CPU
// emulator against the float64 reference, launched directly with its traits and with the
// tensor maps built here the way a host builds them (from each tensor's strides, bshd or bhsd),
// so that configs the runtime does not offer are covered too. The bar is the forward suite's: a
// relative L2 error of O at most twice that of a plain attention in the input dtype, LSE close,
// every output written (outputs start as NaN), and a clean report (races, proxy fences, mbarrier
// and TMA protocol).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attention/hopper/tma_forward_kernel.cuh"
#include "runtime/compiler.hpp"
#include "runtime/template_sources.hpp"
#include "support/direct_forward.hpp"
#include "support/ptx_loops.hpp"
#include "support/temp_dir.hpp"

namespace flashjit::testing {
namespace {

namespace em = flashjit::emulator;

// CTAs of the persistent kernels here: fewer than most cases' tiles (a GPU has 132), so that a
// CTA walks several tiles, some of them with no key or no valid row, in the order it would.
constexpr int kTestCtas = 3;

constexpr ForwardVariantsTag<ForwardVariants{.f16 = true, .softcap = false}> kWithF16;
constexpr ForwardVariantsTag<ForwardVariants{.f16 = false, .softcap = true}> kWithSoftcap;
constexpr ForwardVariantsTag<ForwardVariants{.f16 = true, .softcap = true}> kWithBoth;

/// Launches `c` over `buffers` with Br = BlockM, Bc = BlockN, the consumers' schedule and Stages
/// slots in each of the K and V rings (the mask kind and dtype the case needs), in clusters of
/// Cluster CTAs (an unmasked case), with its tensor maps built as the host will. `V`: the kernels
/// built beside bf16 without softcap (a case in f16 or with softcap passes kWithF16, kWithSoftcap
/// or kWithBoth; each form is another kernel for this file to compile). `seed`: the emulator
/// explores orderings from it (unset: as the environment says; CTest sets FLASHJIT_EMULATOR_EXPLORE
/// for this suite). Returns the launch's report.
template <int HeadDim, int BlockM, int BlockN, bool Overlap = false, bool Pingpong = false,
          bool PShared = false, int Stages = 2, bool Persistent = false, int Cluster = 1,
          ForwardVariants V = ForwardVariants{.f16 = false, .softcap = false}>
em::Report launch_case(const ForwardCase& c, DirectForwardBuffers& buffers,
                       ForwardVariantsTag<V> = {},
                       std::optional<std::uint64_t> seed = std::nullopt) {
  INFO(c.name() << " br" << BlockM << ".bc" << BlockN << ".s" << Stages
                << (Overlap ? ".overlap" : "") << (Pingpong ? ".pingpong" : "")
                << (PShared ? ".pshared" : "") << (Persistent ? ".persistent" : "")
                << (Cluster > 1 ? ".cluster" : ""));
  const Attention a = c.attention();
  const AttentionForwardParams params = direct_forward_params(c, buffers);
  const em::TensorMap q_map =
      tensor_map(params.q, a.batch, a.seqlen_q, a.heads_q, a.head_dim, BlockM);
  // In a cluster each CTA loads its share of K's and V's rows.
  const em::TensorMap k_map =
      tensor_map(params.k, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, BlockN / Cluster);
  const em::TensorMap v_map =
      tensor_map(params.v, a.batch, a.seqlen_k, a.heads_kv, a.head_dim, BlockN / Cluster);
  const em::TensorMap o_map =
      tensor_map(params.o, a.batch, a.seqlen_q, a.heads_q, a.head_dim, kTmaStoreRows);
  for (const em::TensorMap* map : {&q_map, &k_map, &v_map, &o_map}) {
    const std::string problem = em::tensor_map_problem(*map);
    REQUIRE_MESSAGE(problem.empty(), problem);
  }
  const AttentionTmaMaps maps{{&q_map}, {&k_map}, {&v_map}, {&o_map}};
  em::Report report;
  dispatch_forward_traits<V>(c, [&]<typename T, MaskKind Mask, bool Softcap>() {
    if constexpr (Cluster > 1 && Mask != MaskKind::none) {
      FAIL("clusters take unmasked cases only");
    } else {
      using Traits = TmaForwardTraits<T, HeadDim, BlockM, BlockN, Mask, Softcap, Stages, Overlap,
                                      Pingpong, PShared, Persistent, false, Cluster>;
      em::LaunchConfig config = direct_forward_launch<Traits>(c, buffers, "attention_forward_tma");
      // The tiles in one dimension (whole clusters of them); persistent, a few CTAs walk them,
      // several tiles a CTA.
      const std::int64_t tiles =
          tma_forward_tiles(config.grid.x, std::int64_t(config.grid.y) * config.grid.z, Cluster);
      config.grid = {static_cast<unsigned>(Persistent ? tma_forward_ctas(tiles, kTestCtas) : tiles),
                     1, 1};
      config.cluster = {Cluster, 1, 1};
      if (seed) config.explore_seed = seed;
      if constexpr (Cluster > 1) {
        report = em::launch(&attention_forward_tma_cluster_kernel<Traits>, config, params, maps);
      } else {
        report = em::launch(&attention_forward_tma_kernel<Traits>, config, params, maps);
      }
    }
  });
  REQUIRE_MESSAGE(report.clean(), report);
  CHECK(report.work.tensor_flops > 0);  // both products on wgmma
  return report;
}

/// launch_case, judged against the reference. Returns the launch's report.
template <int HeadDim, int BlockM, int BlockN, bool Overlap = false, bool Pingpong = false,
          bool PShared = false, int Stages = 2, bool Persistent = false, int Cluster = 1,
          ForwardVariants V = ForwardVariants{.f16 = false, .softcap = false}>
em::Report check_case(const ForwardCase& c, ForwardVariantsTag<V> variants = {},
                      std::optional<std::uint64_t> seed = std::nullopt) {
  DirectForwardBuffers buffers = direct_forward_buffers(c);
  const em::Report report =
      launch_case<HeadDim, BlockM, BlockN, Overlap, Pingpong, PShared, Stages, Persistent, Cluster>(
          c, buffers, variants, seed);
  CHECK(buffers.tile_counter[0] == 0);  // a counter's last take leaves it zero
  check_direct_forward(c, buffers);
  return report;
}

}  // namespace

TEST_CASE("TMA forward on the emulator: ragged lengths, both dtypes, one and two warpgroups") {
  for (std::int64_t length : {1, 17, 63, 129, 200}) {
    for (DType dtype : {DType::bf16, DType::f16}) {
      check_case<64, 64, 64>(batched_case(1, 2, 2, length, length, 64, dtype), kWithF16);
    }
    check_case<128, 128, 64>(batched_case(1, 1, 1, length, length, 128));
  }
}

TEST_CASE("TMA forward on the emulator: causal with seqlen_q above and below seqlen_k") {
  for (auto [seqlen_q, seqlen_k] : {std::pair{100, 300}, std::pair{300, 100}, std::pair{1, 65}}) {
    ForwardCase c = batched_case(1, 2, 2, seqlen_q, seqlen_k, 64);
    c.problem.causal = true;
    check_case<64, 128, 64>(c);
    check_case<64, 64, 128>(c);
  }
}

TEST_CASE("TMA forward on the emulator: head dims, GQA 8:1, bhsd, windows and softcap") {
  check_case<192, 64, 64>(batched_case(1, 1, 1, 70, 70, 192));
  check_case<256, 64, 64>(batched_case(1, 1, 1, 65, 65, 256, DType::f16), kWithF16);
  // Head dims between whole panels: the tiles are padded to 64 columns, TMA loads zeros there
  // and stores only the real ones.
  check_case<96, 128, 64>(batched_case(1, 2, 2, 129, 129, 96));
  check_case<72, 64, 64>(batched_case(2, 1, 1, 33, 47, 72));
  check_case<160, 64, 64>(batched_case(1, 1, 1, 65, 100, 160, DType::f16), kWithF16);
  check_case<64, 192, 128>(batched_case(1, 2, 2, 200, 200, 64));  // three consumer warpgroups
  check_case<64, 128, 128>(batched_case(2, 8, 1, 90, 150, 64));   // GQA 8:1, two batches
  ForwardCase bhsd = batched_case(1, 2, 1, 77, 77, 128);
  bhsd.layout = reference::Layout::bhsd;
  check_case<128, 64, 64>(bhsd);
  check_case<128, 128, 128>(bhsd);
  ForwardCase window = batched_case(1, 1, 1, 200, 200, 64);
  window.problem.window_left = 40;
  window.problem.window_right = 10;
  check_case<64, 64, 64>(window);
  check_case<64, 128, 64>(window);
  ForwardCase softcap = batched_case(1, 1, 1, 129, 129, 64);
  softcap.problem.softcap = 30.0;
  check_case<64, 64, 64>(softcap, kWithSoftcap);
}

TEST_CASE("TMA forward on the emulator: the sm_90a defaults, long and causal, MQA") {
  ForwardCase long_causal = batched_case(1, 2, 1, 1000, 1000, 64);  // GQA 2:1
  long_causal.problem.causal = true;
  check_case<64, 128, 128, true, true>(long_causal);
  ForwardCase long_128 = batched_case(1, 1, 1, 1000, 700, 128, DType::f16);
  long_128.problem.causal = true;  // seqlen_q above seqlen_k: the first 300 rows see nothing
  check_case<128, 128, 128, true, true>(long_128, kWithF16);
  check_case<128, 128, 176, true, true>(batched_case(1, 2, 2, 500, 400, 128));
  ForwardCase mqa = batched_case(2, 4, 1, 129, 257, 192);
  mqa.layout = reference::Layout::bhsd;
  check_case<192, 128, 112, true>(mqa);
  ForwardCase d256 = batched_case(1, 2, 2, 130, 130, 256);
  d256.problem.causal = true;
  check_case<256, 128, 64, true>(d256);
  check_case<256, 128, 80, true>(batched_case(1, 1, 1, 200, 170, 256, DType::f16), kWithF16);
  ForwardCase window_gqa = batched_case(1, 8, 1, 300, 300, 96);
  window_gqa.problem.window_left = 64;
  window_gqa.problem.window_right = 0;
  window_gqa.problem.softcap = 20.0;
  check_case<96, 128, 128, true, true>(window_gqa, kWithSoftcap);
}

TEST_CASE("TMA forward on the emulator: overlap and pingpong over ragged and masked blocks") {
  for (std::int64_t length : {1, 17, 63, 129, 200}) {
    check_case<64, 64, 64, true>(batched_case(1, 2, 2, length, length, 64, DType::f16), kWithF16);
    check_case<128, 128, 64, true, true>(batched_case(1, 1, 1, length, length, 128));
  }
  for (auto [seqlen_q, seqlen_k] : {std::pair{100, 300}, std::pair{300, 100}}) {
    ForwardCase c = batched_case(1, 2, 2, seqlen_q, seqlen_k, 64);
    c.problem.causal = true;  // blocks of rows with no visible key, and rows that see one
    check_case<64, 128, 64, true, true>(c);
    check_case<64, 192, 128, true>(c);
  }
  ForwardCase window = batched_case(1, 1, 1, 200, 200, 64);
  window.problem.window_left = 40;
  window.problem.window_right = 10;
  check_case<64, 128, 64, true, true>(window);
}

TEST_CASE("TMA forward on the emulator: P through shared memory (SS), every schedule") {
  ForwardCase causal = batched_case(1, 2, 1, 300, 250, 64);
  causal.problem.causal = true;
  check_case<64, 192, 128, true, false, true>(causal);
  check_case<64, 64, 64, false, false, true>(batched_case(1, 1, 1, 129, 129, 64, DType::f16),
                                             kWithF16);
  check_case<96, 128, 128, true, true, true>(batched_case(2, 2, 2, 200, 170, 96));
  ForwardCase window = batched_case(1, 1, 1, 17, 300, 128);
  window.problem.window_left = 50;
  window.problem.window_right = 20;
  check_case<128, 128, 64, true, true, true>(window);
}

TEST_CASE("TMA forward on the emulator: three stages a ring, every schedule") {
  ForwardCase causal = batched_case(1, 2, 1, 300, 250, 64);
  causal.problem.causal = true;
  check_case<64, 128, 64, true, true, false, 3>(causal);
  check_case<64, 192, 64, true, false, false, 3>(causal);
  check_case<128, 128, 128, true, true, false, 3>(batched_case(1, 1, 1, 200, 333, 128));
  check_case<64, 128, 128, true, true, true, 3>(batched_case(1, 1, 1, 150, 333, 64, DType::f16),
                                                kWithF16);
  ForwardCase window = batched_case(1, 4, 2, 129, 400, 96, DType::f16);
  window.problem.window_left = 70;
  window.problem.window_right = 5;
  check_case<96, 128, 80, true, true, false, 3>(window, kWithF16);
}

// Persistent: 3 CTAs walk every tile (the rings and Q's barriers carry on from tile to tile),
// among them tiles with no key at all (causal, seqlen_q above seqlen_k: O = 0, LSE = −inf),
// tiles whose second warpgroup has no row, and tiles of other heads and batches.
TEST_CASE("TMA forward on the emulator: persistent CTAs walk the tiles, every schedule") {
  constexpr bool kOverlap = true, kPingpong = true, kPShared = true, kPersistent = true;
  for (auto [seqlen_q, seqlen_k] : {std::pair{300, 100}, std::pair{100, 300}, std::pair{65, 65}}) {
    ForwardCase c = batched_case(2, 2, 1, seqlen_q, seqlen_k, 64);
    c.problem.causal = true;
    check_case<64, 128, 64, kOverlap, kPingpong, false, 2, kPersistent>(c);
    check_case<64, 64, 128, kOverlap, false, false, 2, kPersistent>(c);
  }
  check_case<128, 128, 128, kOverlap, kPingpong, false, 2, kPersistent>(
      batched_case(1, 4, 2, 200, 333, 128));
  check_case<128, 128, 128, kOverlap, kPingpong, false, 3, kPersistent>(
      batched_case(2, 2, 2, 129, 129, 128, DType::f16), kWithF16);
  check_case<64, 128, 128, kOverlap, kPingpong, kPShared, 2, kPersistent>(
      batched_case(1, 3, 3, 150, 260, 64));
  check_case<64, 192, 128, kOverlap, false, false, 2, kPersistent>(
      batched_case(1, 2, 2, 400, 200, 64));
  ForwardCase bhsd = batched_case(2, 3, 1, 77, 140, 256, DType::f16);
  bhsd.layout = reference::Layout::bhsd;
  check_case<256, 128, 64, kOverlap, false, false, 2, kPersistent>(bhsd, kWithF16);
  ForwardCase window = batched_case(1, 4, 2, 300, 300, 96);
  window.problem.window_left = 64;
  window.problem.window_right = 0;
  window.problem.softcap = 20.0;
  check_case<96, 128, 128, kOverlap, kPingpong, false, 2, kPersistent>(window, kWithSoftcap);
  check_case<192, 128, 64, kOverlap, false, false, 2, kPersistent>(
      batched_case(1, 2, 1, 70, 190, 192));
  for (const std::uint64_t seed : {7u, 8u}) {  // copies landing early, try_wait failing
    CAPTURE(seed);
    ForwardCase causal = batched_case(1, 3, 1, 260, 200, 64);
    causal.problem.causal = true;
    const em::Report r =
        check_case<64, 128, 64, kOverlap, kPingpong, false, 2, kPersistent>(causal, {}, seed);
    CHECK(r.schedule.early_landings > 0);
    CHECK(r.schedule.failed_try_waits > 0);
  }
}

// A persistent masked launch takes its tiles after the first from the counter: one that says
// every tile is taken leaves each CTA its first tile only (the rest of O keeps its poison), and
// the last take sets it back to zero. (Striding statically, the kernel would write every row.)
TEST_CASE("TMA forward on the emulator: persistent masked CTAs take their tiles from a counter") {
  constexpr bool kOverlap = true, kPingpong = true, kPersistent = true;
  ForwardCase causal = batched_case(1, 3, 1, 260, 200, 64);  // 3 query blocks of 3 heads
  causal.problem.causal = true;
  const int tiles = 3 * 3, ctas = tma_forward_ctas(tiles, kTestCtas);
  for (const int taken : {0, tiles - ctas}) {
    CAPTURE(taken);
    DirectForwardBuffers buffers = direct_forward_buffers(causal);
    buffers.tile_counter = {taken};
    launch_case<64, 128, 64, kOverlap, kPingpong, false, 2, kPersistent>(causal, buffers);
    CHECK(buffers.tile_counter[0] == 0);
    // The O elements the taken tiles write: their query blocks' rows of their heads.
    std::ptrdiff_t written = std::ssize(buffers.o);
    if (taken > 0) {
      written = 0;
      const int section = tma_forward_section(200, 3, 3, 2 * 64, 2);
      for (int tile = 0; tile < ctas; ++tile) {
        const int query_block = tma_forward_tile_slot(tile, 3, 3, section).query_block;
        written += std::min(128, 260 - query_block * 128) * 64;
      }
    }
    CHECK(std::count(buffers.o.begin(), buffers.o.end(), case_inputs::kPoison) ==
          std::ssize(buffers.o) - written);
  }
}

// FlashAttention-3's 2-CTA clusters: the two CTAs of a cluster take consecutive query blocks
// and each loads half of every K and V block into both, so the launch reads K and V from global
// memory half as often, with the same results. An odd number of query blocks leaves a CTA with
// no row, which walks the keys with its peer and writes nothing.
TEST_CASE("TMA forward on the emulator: 2-CTA clusters share K and V") {
  ForwardCase gqa = batched_case(2, 4, 2, 300, 333, 128);  // 3 query blocks: a CTA idle
  gqa.problem.softcap = 30.0f;
  ForwardCase bhsd = batched_case(1, 2, 1, 256, 200, 128, DType::f16);  // 2 query blocks
  bhsd.layout = reference::Layout::bhsd;
  for (const ForwardCase* c : {&gqa, &bhsd}) {
    const em::Report alone =
        check_case<128, 128, 176, true, true>(*c, kWithBoth);  // hd 128's default tile
    const em::Report paired =
        check_case<128, 128, 176, true, true, false, 2, false, 2>(*c, kWithBoth);
    const Attention a = c->attention();
    const auto query_blocks = std::uint64_t((a.seqlen_q + 127) / 128);
    const std::uint64_t clusters = (query_blocks + 1) / 2,
                        heads = std::uint64_t(a.batch * a.heads_q);
    CHECK(alone.work.ctas == query_blocks * heads);
    CHECK(paired.work.ctas == 2 * clusters * heads);
    // Alone, each CTA reads Q's block and all of K and V of its head; in clusters, each cluster
    // reads K and V once between its two CTAs.
    const std::uint64_t q_bytes = heads * std::uint64_t(a.seqlen_q) * 128 * 2;
    const std::uint64_t kv_alone = alone.work.global_bytes_read - q_bytes;
    CHECK(kv_alone > 0);
    CHECK((paired.work.global_bytes_read - q_bytes) * query_blocks == kv_alone * clusters);
    MESSAGE(c->name() << ": global bytes read alone " << alone.work.global_bytes_read
                      << ", in clusters " << paired.work.global_bytes_read);
  }
  // Head dim 256 (Bc 80: shares of 40 rows), three stages, the plain and the overlapped loops.
  check_case<256, 128, 80, true, false, false, 2, false, 2>(batched_case(1, 3, 3, 130, 170, 256));
  check_case<128, 128, 128, true, true, false, 3, false, 2>(batched_case(1, 2, 1, 250, 700, 128));
  check_case<192, 64, 64, false, false, false, 2, false, 2>(batched_case(1, 1, 1, 64, 129, 192));
}

// kv_loads_ahead (WorkCounters): with K and V on rings of their own, a K slot is free once
// S = Q Kᵀ has read it, so the producer's next loads are under way before the consumers
// reach them. (With one ring for both, freed only after P V, it was 0:
// bench/results/2026-11-26-tma-forward-pipeline.md.)
TEST_CASE("TMA forward on the emulator: the loads run ahead of the math") {
  // In the emulator's own order (a thread runs until it blocks) the producer gets as far ahead
  // as the barriers let it, which is what the count is about; explored orders hold threads back
  // at random (try_wait failing), so they are off here.
  const ScopedEnv in_order("FLASHJIT_EMULATOR_EXPLORE", nullptr);
  const ForwardCase c = batched_case(1, 1, 1, 128, 900, 128);  // one CTA, 8 to 15 key blocks
  const em::Report pingpong2 = check_case<128, 128, 128, true, true>(c);
  const em::Report pingpong3 = check_case<128, 128, 128, true, true, false, 3>(c);
  const em::Report defaults = check_case<128, 128, 176, true, true>(c);  // hdim 128's default
  const em::Report plain = check_case<128, 128, 64>(c);
  // Persistent over 4 tiles on 3 CTAs: a CTA's second tile's first K is loaded with its first
  // tile's last blocks, so the count holds across the tile boundary too.
  const em::Report persistent =
      check_case<128, 128, 128, true, true, false, 2, true>(batched_case(1, 4, 1, 128, 900, 128));
  MESSAGE("kv_loads_ahead: pingpong s2 " << pingpong2.work.kv_loads_ahead << ", s3 "
                                         << pingpong3.work.kv_loads_ahead << ", default "
                                         << defaults.work.kv_loads_ahead << ", plain "
                                         << plain.work.kv_loads_ahead);
  CHECK(pingpong2.work.kv_loads_ahead >= 1);
  CHECK(pingpong3.work.kv_loads_ahead >= 1);  // 2 in the middle; the next-to-last block has 1
  CHECK(defaults.work.kv_loads_ahead >= 1);
  CHECK(plain.work.kv_loads_ahead >= 1);
  CHECK(persistent.work.kv_loads_ahead >= 1);
  CHECK(persistent.work.ctas == 3);
  // One key block: no load comes after the first, nothing to measure.
  CHECK(check_case<128, 128, 128, true, true>(batched_case(1, 1, 1, 64, 64, 128))
            .work.kv_loads_ahead == -1);
}

// q_loads_ahead (WorkCounters): a persistent CTA with two Q slots loads its next tile's Q with
// this tile's last blocks, so it is on its way before this tile's last S = Q Kᵀ; with one slot
// (no room for two) the next Q waits for this tile's O to leave the slot.
TEST_CASE("TMA forward on the emulator: the next tile's Q loads under this tile's last products") {
  // Two slots where a persistent CTA has the room: head dim 64's default and head dim 128's
  // masked one; not 128's unmasked tile (Bc 176), not 256, not one CTA a tile.
  CHECK(tma_forward_q_slots(64, 128, 128, 2, false, false, true) == 2);
  CHECK(tma_forward_q_slots(128, 128, 128, 2, false, false, true) == 2);
  CHECK(tma_forward_q_slots(128, 128, 176, 2, false, false, true) == 1);
  CHECK(tma_forward_q_slots(256, 128, 64, 2, false, false, true) == 1);
  CHECK(tma_forward_q_slots(64, 128, 128, 2, false, false, false) == 1);
  CHECK(tma_forward_shared_bytes(64, 128, 128, 2, false, false, 2) ==
        tma_forward_shared_bytes(64, 128, 128, 2) + 128 * 64 * 2 + 16);
  const ScopedEnv in_order("FLASHJIT_EMULATOR_EXPLORE", nullptr);  // (as kv_loads_ahead's)
  constexpr bool kOverlap = true, kPingpong = true, kPersistent = true;
  const ForwardCase c = batched_case(1, 4, 1, 128, 900, 128);  // 4 tiles on 3 CTAs
  const em::Report two = check_case<128, 128, 128, kOverlap, kPingpong, false, 2, kPersistent>(c);
  ForwardCase wide = batched_case(2, 3, 1, 77, 140, 256);  // 6 tiles on 3 CTAs
  const em::Report one = check_case<256, 128, 64, kOverlap, false, false, 2, kPersistent>(wide);
  MESSAGE("q_loads_ahead: two slots " << two.work.q_loads_ahead << ", one "
                                      << one.work.q_loads_ahead);
  CHECK(two.work.q_loads_ahead == 1);
  CHECK(one.work.q_loads_ahead == 0);
  // One tile a CTA: no next tile, nothing measured.
  CHECK(check_case<128, 128, 128, kOverlap, kPingpong>(c).work.q_loads_ahead == -1);
}

TEST_CASE("TMA forward on the emulator: copies landing early and try_wait failing change nothing") {
  ForwardCase causal = batched_case(1, 2, 1, 200, 170, 64);
  causal.problem.causal = true;
  for (const std::uint64_t seed : {5u, 6u}) {
    CAPTURE(seed);
    const em::Report overlapped = check_case<64, 128, 64, true, true>(causal, {}, seed);
    const em::Report plain =
        check_case<128, 64, 64>(batched_case(1, 1, 1, 129, 129, 128), {}, seed);
    const em::Report three = check_case<64, 128, 64, true, true, false, 3>(causal, {}, seed);
    for (const em::Report* report : {&overlapped, &plain, &three}) {
      CHECK(report->schedule.explored);
      CHECK(report->schedule.seed == seed);
      CHECK(report->schedule.early_landings > 0);
      CHECK(report->schedule.failed_try_waits > 0);
    }
  }
}

// A producer warpgroup beside two consumer warpgroups (384 threads) leaves ptxas 168 registers
// a thread: Br 128 fits with Bc 64, and Bc 128 with Br 64 (the runtime's defaults are checked
// by tests/ops/test_attention_compile.cpp).
TEST_CASE("TMA forward: NVRTC builds it for sm_90a, its PTX issues wgmma and TMA, no spills") {
  for (const std::string tiles : {"128, 64", "64, 128"}) {
    for (const std::string mask : {"none", "window"}) {
      CAPTURE(tiles);
      CAPTURE(mask);
      detail::KernelSpec spec;
      spec.op = "attention-forward";
      spec.header = "attention/hopper/tma_forward_kernel.cuh";
      spec.name_expression =
          "flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<"
          "flashjit::bfloat16_t, 128, " +
          tiles + ", flashjit::MaskKind::" + mask + ", false>>";
      spec.readable_name = "attention_forward.hdim128.bf16.tma." + mask;
      spec.arch = "sm_90a";
      const detail::CompiledKernel kernel =
          detail::compile_kernel(spec, detail::TemplateSet::embedded());
      CHECK(kernel.cubin.substr(1, 3) == "ELF");
      CHECK(kernel.resources.registers > 0);
      CHECK(kernel.resources.spill_bytes() == 0);
      CHECK(kernel.resources.stack_bytes == 0);
      const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
      CHECK(ptx.find(".target sm_90a") != std::string::npos);
      CHECK(ptx.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") !=
            std::string::npos);  // O += P V (N = head dim 128)
      CHECK(ptx.find("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier") !=
            std::string::npos);
      CHECK(ptx.find("mbarrier.try_wait.parity") != std::string::npos);
      CHECK(ptx.find("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group") !=
            std::string::npos);                          // O's store
      CHECK(ptx.find("ldmatrix") == std::string::npos);  // no product is fed by ldmatrix
      // Every load carries an L2 hint: K and V kept (evict_last: the head's next query tiles
      // read them), Q let go first (read once).
      std::size_t loads = 0, hinted = 0;
      for (const std::string& line : ptx_lines(ptx)) {
        if (line.find("cp.async.bulk.tensor.4d.shared::cluster.global") == std::string::npos) {
          continue;
        }
        ++loads;
        hinted += line.find(".L2::cache_hint") != std::string::npos ? 1 : 0;
      }
      CHECK(loads >= 3);
      CHECK(hinted == loads);
      CHECK(ptx.find("createpolicy.fractional.L2::evict_last.b64") != std::string::npos);
      CHECK(ptx.find("createpolicy.fractional.L2::evict_first.b64") != std::string::npos);
    }
  }
}

/// How many times `needle` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++count;
  }
  return count;
}

/// The overlapped TMA forward's kernel (bf16, Br 128, two stages) at a head dim and Bc, unmasked
/// or with the window mask.
detail::KernelSpec overlapped_spec(int head_dim, int block_n, bool window = false) {
  detail::KernelSpec spec;
  spec.op = "attention-forward";
  spec.header = "attention/hopper/tma_forward_kernel.cuh";
  spec.name_expression =
      "flashjit::attention_forward_tma_kernel<flashjit::TmaForwardTraits<flashjit::bfloat16_t, " +
      std::to_string(head_dim) + ", 128, " + std::to_string(block_n) +
      (window ? ", flashjit::MaskKind::window" : ", flashjit::MaskKind::none") +
      ", false, 2, true>>";  // two stages, overlapped
  spec.readable_name = "attention_forward.hdim" + std::to_string(head_dim) + ".tma.overlap";
  spec.arch = "sm_90a";
  return spec;
}

TEST_CASE("TMA forward: in 2-CTA clusters one thread a warpgroup and block releases a slot") {
  // Only wgmma reads a K or V slot, so one thread of a warpgroup frees it for the whole
  // warpgroup, one a destination block in a cluster (FlashAttention-3's consumer release): each
  // remote arrival is predicated on being that thread, where before every thread arrived (128
  // remote arrivals a warpgroup and slot). The emulator suites enforce the count (the rings
  // expect exactly these arrivals: more is an overflow finding, fewer a deadlock).
  detail::KernelSpec spec = overlapped_spec(128, 176);
  spec.name_expression =
      "flashjit::attention_forward_tma_cluster_kernel<flashjit::TmaForwardTraits<"
      "flashjit::bfloat16_t, 128, 128, 176, flashjit::MaskKind::none, false, 2, true, true, "
      "false, false, false, 2>>";  // FlashAttention-3's schedule, the head-dim-128 default's
  const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
  std::size_t remote = 0, predicated = 0;
  for (const std::string& line : ptx_lines(ptx)) {
    if (line.find("mbarrier.arrive.release.cluster.shared::cluster") == std::string::npos) continue;
    ++remote;
    predicated += line.find('@') != std::string::npos ? 1 : 0;
  }
  CHECK(remote >= 2);  // K's and V's releases
  CHECK(predicated == remote);
  using Traits = TmaForwardTraits<bfloat16_t, 128, 128, 176, MaskKind::none, false, 2, true, true,
                                  false, false, false, 2>;
  CHECK(ConsumerSlots<Traits>::kReleases == 2 * 2);  // two warpgroups, two blocks
}

TEST_CASE("TMA forward: the overlapped loop holds one copy of the softmax up to head dim 192") {
  // Each copy of the softmax exponentiates a thread's 16 · Bc / 32 scores (ex2.approx each),
  // and each fold's α adds 2. The rotated loop (attend_overlapped) folds the first block with
  // the others: one copy, the compile time of the head-dim-128 default cut by a sixth. Above
  // padded head dim 192 the first block is peeled (the rotated loop spills there): two copies.
  struct Case {
    int head_dim, block_n;
    bool rotated;
  };
  for (const Case c : {Case{128, 176, true}, Case{192, 96, true}, Case{256, 80, false}}) {
    CAPTURE(c.head_dim);
    const std::string ptx = detail::compile_ptx(overlapped_spec(c.head_dim, c.block_n),
                                                detail::TemplateSet::embedded());
    const std::size_t per_copy = 16 * c.block_n / 32;
    const std::size_t exponentials = count_of(ptx, "ex2.approx");
    CHECK(exponentials >= (c.rotated ? 1 : 2) * per_copy);
    CHECK(exponentials < (c.rotated ? 2 : 3) * per_copy);
  }
}

TEST_CASE("TMA forward: above head dim 128 O's rescale runs between S's issue and P V's") {
  // A thread's O is head_dim / 2 registers, each rescaled by one mul.f32. Above a padded head
  // dim of 128 they come after S = Q Kᵀ is issued and before O += P V (under the S product);
  // at 128 after the wait for P V, none between the two issues.
  struct Case {
    int head_dim, block_n;
    bool window, under_product;
  };
  for (const Case c : {Case{128, 176, false, false}, Case{192, 96, true, true},
                       Case{256, 80, false, true}, Case{256, 64, true, true}}) {
    CAPTURE(c.head_dim);
    CAPTURE(c.window);
    const std::string ptx = detail::compile_ptx(overlapped_spec(c.head_dim, c.block_n, c.window),
                                                detail::TemplateSet::embedded());
    const std::string s_product = "m64n" + std::to_string(c.block_n) + "k16";
    const std::string pv_product = "m64n" + std::to_string(c.head_dim) + "k16";
    std::size_t most = 0, between = 0;
    bool after_s = false;
    for (const std::string& line : ptx_lines(ptx)) {
      if (line.find(s_product) != std::string::npos) after_s = true, between = 0;
      if (after_s && line.find("mul.f32") != std::string::npos) ++between;
      if (after_s && line.find(pv_product) != std::string::npos) {
        most = std::max(most, between);
        after_s = false;
      }
    }
    if (c.under_product) {
      CHECK(most >= std::size_t(c.head_dim / 2));
    } else {
      CHECK(most < std::size_t(c.head_dim / 2));
    }
  }
}

}  // namespace flashjit::testing

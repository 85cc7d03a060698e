// Clusters on the emulator: ranks and the cluster barrier, a two-block ring that loads each tile
// once for both blocks with multicast TMA and frees slots through the peer's mbarriers (its
// data and work counters), and the rules of emulator/cluster.cpp each caught on a planted bug.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/cluster.cuh"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;
using flashjit::mbarrier_t;

// The ring: two slots of a 16 x 32 tile of 4-byte words, each block loading 8 of its rows
// for both blocks. Shared offsets: full barriers 0 and 8, empty barriers 16 and 24, slots.
constexpr int kRows = 16, kCols = 32, kHalfRows = kRows / 2, kTiles = 6, kClusterBlocks = 2;
constexpr std::uint32_t kTileBytes = kRows * kCols * 4, kHalfBytes = kTileBytes / 2;
constexpr int kSlot0 = 1024;
constexpr std::size_t kShared = kSlot0 + 2 * kTileBytes;
constexpr unsigned kThreads = 64;  // warp 0: the producer (its lane 0); warp 1: the consumers

enum class Bug {
  none,
  no_sync_after_init,   // a block multicasts before its peer's barrier init is ordered
  local_release_only,   // consumers free only their own block's slot
  no_sync_before_exit,  // a block exits while its peer still arrives on its barriers
  mask_past_cluster,    // ctaMask names rank 2 in a cluster of two
};

unsigned char* shared_at(std::uint32_t offset) {
  return flashjit::dynamic_shared<unsigned char>() + offset;
}
mbarrier_t* full(int slot) { return reinterpret_cast<mbarrier_t*>(shared_at(8 * slot)); }
mbarrier_t* empty(int slot) { return reinterpret_cast<mbarrier_t*>(shared_at(16 + 8 * slot)); }

// out[block][tile][column]: the column's sum over the tile's 16 rows, as the consumer saw it.
__global__ void multicast_ring(flashjit::tma_descriptor map, Bug bug, std::uint32_t* out) {
  const int t = static_cast<int>(threadIdx.x);
  const unsigned rank = flashjit::cluster_ctarank();
  const bool local_release = bug == Bug::local_release_only;
  if (t == 0) {
    for (int s = 0; s < 2; ++s) {
      flashjit::mbarrier_init(full(s), 1);
      flashjit::mbarrier_init(empty(s), local_release ? 1 : kClusterBlocks);
    }
    flashjit::mbarrier_init_fence();
  }
  __syncthreads();
  if (bug != Bug::no_sync_after_init) flashjit::cluster_sync();
  if (t == 0) {  // the producer
    const unsigned short mask = bug == Bug::mask_past_cluster ? 0b101 : 0b11;
    for (int tile = 0; tile < kTiles; ++tile) {
      const int slot = tile % 2;
      flashjit::mbarrier_wait_parity(empty(slot), ((tile / 2) & 1) ^ 1);
      flashjit::mbarrier_arrive_expect_tx(full(slot), kTileBytes);
      const int coords[2] = {0, tile * kRows + static_cast<int>(rank) * kHalfRows};
      flashjit::tma_load_multicast(shared_at(kSlot0 + slot * kTileBytes + rank * kHalfBytes), map,
                                   coords, full(slot), mask);
    }
  } else if (t >= 32) {  // the consumers: lane j sums column j
    const int lane = t - 32;
    for (int tile = 0; tile < kTiles; ++tile) {
      const int slot = tile % 2;
      flashjit::mbarrier_wait_parity(full(slot), (tile / 2) & 1);
      const auto* words =
          reinterpret_cast<const std::uint32_t*>(shared_at(kSlot0 + slot * kTileBytes));
      std::uint32_t sum = 0;
      for (int row = 0; row < kRows; ++row) sum += flashjit::load_shared(words, row * kCols + lane);
      flashjit::store_global_raw(out + (blockIdx.x * kTiles + tile) * kCols + lane, sum);
      __syncwarp();
      if (lane == 0) {
        for (unsigned peer = 0; peer < kClusterBlocks; ++peer) {
          if (!local_release || peer == rank) flashjit::mbarrier_arrive_cluster(empty(slot), peer);
        }
      }
    }
  }
  if (bug != Bug::no_sync_before_exit) flashjit::cluster_sync();
}

struct Ring {
  std::vector<std::uint32_t> tensor = std::vector<std::uint32_t>(kTiles * kRows * kCols);
  std::vector<std::uint32_t> out;
  em::TensorMap map;
  em::Report report;
};

Ring run_ring(Bug bug, unsigned blocks = 4, std::optional<std::uint64_t> seed = std::nullopt) {
  Ring ring;
  for (std::size_t i = 0; i < ring.tensor.size(); ++i) {
    ring.tensor[i] = static_cast<std::uint32_t>(i * 2654435761u >> 7);
  }
  ring.out.assign(blocks * kTiles * kCols, 0xdeadbeef);
  ring.map.element_bytes = 4;
  ring.map.rank = 2;
  ring.map.global_address = ring.tensor.data();
  ring.map.dims = {kCols, kTiles * kRows, 1, 1, 1};
  ring.map.strides = {0, kCols * 4, 0, 0, 0};
  ring.map.box = {kCols, kHalfRows, 1, 1, 1};
  em::LaunchConfig config{
      .kernel_name = "multicast_ring",
      .grid = {blocks},
      .block = {kThreads},
      .shared_bytes = kShared,
      .buffers = {em::buffer_of(ring.tensor.data(), ring.tensor.size(), "tensor"),
                  em::buffer_of(ring.out.data(), ring.out.size(), "out")},
      .explore_seed = seed,
      .cluster = {kClusterBlocks}};
  ring.report =
      em::launch(multicast_ring, config, flashjit::tma_descriptor{&ring.map}, bug, ring.out.data());
  return ring;
}

std::uint32_t column_sum(const Ring& ring, int tile, int column) {
  std::uint32_t sum = 0;
  for (int row = 0; row < kRows; ++row) sum += ring.tensor[(tile * kRows + row) * kCols + column];
  return sum;
}

bool mentions(const em::Finding& finding, const std::string& text) {
  return finding.message.find(text) != std::string::npos;
}

// Each thread writes its block's rank and the cluster's size.
__global__ void record_rank(unsigned* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (threadIdx.x == 0) {
    out[2 * block] = flashjit::cluster_ctarank();
    out[2 * block + 1] = em::cluster_nctarank();
  }
}

// Warp 1 of the last block exits first; everyone else meets at the cluster barrier, twice.
__global__ void barrier_with_exits(unsigned* out) {
  const unsigned rank = flashjit::cluster_ctarank();
  if (rank == em::cluster_nctarank() - 1 && threadIdx.x >= 32) return;
  flashjit::cluster_sync();
  flashjit::cluster_sync();
  if (threadIdx.x == 0) out[blockIdx.x] = 1;
}

// Rank 0 waits at the cluster barrier for a block whose threads never arrive: they wait on
// an mbarrier nobody completes.
__global__ void cluster_barrier_stuck() {
  if (flashjit::cluster_ctarank() == 1) {
    if (threadIdx.x == 0) flashjit::mbarrier_init(full(0), 1);
    __syncthreads();
    flashjit::mbarrier_wait_parity(full(0), 0);
  }
  flashjit::cluster_sync();
}

}  // namespace

TEST_CASE("cluster ranks run x fastest within the cluster's shape") {
  std::vector<unsigned> out(2 * 8, 99);
  em::LaunchConfig config{.kernel_name = "record_rank",
                          .grid = {2, 4},
                          .block = {32},
                          .buffers = {em::buffer_of(out.data(), out.size(), "out")},
                          .cluster = {2, 2}};
  const em::Report report = em::launch(record_rank, config, out.data());
  INFO(report);
  REQUIRE(report.clean());
  for (unsigned y = 0; y < 4; ++y) {
    for (unsigned x = 0; x < 2; ++x) {
      const unsigned block = x + 2 * y;
      CHECK(out[2 * block] == x + 2 * (y % 2));
      CHECK(out[2 * block + 1] == 4);
    }
  }
  CHECK(report.work.ctas == 8);
}

TEST_CASE("a cluster shape CUDA refuses is refused before anything runs") {
  std::vector<unsigned> out(16, 0);
  em::LaunchConfig config{.kernel_name = "record_rank",
                          .grid = {3},
                          .block = {32},
                          .buffers = {em::buffer_of(out.data(), out.size(), "out")},
                          .cluster = {2}};
  CHECK_THROWS_WITH_AS(em::launch(record_rank, config, out.data()),
                       doctest::Contains("must divide the grid"), std::invalid_argument);
  config.grid = {16};
  config.cluster = {16};
  CHECK_THROWS_WITH_AS(em::launch(record_rank, config, out.data()),
                       doctest::Contains("1 to 8 blocks"), std::invalid_argument);
  CHECK(out == std::vector<unsigned>(16, 0));
}

TEST_CASE("the cluster barrier waits for every live thread, and exited threads do not hold it up") {
  std::vector<unsigned> out(4, 0);
  em::LaunchConfig config{.kernel_name = "barrier_with_exits",
                          .grid = {4},
                          .block = {64},
                          .buffers = {em::buffer_of(out.data(), out.size(), "out")},
                          .cluster = {2}};
  const em::Report report = em::launch(barrier_with_exits, config, out.data());
  INFO(report);
  CHECK(report.clean());
  CHECK(out == std::vector<unsigned>(4, 1));
}

TEST_CASE("a cluster barrier some block can never reach is a deadlock naming it") {
  em::LaunchConfig config{.kernel_name = "cluster_barrier_stuck",
                          .grid = {2},
                          .block = {32},
                          .shared_bytes = 64,
                          .buffers = {},
                          .cluster = {2}};
  const em::Report report = em::launch(cluster_barrier_stuck, config);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 1);
  CHECK(mentions(*report.first(em::FindingKind::deadlock), "barrier.cluster.wait"));
  CHECK(mentions(*report.first(em::FindingKind::deadlock), "32 of the cluster's 64"));
}

TEST_CASE("multicast TMA ring: each tile read once per cluster, right in both blocks") {
  for (const std::optional<std::uint64_t> seed : {std::optional<std::uint64_t>{}, {1}, {7}}) {
    CAPTURE(seed.value_or(0));
    const Ring ring = run_ring(Bug::none, 4, seed);
    INFO(ring.report);
    REQUIRE(ring.report.clean());
    for (unsigned block = 0; block < 4; ++block) {
      for (int tile = 0; tile < kTiles; ++tile) {
        for (int column = 0; column < kCols; ++column) {
          REQUIRE(ring.out[(block * kTiles + tile) * kCols + column] ==
                  column_sum(ring, tile, column));
        }
      }
    }
    // Two clusters each read every tile once; every block receives every tile.
    CHECK(ring.report.work.global_bytes_read == 2 * kTiles * kTileBytes);
    CHECK(ring.report.work.shared_bytes_written == 4 * kTiles * kTileBytes);
    CHECK(ring.report.work.ctas == 4);
    if (seed) CHECK(ring.report.schedule.early_landings > 0);
  }
}

TEST_CASE("planted: a multicast before the peer's barrier init is ordered by a cluster barrier") {
  const Ring ring = run_ring(Bug::no_sync_after_init);
  INFO(ring.report);
  REQUIRE(ring.report.count(em::FindingKind::mbarrier_init_unordered) >= 1);
  const em::Finding& finding = *ring.report.first(em::FindingKind::mbarrier_init_unordered);
  CHECK(mentions(finding, ".multicast::cluster"));
  CHECK(mentions(finding, "of CTA rank 1"));
}

TEST_CASE("planted: a block exits while its peer still arrives on its mbarrier") {
  const Ring ring = run_ring(Bug::no_sync_before_exit);
  INFO(ring.report);
  REQUIRE(ring.report.count(em::FindingKind::cluster_peer_exited) >= 1);
  const em::Finding& finding = *ring.report.first(em::FindingKind::cluster_peer_exited);
  CHECK(mentions(finding, "mbarrier.arrive.shared::cluster"));
  CHECK(mentions(finding, "have all exited"));
}

// The peer's multicast refills a slot for the next round before this block's consumers have
// waited for (let alone read) this round's tile. The default order happens to let each
// consumer finish first; explored orders do not. Once the bytes have landed nothing is in
// flight: only whose phase they belong to tells.
TEST_CASE(
    "planted: consumers that free only their own block's slot: exploring finds the peer's load "
    "over a slot its readers have not had") {
  int found_at = -1;
  for (int seed = 0; seed < 8 && found_at < 0; ++seed) {
    const Ring ring = run_ring(Bug::local_release_only, 4, static_cast<std::uint64_t>(seed));
    if (ring.report.count(em::FindingKind::tma_load_unobserved) == 0) continue;
    found_at = seed;
    const em::Finding& finding = *ring.report.first(em::FindingKind::tma_load_unobserved);
    CHECK((mentions(finding, "no wait has seen complete") ||
           mentions(finding, "an earlier load still in flight")));
  }
  CHECK(found_at >= 0);
}

TEST_CASE("planted: a ctaMask naming a rank outside the cluster") {
  const Ring ring = run_ring(Bug::mask_past_cluster);
  INFO(ring.report);
  REQUIRE(ring.report.count(em::FindingKind::invalid_operand) >= 1);
  CHECK(mentions(*ring.report.first(em::FindingKind::invalid_operand), "ctaMask 5"));
}

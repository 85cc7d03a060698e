// Planted bugs: each small kernel has one classic mistake, and the emulator must report it with
// its kind, the offending thread and the address or shared offset. A correct twin of the race
// kernel shows the checks stay quiet when the code is right.
#include <doctest/doctest.h>

#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kThreads = 64;  // two warps

__global__ void read_one_past_the_end(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  flashjit::store_global(out, t, flashjit::load_global(in, t + 1));  // in[kThreads]: bug
}

__global__ void write_one_past_shared(const float*, float*) {
  float* shared = flashjit::dynamic_shared<float>();                        // (kThreads,)
  flashjit::store_shared(shared, static_cast<int>(threadIdx.x) + 1, 1.0f);  // bug at the end
}

/// Warp 0 writes shared, warp 1 reads it; `Synced` puts the barrier between.
template <bool Synced>
__global__ void exchange_between_warps(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (32,)
  if (t < 32) flashjit::store_shared(shared, t, flashjit::load_global(in, t));
  if constexpr (Synced) __syncthreads();
  if (t >= 32) flashjit::store_global(out, t, flashjit::load_shared(shared, t - 32));
}

__global__ void half_block_returns_early(const float*, float*) {
  if (threadIdx.x >= 32) return;  // bug: the other half then waits at the barrier alone
  __syncthreads();
}

__global__ void shuffle_in_half_a_warp(const float*, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t % 32 < 16) flashjit::store_global(out, t, __shfl_xor_sync(0xffffffffu, 1.0f, 1));  // bug
}

struct Buffers {
  std::vector<float> in = std::vector<float>(kThreads + 8, 1.0f);  // 8 spare, not registered
  std::vector<float> out = std::vector<float>(kThreads, 0.0f);
};

em::Report run(void (*kernel)(const float*, float*), Buffers& buffers) {
  em::LaunchConfig config{.kernel_name = "planted",
                          .grid = {2},
                          .block = {kThreads},
                          .shared_bytes = kThreads * sizeof(float),
                          .buffers = {em::buffer_of(buffers.in.data(), kThreads, "in"),
                                      em::buffer_of(buffers.out.data(), kThreads, "out")}};
  return em::launch(kernel, config, buffers.in.data(), buffers.out.data());
}

}  // namespace

TEST_CASE("an out-of-bounds global read is reported with thread, address and buffer") {
  Buffers buffers;
  const em::Report report = run(read_one_past_the_end, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::global_out_of_bounds) == 2);  // once per block
  const em::Finding& finding = *report.first(em::FindingKind::global_out_of_bounds);
  CHECK(finding.kernel == "planted");
  CHECK(finding.thread.x == kThreads - 1);
  CHECK(finding.block.x == 0);
  CHECK_FALSE(finding.write);
  CHECK(finding.address == reinterpret_cast<std::uintptr_t>(buffers.in.data() + kThreads));
  CHECK(finding.buffer == "in");
  CHECK(finding.offset == kThreads * 4);
  CHECK(report.findings.size() == 2);
}

TEST_CASE("an out-of-bounds shared write is reported with its shared offset") {
  Buffers buffers;
  const em::Report report = run(write_one_past_shared, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_out_of_bounds) == 2);
  const em::Finding& finding = *report.first(em::FindingKind::shared_out_of_bounds);
  CHECK(finding.thread.x == kThreads - 1);
  CHECK(finding.write);
  CHECK(finding.offset == kThreads * 4);
  CHECK(report.findings.size() == 2);
}

TEST_CASE("a missing __syncthreads between two warps is reported as a race") {
  Buffers buffers;
  const em::Report report = run(exchange_between_warps<false>, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_race) > 0);
  const em::Finding& finding = *report.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 32);     // the first reader, in warp 1
  CHECK(finding.other_thread == 0);  // the writer, in warp 0
  CHECK(finding.offset == 0);
  CHECK_FALSE(finding.write);
  CHECK(report.findings.size() == report.count(em::FindingKind::shared_race));

  const em::Report synced = run(exchange_between_warps<true>, buffers);
  CHECK_MESSAGE(synced.clean(), synced);
  CHECK(buffers.out[40] == 1.0f);
}

TEST_CASE("a __syncthreads that half the block skips is reported as divergent") {
  Buffers buffers;
  const em::Report report = run(half_block_returns_early, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::divergent_barrier) == 2);
  const em::Finding& finding = *report.first(em::FindingKind::divergent_barrier);
  CHECK(finding.thread.x == 0);       // a waiting thread
  CHECK(finding.other_thread == 32);  // an exited one
}

TEST_CASE("a shuffle that half the warp never reaches is reported as a deadlock") {
  Buffers buffers;
  const em::Report report = run(shuffle_in_half_a_warp, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 2);
  CHECK(report.first(em::FindingKind::deadlock)->thread.x == 0);
}

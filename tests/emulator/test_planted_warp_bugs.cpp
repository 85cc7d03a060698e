// Planted bugs in the warp-level and asynchronous instructions: each small kernel has one
// classic mistake, and the emulator must report it with its kind, the offending thread and the
// address or shared offset. Correct twins show the checks stay quiet when the code is right.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kThreads = 64;  // two warps

__global__ void cp_async_past_the_end(const float* in, float*) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();     // (kThreads, 4)
  em::cp_async(shared + 4 * t, in + 4 * t + 4, 16, 16);  // bug: the last thread reads in[256..259]
  em::cp_async_commit();
  em::cp_async_wait(0);
}

__global__ void cp_async_past_shared(const float* in, float*) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();     // (kThreads, 4)
  em::cp_async(shared + 4 * t + 4, in + 4 * t, 16, 16);  // bug: the last copy ends past shared
  em::cp_async_commit();
  em::cp_async_wait(0);
}

/// Each lane writes its slot, then reads its neighbour's. `Order` is what stands between.
enum class Order { none, syncwarp, shuffle };
template <Order Between>
__global__ void exchange_within_warp(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (kThreads,)
  flashjit::store_shared(shared, t, flashjit::load_global(in, t));
  if constexpr (Between == Order::syncwarp) __syncwarp();
  if constexpr (Between == Order::shuffle) (void)__shfl_xor_sync(0xffffffffu, 0.0f, 1);
  const int neighbour = t / 32 * 32 + (t + 1) % 32;
  flashjit::store_global(out, t, flashjit::load_shared(shared, neighbour));
}

/// Lane 0 hands a value to lane 1 through shared memory; `Synced` puts a __syncwarp of just
/// those two lanes between.
template <bool Synced>
__global__ void pair_handoff(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x), lane = t % 32;
  float* shared = flashjit::dynamic_shared<float>();  // (kThreads,)
  if (lane == 0) flashjit::store_shared(shared, t, flashjit::load_global(in, t));
  if (Synced && lane < 2) __syncwarp(0x3u);
  if (lane == 1) flashjit::store_global(out, t, flashjit::load_shared(shared, t - 1));
}

__global__ void read_before_wait(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (kThreads, 4)
  em::cp_async(shared + 4 * t, in + 4 * t, 16, 16);
  em::cp_async_commit();
  flashjit::store_global(out, t, flashjit::load_shared(shared, 4 * t));  // bug: before the wait
  em::cp_async_wait(0);
}

__global__ void no_barrier_after_wait(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (kThreads, 4)
  em::cp_async(shared + 4 * t, in + 4 * t, 16, 16);
  em::cp_async_commit();
  em::cp_async_wait(0);  // bug: the wait covers this thread's copies only; no __syncthreads
  if (t >= 32) flashjit::store_global(out, t, flashjit::load_shared(shared, 4 * (t - 32)));
}

__global__ void misaligned_ldmatrix(const float*, float* out) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const auto* shared = flashjit::dynamic_shared<std::uint16_t>();
  std::uint32_t regs[1];
  em::ldmatrix(1, false, regs, shared + 4 + 8 * lane);  // bug: rows start 8 bytes off
  flashjit::store_global(out, static_cast<int>(threadIdx.x), float(regs[0]));
}

__global__ void mma_in_half_a_warp(const float*, float*) {
  const std::uint32_t a[4] = {}, b[2] = {};
  float acc[4] = {};
  if (threadIdx.x % 32 < 16) em::mma_m16n8k16(em::MmaInput::f16, acc, a, b, acc);  // bug
}

__global__ void mma_meets_syncwarp(const float*, float*) {
  const std::uint32_t a[4] = {}, b[2] = {};
  float acc[4] = {};
  if (threadIdx.x % 32 < 16) {
    em::mma_m16n8k16(em::MmaInput::bf16, acc, a, b, acc);  // bug: half the warp
  } else {
    __syncwarp();
  }
}

__global__ void located_write_past_shared(const float*, float*) {
  float* shared = flashjit::dynamic_shared<float>();
  em::set_source_location();
  flashjit::store_shared(shared, 4 * (static_cast<int>(threadIdx.x) + 1), 1.0f);  // bug at the end
}

struct Buffers {
  std::vector<float> in = std::vector<float>(4 * kThreads + 8, 1.0f);  // 8 spare, not registered
  std::vector<float> out = std::vector<float>(kThreads, 0.0f);
};

em::Report run(void (*kernel)(const float*, float*), Buffers& buffers) {
  em::LaunchConfig config{.kernel_name = "planted",
                          .grid = {2},
                          .block = {kThreads},
                          .shared_bytes = 4 * kThreads * sizeof(float),
                          .buffers = {em::buffer_of(buffers.in.data(), 4 * kThreads, "in"),
                                      em::buffer_of(buffers.out.data(), kThreads, "out")}};
  return em::launch(kernel, config, buffers.in.data(), buffers.out.data());
}

bool mentions(const em::Finding& finding, const char* text) {
  return finding.message.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("a cp.async reading past a global buffer is reported at issue") {
  Buffers buffers;
  const em::Report report = run(cp_async_past_the_end, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::global_out_of_bounds) == 2);  // once per block
  const em::Finding& finding = *report.first(em::FindingKind::global_out_of_bounds);
  CHECK(finding.kernel == "planted");
  CHECK(finding.thread.x == kThreads - 1);
  CHECK_FALSE(finding.write);
  CHECK(finding.address == reinterpret_cast<std::uintptr_t>(buffers.in.data() + 4 * kThreads));
  CHECK(finding.buffer == "in");
  CHECK(finding.offset == 4 * kThreads * 4);
  CHECK(mentions(finding, "cp.async"));
  CHECK(report.findings.size() == 2);
}

TEST_CASE("a cp.async writing past shared memory is reported with its shared offset") {
  Buffers buffers;
  const em::Report report = run(cp_async_past_shared, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_out_of_bounds) == 2);
  const em::Finding& finding = *report.first(em::FindingKind::shared_out_of_bounds);
  CHECK(finding.thread.x == kThreads - 1);
  CHECK(finding.write);
  CHECK(finding.offset == 4 * kThreads * 4);
  CHECK(report.findings.size() == 2);
}

TEST_CASE("two lanes of one warp touching a shared byte with no __syncwarp race") {
  Buffers buffers;
  const em::Report report = run(exchange_within_warp<Order::none>, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_race) > 0);
  const em::Finding& finding = *report.first(em::FindingKind::shared_race);
  // Lanes run in order, so lane 0 reads lane 1's slot before lane 1 writes it: lane 1's write
  // is the second access, after a read by lane 0 of its own warp.
  CHECK(finding.thread.x == 1);
  CHECK(finding.other_thread == 0);
  CHECK(finding.write);
  CHECK(finding.offset == 4);
  CHECK(mentions(finding, "same warp"));
  CHECK(report.findings.size() == report.count(em::FindingKind::shared_race));

  for (const Order between : {Order::syncwarp, Order::shuffle}) {
    CAPTURE(int(between));
    const em::Report synced = run(between == Order::syncwarp ? exchange_within_warp<Order::syncwarp>
                                                             : exchange_within_warp<Order::shuffle>,
                                  buffers);
    CHECK_MESSAGE(synced.clean(), synced);
    CHECK(buffers.out[31] == 1.0f);
  }
}

TEST_CASE("a __syncwarp of some lanes orders those lanes' shared accesses") {
  Buffers buffers;
  const em::Report report = run(pair_handoff<false>, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_race) == 4);  // each warp of each block
  const em::Finding& finding = *report.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 1);
  CHECK(finding.other_thread == 0);
  CHECK_FALSE(finding.write);

  const em::Report synced = run(pair_handoff<true>, buffers);
  CHECK_MESSAGE(synced.clean(), synced);
  CHECK(buffers.out[33] == 1.0f);
}

TEST_CASE("reading cp.async data before waiting is reported and sees stale data") {
  Buffers buffers;
  const em::Report report = run(read_before_wait, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::async_copy_pending) == report.findings.size());
  CHECK(report.findings.size() + report.suppressed == 2 * kThreads);  // every thread, each block
  const em::Finding& finding = report.findings[1];
  CHECK(finding.thread.x == 1);
  CHECK(finding.other_thread == 1);  // its own copy
  CHECK(finding.offset == 16);
  CHECK_FALSE(finding.write);
  CHECK(std::isnan(buffers.out[1]));  // the 0xff fill, not the copied 1.0f
}

TEST_CASE("reading another thread's cp.async data with no __syncthreads after the wait races") {
  Buffers buffers;
  const em::Report report = run(no_barrier_after_wait, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_race) > 0);
  const em::Finding& finding = *report.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 32);     // the first reader of the other warp's slot...
  CHECK(finding.other_thread == 0);  // ...of thread 0's copy, landed by its wait
  CHECK_FALSE(finding.write);
}

TEST_CASE("a misaligned ldmatrix row address is reported") {
  Buffers buffers;
  const em::Report report = run(misaligned_ldmatrix, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::misaligned_access) == 2 * 2 * 8);  // 8 rows, 2 warps
  const em::Finding& finding = *report.first(em::FindingKind::misaligned_access);
  CHECK(finding.thread.x == 0);
  CHECK(finding.offset == 8);
  CHECK(mentions(finding, "ldmatrix"));
  CHECK(report.findings.size() == report.count(em::FindingKind::misaligned_access));
}

TEST_CASE("an mma.sync that half the warp never reaches is reported as a deadlock") {
  Buffers buffers;
  const em::Report report = run(mma_in_half_a_warp, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 2);
  CHECK(report.first(em::FindingKind::deadlock)->thread.x == 0);
  CHECK(mentions(*report.first(em::FindingKind::deadlock), "mma.sync"));
}

TEST_CASE("lanes of one warp meeting in different collectives are reported") {
  Buffers buffers;
  const em::Report report = run(mma_meets_syncwarp, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::warp_collective_mismatch) == 2);  // first warp, each block
  const em::Finding& finding = *report.first(em::FindingKind::warp_collective_mismatch);
  CHECK(finding.thread.x == 16);
  CHECK(finding.other_thread == 0);
  CHECK(mentions(finding, "mma.sync"));
  CHECK(mentions(finding, "__syncwarp"));
}

TEST_CASE("a finding carries the source location the thread set") {
  Buffers buffers;
  const em::Report report = run(located_write_past_shared, buffers);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_out_of_bounds) == 2);
  const em::Finding& finding = *report.first(em::FindingKind::shared_out_of_bounds);
  CHECK(finding.location.find("test_planted_warp_bugs.cpp:") != std::string::npos);
  CHECK(mentions(finding, "test_planted_warp_bugs.cpp:"));
}

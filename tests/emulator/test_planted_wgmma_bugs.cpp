// Planted bugs in wgmma code: each small kernel has one mistake, and the emulator must report
// it with its kind, the offending thread and the address or instruction. Correct twins show
// the checks stay quiet when the code is right. Operands: A (64 x 16) and B (8 x 16), both
// K-major without swizzle, of f16 ones, so every D element is 16 (+ C).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kThreads = 128;
constexpr int kSharedBytes = 4096;  // A at 0 (2048 bytes), B at 2048 (256 bytes)
constexpr std::uint16_t kHalfOne = 0x3C00;

// Core matrices of 8 rows x 16 bytes: the next 8 k 128 bytes on (LBO), the next 8 rows 256.
constexpr std::uint64_t descriptor(int start, int base_offset = 0, int layout = 0) {
  return std::uint64_t(start >> 4) | std::uint64_t(128 >> 4) << 16 | std::uint64_t(256 >> 4) << 32 |
         std::uint64_t(base_offset) << 49 | std::uint64_t(layout) << 62;
}
constexpr std::uint64_t kA = descriptor(0), kB = descriptor(2048);

// Every thread fills its share of shared memory with ones, fences them for the async proxy,
// then the block synchronizes.
void fill_ones() {
  auto* shared = flashjit::dynamic_shared<std::uint16_t>();
  for (int i = static_cast<int>(threadIdx.x); i < kSharedBytes / 2;
       i += static_cast<int>(blockDim.x)) {
    flashjit::store_shared(shared, i, kHalfOne);
  }
  em::fence_proxy_async_shared();  // generic writes, read by wgmma (the async proxy)
  __syncthreads();
}

/// Thread 5 overwrites A's element at shared byte 200 before (bug) or after the wait.
template <bool WaitFirst>
__global__ void overwrite_operand(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
  em::wgmma_commit_group();
  auto* shared = flashjit::dynamic_shared<std::uint16_t>();
  if (!WaitFirst && t == 5) flashjit::store_shared(shared, 100, std::uint16_t{0});  // bug
  em::wgmma_wait_group(0);
  if (WaitFirst && t == 5) flashjit::store_shared(shared, 100, std::uint16_t{0});
  flashjit::store_global(out, t, acc[0]);
}

/// Thread 7 stores an accumulator before the wait (out[7]); everyone stores it after
/// (out[128 + t]).
__global__ void store_before_wait(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {-1.0f, -1.0f, -1.0f, -1.0f};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, true, 1, 1, false, false);
  em::wgmma_commit_group();
  if (t == 7) flashjit::store_global(out, t, acc[0] * 0.5f);  // bug: before the wait
  em::wgmma_wait_group(0);
  flashjit::store_global(out, kThreads + t, acc[0]);
}

/// Thread 9 halves accumulator register 2 before (bug) or after the wait, as an O rescale
/// placed on the wrong side of wgmma.wait_group would.
template <bool WaitFirst>
__global__ void scale_before_wait(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
  em::wgmma_commit_group();
  if (!WaitFirst && t == 9) acc[2] *= 0.5f;  // bug
  em::wgmma_wait_group(0);
  if (WaitFirst && t == 9) acc[2] *= 0.5f;
  flashjit::store_global(out, t, acc[2]);
}

/// Three wgmma chained on one accumulator across groups: wait_group 1 lands the first while the
/// second, of the same shape, still owns the registers; the third chains on the second with no
/// fence (the same shape orders them). out[t]: 16 · 3.
__global__ void chain_across_groups(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, true, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(1);
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, true, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  flashjit::store_global(out, t, acc[0]);
}

__global__ void descriptor_differs_in_warp_2(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  const std::uint64_t b = t / 32 == 2 ? descriptor(2048 + 16) : kB;  // bug
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::bf16, 8, acc, kA, b, false, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  flashjit::store_global(out, t, acc[0]);
}

__global__ void warp_3_never_arrives(float*) {
  fill_ones();
  if (threadIdx.x / 32 == 3) return;  // bug
  float acc[4] = {};                  // no fence first: the mma is the collective left waiting
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
}

__global__ void warp_1_commits_instead(float*) {
  fill_ones();
  float acc[4] = {};
  em::wgmma_fence();
  if (threadIdx.x / 32 == 1) {
    em::wgmma_commit_group();  // bug: the rest of its warpgroup issues the mma
  } else {
    em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
  }
}

template <std::uint64_t A>
__global__ void with_a_descriptor(float* out) {
  fill_ones();
  float acc[4] = {};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, A, kB, false, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  flashjit::store_global(out, static_cast<int>(threadIdx.x), acc[0]);
}

/// Two warpgroups, each with two groups in flight: wait_group 1 lands only the older one.
/// Warpgroup 1 negates A (imm-scale-a -1). After wait 1, out[t]: the first group's D, and
/// out[256 + t]: 1 while the second is in flight (its registers hold the poison, a NaN);
/// out[512 + t] after wait 0: the second's D (chained on the first's).
__global__ void two_groups_two_warpgroups(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  const int scale_a = t < kThreads ? 1 : -1;
  float first[4] = {}, second[4] = {-1.0f, -1.0f, -1.0f, -1.0f};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, first, kA, kB, false, scale_a, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_ss(em::MmaInput::f16, 8, second, kA, kB, true, scale_a, 1, false, false);
  em::wgmma_ss(em::MmaInput::f16, 8, second, kA, kB, true, scale_a, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(1);
  flashjit::store_global(out, t, first[0]);
  // Still in flight: the registers hold the emulator's poison, a NaN (only compared here,
  // never stored, which would be reported).
  const bool in_flight = second[0] != second[0];
  flashjit::store_global(out, 2 * kThreads + t, in_flight ? 1.0f : 0.0f);
  em::wgmma_wait_group(0);
  flashjit::store_global(out, 4 * kThreads + t, second[0]);
}

/// The warpgroup fills the operands and issues the wgmma with no __syncthreads between.
__global__ void no_barrier_before_wgmma(float*) {
  auto* shared = flashjit::dynamic_shared<std::uint16_t>();
  for (int i = static_cast<int>(threadIdx.x); i < kSharedBytes / 2; i += kThreads) {
    flashjit::store_shared(shared, i, kHalfOne);
  }  // bug: no __syncthreads
  em::fence_proxy_async_shared();
  float acc[4] = {};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
}

/// Rescales the delivered accumulators (as a softmax correction does) between two wgmma; the
/// fence before the second is the fix.
template <bool Fenced>
__global__ void rescale_between_wgmma(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  for (float& x : acc) x *= 0.5f;
  if (Fenced) em::wgmma_fence();  // the bug is leaving this out
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, true, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  flashjit::store_global(out, t, acc[0]);
}

constexpr std::uint32_t kHalfOnes = 0x3C003C00u, kHalfTwos = 0x40004000u;  // f16 pairs

/// Two rounds of D += A B with A in registers: ones, then twos. The fix fences after writing
/// A; the bug has only the fence at the top of the round, before the write.
template <bool Fenced>
__global__ void rewrite_a_after_fence(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  std::uint32_t a[4];
  for (int round = 0; round < 2; ++round) {
    em::wgmma_fence();
    for (std::uint32_t& r : a) r = round == 0 ? kHalfOnes : kHalfTwos;
    if (Fenced) em::wgmma_fence();  // the bug is leaving this out
    em::wgmma_rs(em::MmaInput::f16, 8, acc, a, kB, round > 0, 1, 1, false);
    em::wgmma_commit_group();
    em::wgmma_wait_group(0);
  }
  flashjit::store_global(out, t, acc[0]);
}

/// Thread 6 zeroes register 1 of its A fragment before (bug) or after the wait.
template <bool WaitFirst>
__global__ void rewrite_a_in_flight(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  fill_ones();
  float acc[4] = {};
  std::uint32_t a[4] = {kHalfOnes, kHalfOnes, kHalfOnes, kHalfOnes};
  em::wgmma_fence();
  em::wgmma_rs(em::MmaInput::f16, 8, acc, a, kB, false, 1, 1, false);
  em::wgmma_commit_group();
  if (!WaitFirst && t == 6) a[1] = 0;  // bug
  em::wgmma_wait_group(0);
  if (WaitFirst && t == 6) a[1] = 0;
  flashjit::store_global(out, t, acc[0] + static_cast<float>(a[1] & 1u));
}

__global__ void no_fence_at_all(float*) {
  fill_ones();
  float acc[4] = {};
  em::wgmma_ss(em::MmaInput::f16, 8, acc, kA, kB, false, 1, 1, false, false);  // bug
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
}

em::Report run(void (*kernel)(float*), std::vector<float>& out, int threads = kThreads) {
  out.assign(6 * kThreads, 0.0f);
  em::LaunchConfig config{.kernel_name = "planted",
                          .grid = {1},
                          .block = {static_cast<unsigned>(threads)},
                          .shared_bytes = kSharedBytes,
                          .buffers = {em::buffer_of(out.data(), out.size(), "out")}};
  return em::launch(kernel, config, out.data());
}

bool mentions(const em::Finding& finding, const char* text) {
  return finding.message.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("wgmma descriptor fields decode from their bits") {
  const std::uint64_t bits = std::uint64_t(0x1234 & 0x3FFF) | std::uint64_t(0x0042) << 16 |
                             std::uint64_t(0x0400) << 32 | std::uint64_t(5) << 49 |
                             std::uint64_t(2) << 62;
  const em::WgmmaDescriptor d = em::decode_wgmma_descriptor(bits);
  CHECK(d.start == 0x1234u * 16);
  CHECK(d.leading == 0x42u * 16);
  CHECK(d.stride == 0x400u * 16);
  CHECK(d.base_offset == 5);
  CHECK(d.swizzle == em::WgmmaSwizzle::b64);
  CHECK(em::encode_wgmma_descriptor(d) == bits);
}

TEST_CASE("a wgmma operand overwritten while its group is in flight is reported") {
  std::vector<float> out;
  const em::Report report = run(overwrite_operand<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_operand_in_flight) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::wgmma_operand_in_flight);
  CHECK(finding.thread.x == 5);
  CHECK(finding.write);
  CHECK(finding.offset == 200);
  CHECK(finding.other_thread == 0);
  CHECK(mentions(finding, "wgmma.mma_async"));
  CHECK(mentions(finding, "warpgroup 0"));
  CHECK(report.findings.size() == 1);

  const em::Report fixed = run(overwrite_operand<true>, out);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[0] == 16.0f);
}

TEST_CASE("an accumulator stored to global memory before its wgmma.wait_group is reported") {
  std::vector<float> out;
  const em::Report report = run(store_before_wait, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_accumulator_in_flight) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::wgmma_accumulator_in_flight);
  CHECK(finding.thread.x == 7);
  CHECK(mentions(finding, "thread (7,0,0)"));
  CHECK(mentions(finding, "before its wgmma.wait_group"));
  CHECK(mentions(finding, "wgmma.mma_async"));
  CHECK(finding.write);
  CHECK(finding.buffer == "out");
  CHECK(finding.offset == 7 * 4);
  CHECK(report.findings.size() == 1);
  CHECK(out[kThreads + 7] == 15.0f);  // after the wait: 16 ones plus C = -1
  CHECK(report.work.tensor_flops == 2 * 64 * 8 * 16);
  CHECK(report.work.shared_bytes_read == 64 * 16 * 2 + 8 * 16 * 2);  // A and B, once each
}

TEST_CASE("accumulators scaled before their wgmma.wait_group are reported at the wait") {
  std::vector<float> out;
  const em::Report report = run(scale_before_wait<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_accumulator_in_flight) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::wgmma_accumulator_in_flight);
  CHECK(finding.thread.x == 9);
  CHECK(mentions(finding, "thread (9,0,0)"));
  CHECK(mentions(finding, "wgmma.mma_async"));
  CHECK(mentions(finding, "wrote accumulator register 2"));
  CHECK(mentions(finding, "in flight"));
  CHECK(report.findings.size() == 1);
  CHECK(out[9] == 16.0f);  // the result lands over the early write

  const em::Report fixed = run(scale_before_wait<true>, out);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[9] == 8.0f);
  CHECK(out[10] == 16.0f);
}

TEST_CASE("wgmma of one shape chain on in-flight accumulators across groups, unreported") {
  std::vector<float> out;
  const em::Report report = run(chain_across_groups, out);
  CHECK_MESSAGE(report.clean(), report);
  CHECK(out[0] == 48.0f);
  CHECK(out[127] == 48.0f);
}

TEST_CASE("a wgmma descriptor that differs between warps of the warpgroup is reported") {
  std::vector<float> out;
  const em::Report report = run(descriptor_differs_in_warp_2, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::invalid_operand) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::invalid_operand);
  CHECK(finding.thread.x == 64);
  CHECK(finding.other_thread == 0);
  CHECK(mentions(finding, "b-desc"));
  CHECK(mentions(finding, "same across the warpgroup"));
  CHECK(mentions(finding, "wgmma.mma_async"));
  CHECK(report.findings.size() == 1);
  CHECK(out[0] == 0.0f);  // skipped: the accumulators keep their values
}

TEST_CASE("a wgmma that one warp of the warpgroup never reaches is reported as a deadlock") {
  std::vector<float> out;
  const em::Report report = run(warp_3_never_arrives, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::deadlock);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "warpgroup collective wgmma.mma_async"));
  CHECK(mentions(finding, "96 of 128 threads arrived"));
  CHECK(report.findings.size() == 1);
}

TEST_CASE("threads of a warpgroup meeting in different wgmma instructions are reported") {
  std::vector<float> out;
  const em::Report report = run(warp_1_commits_instead, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::warp_collective_mismatch) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::warp_collective_mismatch);
  CHECK(finding.thread.x == 32);
  CHECK(finding.other_thread == 0);
  CHECK(mentions(finding, "wgmma.commit_group"));
  CHECK(mentions(finding, "wgmma.mma_async"));
}

TEST_CASE("wgmma descriptors the emulator cannot honour are rejected, not guessed") {
  std::vector<float> out;
  SUBCASE("a non-zero base offset") {
    const em::Report report = run(with_a_descriptor<descriptor(0, 3)>, out);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::invalid_operand) == 1);
    CHECK(mentions(*report.first(em::FindingKind::invalid_operand), "base offset"));
  }
  SUBCASE("a 128B-swizzled start in the second row of its atom") {
    const em::Report report = run(with_a_descriptor<descriptor(128, 0, 1)>, out);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::invalid_operand) == 1);
    CHECK(mentions(*report.first(em::FindingKind::invalid_operand), "first row"));
  }
  SUBCASE("a K-major k16 slice running past its 32B swizzle row") {
    const em::Report report = run(with_a_descriptor<descriptor(16, 0, 3)>, out);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::invalid_operand) == 1);
    CHECK(mentions(*report.first(em::FindingKind::invalid_operand), "swizzle row"));
  }
  SUBCASE("an operand past the end of shared memory") {
    const em::Report report = run(with_a_descriptor<descriptor(3072)>, out);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::shared_out_of_bounds) > 0);
    const em::Finding& finding = *report.first(em::FindingKind::shared_out_of_bounds);
    CHECK(mentions(finding, "wgmma.mma_async"));
    CHECK(finding.offset >= kSharedBytes);
  }
}

TEST_CASE("wgmma.wait_group N lands all but the N newest groups, per warpgroup") {
  std::vector<float> out;
  const em::Report report = run(two_groups_two_warpgroups, out, 2 * kThreads);
  CHECK_MESSAGE(report.clean(), report);
  for (const int t : {0, 77, kThreads + 5, 2 * kThreads - 1}) {
    CAPTURE(t);
    const float sign = t < kThreads ? 1.0f : -1.0f;
    CHECK(out[static_cast<std::size_t>(t)] == 16.0f * sign);
    CHECK(out[static_cast<std::size_t>(2 * kThreads + t)] == 1.0f);  // still in flight
    CHECK(out[static_cast<std::size_t>(4 * kThreads + t)] == 32.0f * sign - 1.0f);
  }
  CHECK(report.work.tensor_flops == 2 * 3 * 2 * 64 * 8 * 16);
}

TEST_CASE("accumulators changed after their wait and used by a wgmma with no fence between") {
  std::vector<float> out;
  const em::Report report = run(rescale_between_wgmma<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_fence_missing) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::wgmma_fence_missing);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "wgmma.mma_async"));
  CHECK(mentions(finding, "changed its accumulators"));
  CHECK(report.findings.size() == 1);

  const em::Report fenced = run(rescale_between_wgmma<true>, out);
  CHECK_MESSAGE(fenced.clean(), fenced);
  CHECK(out[9] == 24.0f);  // 16 / 2 + 16
}

TEST_CASE("a warpgroup's first wgmma with no wgmma.fence before it is reported") {
  std::vector<float> out;
  const em::Report report = run(no_fence_at_all, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_fence_missing) == 1);
  CHECK(mentions(*report.first(em::FindingKind::wgmma_fence_missing), "first wgmma"));
}

TEST_CASE("a wgmma reading operands other warps wrote with no __syncthreads races") {
  std::vector<float> out;
  const em::Report report = run(no_barrier_before_wgmma, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::shared_race) > 0);
  CHECK(report.findings.size() == report.count(em::FindingKind::shared_race));
  const em::Finding& finding = *report.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 0);       // A's rows 0..15 count as read by warp 0's lane 0
  CHECK(finding.other_thread == 64);  // row 0's k 8..15 (offset 128): elements 64..71
  CHECK_FALSE(finding.write);
  CHECK(finding.offset == 128);
  CHECK(mentions(finding, "wgmma.mma_async"));
}

TEST_CASE("A registers written after the last wgmma.fence and read by a wgmma are reported") {
  std::vector<float> out;
  const em::Report report = run(rewrite_a_after_fence<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_fence_missing) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::wgmma_fence_missing);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "(A in registers)"));
  CHECK(mentions(finding, "registers of A"));
  CHECK(report.findings.size() == 1);

  const em::Report fenced = run(rewrite_a_after_fence<true>, out);
  CHECK_MESSAGE(fenced.clean(), fenced);
  CHECK(out[0] == 48.0f);  // 16 ones, then 16 twos
  CHECK(out[127] == 48.0f);
}

TEST_CASE("A registers written while their wgmma is in flight are reported at the wait") {
  std::vector<float> out;
  const em::Report report = run(rewrite_a_in_flight<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::wgmma_operand_in_flight) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::wgmma_operand_in_flight);
  CHECK(finding.thread.x == 6);
  CHECK(mentions(finding, "thread (6,0,0)"));
  CHECK(mentions(finding, "register 1 of A"));
  CHECK(mentions(finding, "in flight"));
  CHECK(report.findings.size() == 1);

  const em::Report fixed = run(rewrite_a_in_flight<true>, out);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[6] == 16.0f);
}

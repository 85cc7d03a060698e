// cp.async with commit/wait groups on the emulator, against the PTX ISA's semantics: a copy
// lands when its group completes, src-size zero-fills, wait_group N leaves the newest N groups
// (and anything uncommitted) in flight.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;

em::Report run(void (*kernel)(const float*, float*), unsigned threads, std::size_t shared_bytes,
               std::vector<float>& in, std::vector<float>& out) {
  em::LaunchConfig config{.kernel_name = "cp_async",
                          .grid = {2},
                          .block = {threads},
                          .shared_bytes = shared_bytes,
                          .buffers = {em::buffer_of(in.data(), in.size(), "in"),
                                      em::buffer_of(out.data(), out.size(), "out")}};
  return em::launch(kernel, config, in.data(), out.data());
}

std::vector<float> iota(std::size_t count) {
  std::vector<float> values(count);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i + 1);
  return values;
}

/// Each of 64 threads copies 16 bytes; after wait and barrier it reads another warp's slot.
__global__ void copy_then_share(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (64, 4)
  em::cp_async(shared + 4 * t, in + 4 * t, 16, 16);
  em::cp_async_commit();
  em::cp_async_wait(0);
  __syncthreads();
  const int other = (t + 32) % 64;
  for (int i = 0; i < 4; ++i) {
    flashjit::store_global(out, 4 * t + i, flashjit::load_shared(shared, 4 * other + i));
  }
}

/// Thread t copies with the t-th (cp-size, src-size) pair into its own 16-byte slot.
constexpr int kSizes[][2] = {{4, 0},  {4, 4},  {8, 0},  {8, 4},   {8, 8},
                             {16, 0}, {16, 4}, {16, 8}, {16, 12}, {16, 16}};
constexpr int kSizePairs = sizeof(kSizes) / sizeof(kSizes[0]);

__global__ void zero_fill(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (kSizePairs, 4)
  const int bytes = kSizes[t][0], src_bytes = kSizes[t][1];
  // With src-size 0 nothing is read, so even an address outside every buffer is fine.
  const float* src = src_bytes > 0 ? in + 4 * t : em::element_address(in, 1 << 20);
  em::cp_async(shared + 4 * t, src, bytes, src_bytes);
  em::cp_async_commit();
  em::cp_async_wait(0);
  for (int i = 0; i < 4; ++i)
    flashjit::store_global(out, 4 * t + i, flashjit::load_shared(shared, 4 * t + i));
}

/// Each thread commits groups 1, 2, 3 (one 4-byte copy each) and leaves copy 4 uncommitted,
/// then reads all four slots after wait_group 2, 1, 0, and commit + wait_group 0.
__global__ void wait_groups(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* slots = flashjit::dynamic_shared<float>() + 4 * t;  // (4,) per thread
  for (int g = 0; g < 4; ++g) {
    em::cp_async(slots + g, in + 4 * t + g, 4, 4);
    if (g < 3) em::cp_async_commit();
  }
  for (int phase = 0; phase < 4; ++phase) {
    if (phase == 3) em::cp_async_commit();
    em::cp_async_wait(phase < 3 ? 2 - phase : 0);
    for (int g = 0; g < 4; ++g) {
      flashjit::store_global(out, 16 * t + 4 * phase + g, flashjit::load_shared(slots, g));
    }
  }
}

/// Block 0 is abandoned (its lanes 0 and 1 meet in different collectives) with copies in
/// flight; block 1 copies to the same bytes and must find them free.
__global__ void abandon_with_copies_in_flight(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();  // (64, 4)
  em::cp_async(shared + 4 * t, in + 4 * t, 16, 16);
  em::cp_async_commit();
  if (blockIdx.x == 0) {
    if (t == 1) {
      (void)__ballot_sync(0xffffffffu, 1);
    } else {
      __syncwarp();
    }
  }
  em::cp_async_wait(0);
  __syncthreads();
  flashjit::store_global(out, t, flashjit::load_shared(shared, 4 * t));
}

}  // namespace

TEST_CASE("cp.async lands at wait_group and is shared after __syncthreads") {
  std::vector<float> in = iota(256), out(256, 0.0f);
  const em::Report report = run(copy_then_share, 64, 64 * 16, in, out);
  CHECK_MESSAGE(report.clean(), report);
  for (int t = 0; t < 64; ++t) {
    for (int i = 0; i < 4; ++i) CHECK(out[4 * t + i] == in[4 * ((t + 32) % 64) + i]);
  }
}

TEST_CASE("cp.async zero-fills past src-size and reads nothing at src-size 0") {
  std::vector<float> in = iota(4 * kSizePairs), out(4 * kSizePairs, 0.0f);
  const em::Report report = run(zero_fill, kSizePairs, kSizePairs * 16, in, out);
  CHECK_MESSAGE(report.clean(), report);
  for (int t = 0; t < kSizePairs; ++t) {
    CAPTURE(t);
    const int copied = kSizes[t][1] / 4, written = kSizes[t][0] / 4;
    for (int i = 0; i < 4; ++i) {
      const float value = out[4 * t + i];
      if (i < copied) CHECK(value == in[4 * t + i]);
      if (i >= copied && i < written) CHECK(value == 0.0f);
      if (i >= written) CHECK(std::isnan(value));  // untouched: still the 0xff fill
    }
  }
}

TEST_CASE("cp.async.wait_group N leaves the newest N groups and uncommitted copies in flight") {
  std::vector<float> in = iota(8), out(32, 0.0f);
  const em::Report report = run(wait_groups, 2, 2 * 16, in, out);
  // Reading a copy in flight is itself reported; that is how the pending ones show.
  const int landed_groups[4] = {1, 2, 3, 4};  // after wait 2, wait 1, wait 0, commit + wait 0
  std::size_t pending_reads = 0;
  for (int t = 0; t < 2; ++t) {
    for (int phase = 0; phase < 4; ++phase) {
      for (int g = 0; g < 4; ++g) {
        CAPTURE(t);
        CAPTURE(phase);
        CAPTURE(g);
        const float value = out[16 * t + 4 * phase + g];
        if (g < landed_groups[phase]) {
          CHECK(value == in[4 * t + g]);
        } else {
          CHECK(std::isnan(value));  // stale: the copy has not landed
          ++pending_reads;
        }
      }
    }
  }
  CHECK(pending_reads == 12);
  CHECK(report.count(em::FindingKind::async_copy_pending) == 2 * pending_reads);  // two blocks
  CHECK(report.findings.size() == report.count(em::FindingKind::async_copy_pending));
}

TEST_CASE("copies an abandoned block left in flight do not leak into the next block or launch") {
  std::vector<float> in = iota(256), out(64, 0.0f);
  const em::Report report = run(abandon_with_copies_in_flight, 64, 64 * 16, in, out);
  CHECK_MESSAGE(report.count(em::FindingKind::warp_collective_mismatch) == 1, report);
  CHECK_MESSAGE(report.findings.size() == 1, report);
  for (int t = 0; t < 64; ++t) CHECK(out[t] == in[4 * t]);  // block 1's copies
  std::vector<float> shared_out(256, 0.0f);
  const em::Report again = run(copy_then_share, 64, 64 * 16, in, shared_out);
  CHECK_MESSAGE(again.clean(), again);
}

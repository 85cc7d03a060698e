// The emulator's work counters on a launch small enough to count by hand: every instruction
// kind the counters see (global and shared loads and stores, cp.async with and without a
// source, a barrier, mma.sync), two CTAs of two warps.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "emulator/launch.hpp"
#include "emulator/ptx_api.hpp"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;

constexpr unsigned kThreads = 64;
constexpr std::size_t kShared = kThreads * 4 + kThreads * 16;  // a float, then 16 bytes each

// Per thread: a 4-byte global load stored to shared; a 16-byte cp.async whose source is real
// for warp 0 and zero-filled for warp 1; a barrier; a 4-byte shared load; mma.sync once in
// warp 0 and twice in warp 1; a 4-byte global store.
__global__ void counted(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  const int warp = t / 32;
  auto* shared = flashjit::dynamic_shared<float>();  // (kThreads) floats, then (kThreads, 4)
  flashjit::store_shared(shared, t, flashjit::load_global(in, t));
  em::cp_async(shared + kThreads + 4 * t, in + 4 * (t % 32), 16, warp == 0 ? 16 : 0);
  em::cp_async_commit();
  em::cp_async_wait(0);
  __syncthreads();
  const float x = flashjit::load_shared(shared, (t + 1) % int(kThreads));
  float d[4] = {};
  const std::uint32_t a[4] = {}, b[2] = {};
  const float c[4] = {};
  for (int i = 0; i <= warp; ++i) em::mma_m16n8k16(em::MmaInput::bf16, d, a, b, c);
  flashjit::store_global(out, t, x + d[0]);
}

TEST_CASE("work counters: every instruction kind, counted exactly") {
  std::vector<float> in(128, 1.0f), out(kThreads, 0.0f);
  const em::LaunchConfig config{.kernel_name = "counted",
                                .grid = {2},
                                .block = {kThreads},
                                .shared_bytes = kShared,
                                .buffers = {em::buffer_of(in.data(), in.size(), "in"),
                                            em::buffer_of(out.data(), out.size(), "out")}};
  const em::Report report = em::launch(counted, config, in.data(), out.data());
  REQUIRE_MESSAGE(report.clean(), report);
  constexpr std::uint64_t kCtas = 2;
  const em::WorkCounters& w = report.work;
  CHECK(w.ctas == kCtas);
  CHECK(w.barriers == kCtas);
  CHECK(w.tensor_flops == kCtas * 3 * (2 * 16 * 8 * 16));       // three mma.sync m16n8k16
  CHECK(w.global_bytes_read == kCtas * (64 * 4 + 32 * 16));     // zero-filled: no source bytes
  CHECK(w.shared_bytes_written == kCtas * (64 * 4 + 64 * 16));  // cp.async writes either way
  CHECK(w.shared_bytes_read == kCtas * 64 * 4);
  CHECK(w.global_bytes_written == kCtas * 64 * 4);
}

}  // namespace

// The emulator's memory model (emulator/memory_model.hpp): the bank, sector, occupancy and L2
// arithmetic on requests written by hand, then launches with a planted bank conflict and a
// planted strided load, which must move the counters of their sites and nothing else, and loads
// held until their use (RawVector), in flight until then.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "emulator/memory_model.hpp"
#include "emulator/ptx_api.hpp"
#include "tile/memory.cuh"
#include "tile/vector_memory.cuh"

namespace {

namespace em = flashjit::emulator;

// Lane i accesses `bytes` at base + i * stride (lanes past `lanes` take no part).
em::WarpRequest strided(std::uint64_t stride, std::uint32_t bytes, int lanes = 32,
                        std::uint64_t base = 0) {
  em::WarpRequest request{};
  for (int i = 0; i < lanes; ++i) request[i] = {base + std::uint64_t(i) * stride, bytes};
  return request;
}

TEST_CASE("memory model: shared wavefronts under 32 banks of 4 bytes") {
  CHECK(em::shared_request_cost(strided(4, 4)).wavefronts == 1);      // one word per bank
  CHECK(em::shared_request_cost(strided(0, 4)).wavefronts == 1);      // one word: a broadcast
  CHECK(em::shared_request_cost(strided(8, 4)).wavefronts == 2);      // two words in a bank
  CHECK(em::shared_request_cost(strided(128, 4)).wavefronts == 32);   // every lane on bank 0
  CHECK(em::shared_request_cost(strided(132, 4)).wavefronts == 1);    // a padded row apart
  CHECK(em::shared_request_cost(strided(8, 8)).wavefronts == 2);      // halves of 16 lanes
  CHECK(em::shared_request_cost(strided(16, 16)).wavefronts == 4);    // quarters of 8 lanes
  CHECK(em::shared_request_cost(strided(32, 16)).wavefronts == 8);    // 2 words a bank a quarter
  CHECK(em::shared_request_cost(strided(16, 16)).ideal == 4);
  CHECK(em::shared_request_cost(strided(128, 4)).ideal == 1);
  CHECK(em::shared_request_cost(strided(4, 4, 8)).wavefronts == 1);   // 8 lanes take part
  CHECK(em::shared_request_cost(strided(4, 4, 0)).wavefronts == 0);
  // dQ's staging stores of the Hopper backward (8 rows of 128 floats, 4 lanes a row, 8-byte
  // pairs): plain rows put the 4 rows of a half-warp on the same banks; the XOR by row does not.
  em::WarpRequest plain{}, permuted{};
  for (int lane = 0; lane < 32; ++lane) {
    const int row = lane / 4, col = 2 * (lane % 4);
    plain[lane] = {std::uint64_t(row * 128 + col) * 4, 8};
    permuted[lane] = {std::uint64_t(row * 128 + (col ^ ((row & 7) << 3))) * 4, 8};
  }
  CHECK(em::shared_request_cost(plain).wavefronts == 8);
  CHECK(em::shared_request_cost(permuted).wavefronts == 2);
}

TEST_CASE("memory model: global sector use") {
  const em::SectorCost contiguous = em::global_request_cost(strided(4, 4));
  CHECK(contiguous.bytes == 128);
  CHECK(contiguous.sector_bytes == 128);
  const em::SectorCost every_other = em::global_request_cost(strided(8, 4));
  CHECK(every_other.bytes == 128);
  CHECK(every_other.sector_bytes == 256);
  const em::SectorCost scattered = em::global_request_cost(strided(64, 4));
  CHECK(scattered.sector_bytes == 32 * 32);
  const em::SectorCost same = em::global_request_cost(strided(0, 4));  // a broadcast
  CHECK(same.bytes == 4);
  CHECK(same.sector_bytes == 32);
  const em::SectorCost misaligned = em::global_request_cost(strided(16, 16, 32, 16));
  CHECK(misaligned.bytes == 512);
  CHECK(misaligned.sector_bytes == 17 * 32);
}

TEST_CASE("memory model: occupancy and the L2's DRAM bytes") {
  const em::ModelledGpu h100;
  CHECK(em::resident_ctas_per_sm(h100, 384, 214 * 1024) == 1);
  CHECK(em::resident_ctas_per_sm(h100, 128, 40 * 1024) == 5);  // 228 KB / 41 KB
  CHECK(em::resident_ctas_per_sm(h100, 1024, 0) == 2);         // 2048 threads
  CHECK(em::resident_ctas_per_sm(h100, 32, 0) == 32);

  constexpr std::uint64_t kMiB = 1024 * 1024;
  const std::vector<em::ByteRun> stream = {{0, 4 * kMiB}};
  // Four CTAs streaming the same 4 MiB together: DRAM reads it once.
  CHECK(em::modelled_dram_read_bytes({stream, stream, stream, stream}, 1 * kMiB, 4) == 4 * kMiB);
  // One at a time through a 1 MiB L2: each reads it all again; through 8 MiB, once.
  CHECK(em::modelled_dram_read_bytes({stream, stream, stream, stream}, 1 * kMiB, 1) ==
        16 * kMiB);
  CHECK(em::modelled_dram_read_bytes({stream, stream, stream, stream}, 8 * kMiB, 1) == 4 * kMiB);
  // Sectors: a 4-byte read brings in 32 bytes, the rest of its line stays out.
  CHECK(em::modelled_dram_read_bytes({{{0, 4}, {64, 68}}}, kMiB, 1) == 64);
}

constexpr unsigned kThreads = 64;

// Each thread stores a float to shared memory at t * Stride, reads it back, and loads a global
// float at t * Step: Stride 32 puts a warp's 32 stores on one bank, Step 2 uses half of each
// sector. The loop's loads (kRepeats per thread, no barrier between) are one site's requests.
constexpr int kRepeats = 3;
template <int Stride, int Step>
__global__ void planted(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  float* shared = flashjit::dynamic_shared<float>();
  flashjit::store_shared(shared, t * Stride, 1.0f);
  __syncthreads();
  float sum = flashjit::load_shared(shared, t * Stride);
  for (int i = 0; i < kRepeats; ++i) sum += flashjit::load_global(in, (t + 64 * i) * Step);
  flashjit::store_global(out, t, sum);
}

// `count` floats of `storage` from a 256-byte boundary, as cuMemAlloc aligns: sectors are
// counted on addresses.
float* aligned(std::vector<float>& storage, std::size_t count) {
  storage.assign(count + 64, 1.0f);
  const auto at = reinterpret_cast<std::uintptr_t>(storage.data());
  return storage.data() + ((256 - at % 256) % 256) / sizeof(float);
}

template <int Stride, int Step>
em::MemoryCounters run_planted(bool model = true) {
  std::vector<float> in_storage, out_storage;
  const std::size_t in_count = 64 * kRepeats * 2;
  float* in = aligned(in_storage, in_count);
  float* out = aligned(out_storage, kThreads);
  em::LaunchConfig config{.kernel_name = "planted",
                          .grid = {2},
                          .block = {kThreads},
                          .shared_bytes = kThreads * 32 * 4,
                          .buffers = {em::buffer_of(in, in_count, "in"),
                                      em::buffer_of(out, kThreads, "out")}};
  if (model) config.memory_model = em::ModelledGpu{};
  const em::Report report = em::launch(planted<Stride, Step>, config, in, out);
  REQUIRE_MESSAGE(report.clean(), report);
  return report.memory;
}

const em::SiteCounters& site_of(const em::MemoryCounters& m, const std::string& instruction) {
  const auto it = std::find_if(m.sites.begin(), m.sites.end(), [&](const em::SiteCounters& s) {
    return s.instruction == instruction;
  });
  REQUIRE(it != m.sites.end());
  return *it;
}

TEST_CASE("memory model: a planted bank conflict and a planted strided load move their sites") {
  const em::MemoryCounters clean = run_planted<1, 1>();
  REQUIRE(clean.modelled);
  CHECK(clean.shared_requests == 2 * 2 * 2);  // 2 CTAs, 2 warps, a store and a load
  CHECK(clean.shared_wavefronts == clean.shared_requests);
  CHECK(site_of(clean, "ld.global").requests == 2 * 2 * kRepeats);
  CHECK(site_of(clean, "ld.global").bytes == site_of(clean, "ld.global").sector_bytes);
  CHECK(site_of(clean, "st.global").bytes == site_of(clean, "st.global").sector_bytes);
  CHECK(site_of(clean, "st.shared").site.find("emulator/test_memory_model.cpp:") == 0);

  const em::MemoryCounters conflicted = run_planted<32, 1>();
  for (const char* instruction : {"st.shared", "ld.shared"}) {
    const em::SiteCounters& site = site_of(conflicted, instruction);
    CHECK(site.wavefronts == 32 * site.requests);  // every lane on one bank
  }
  CHECK(site_of(conflicted, "ld.global").sector_bytes == site_of(clean, "ld.global").sector_bytes);

  const em::MemoryCounters strided_load = run_planted<1, 2>();
  const em::SiteCounters& loads = site_of(strided_load, "ld.global");
  CHECK(loads.requests == 2 * 2 * kRepeats);
  CHECK(2 * loads.bytes == loads.sector_bytes);  // 16 of 32 bytes a sector
  CHECK(strided_load.shared_wavefronts == clean.shared_wavefronts);

  // Every read of the CTAs' once, bytes in flight of a warp's request each.
  CHECK(clean.dram_bytes_read == 64 * kRepeats * 4);
  CHECK(clean.dram_bytes_written == kThreads * 4);
  CHECK(clean.bytes_in_flight_per_cta == 2 * 128);
  CHECK(clean.ctas_per_sm == 25);  // 228 KB over 8 KB and the 1 KB CUDA keeps

  CHECK_FALSE(run_planted<1, 1>(false).modelled);
}

// Each thread loads `Ahead` 16-byte vectors (RawVector) before using any, then widens them,
// with a barrier between the loads and the uses when `Barrier`; or, with Ahead 0, loads and
// widens one vector at a time.
template <int Ahead, bool Barrier>
__global__ void held(const float* in, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  constexpr int kLoads = Ahead > 0 ? Ahead : 3;
  float sum = 0.0f;
  flashjit::RawVector<float, 4> loaded[Ahead > 0 ? Ahead : 1] = {};
  for (int i = 0; i < kLoads; ++i) {
    const int slot = Ahead > 0 ? i : 0;
    flashjit::load_global_raw(in, 4 * (t + int(kThreads) * i), loaded[slot]);
    if (Ahead > 0 && i + 1 < kLoads) continue;
    if (Barrier) __syncthreads();
    for (int j = Ahead > 0 ? 0 : slot; j <= slot; ++j) {
      float values[4];
      flashjit::widen(loaded[j], values);
      sum += values[0] + values[1] + values[2] + values[3];
    }
  }
  flashjit::store_global(out, t, sum);
}

template <int Ahead, bool Barrier>
em::MemoryCounters run_held() {
  std::vector<float> in_storage, out_storage;
  const std::size_t in_count = 4 * kThreads * 3;
  float* in = aligned(in_storage, in_count);
  float* out = aligned(out_storage, kThreads);
  em::LaunchConfig config{
      .kernel_name = "held",
      .grid = {1},
      .block = {kThreads},
      .buffers = {em::buffer_of(in, in_count, "in"), em::buffer_of(out, kThreads, "out")}};
  config.memory_model = em::ModelledGpu{};
  const em::Report report = em::launch(held<Ahead, Barrier>, config, in, out);
  REQUIRE_MESSAGE(report.clean(), report);
  for (int t = 0; t < int(kThreads); ++t) CHECK(out[t] == 12.0f);
  return report.memory;
}

TEST_CASE("memory model: loads held until their use are in flight until then") {
  // Three vectors of 16 bytes a thread ahead of a barrier: all 64 threads' at once.
  CHECK(run_held<3, true>().bytes_in_flight_per_cta == 3 * 16 * kThreads);
  // Used before the thread's next barrier: the emulator ran the threads one after another, the
  // GPU runs them together, so each thread's three count at once all the same.
  CHECK(run_held<3, false>().bytes_in_flight_per_cta == 3 * 16 * kThreads);
  // One at a time, each used before the next load: one vector a thread.
  CHECK(run_held<0, false>().bytes_in_flight_per_cta == 16 * kThreads);
}

}  // namespace

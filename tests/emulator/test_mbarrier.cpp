// mbarriers and named barriers on the emulator: phases over a producer/consumer ring fed by
// TMA, and one planted bug per check (each finding's kind, thread, instruction and address).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"
#include "tile/pipeline_ring.cuh"
#include "tile/tma.cuh"

namespace {

namespace em = flashjit::emulator;
using flashjit::mbarrier_t;

constexpr int kBarrierOffset = 8;  // the planted kernels' barrier, at shared offset 8

mbarrier_t* barrier_at(int offset) {
  return reinterpret_cast<mbarrier_t*>(flashjit::dynamic_shared<unsigned char>() + offset);
}

em::Report run(void (*kernel)(float*), std::vector<float>& out, int threads,
               std::size_t shared_bytes = 1024) {
  out.assign(1024, 0.0f);
  em::LaunchConfig config{.kernel_name = "barriers",
                          .grid = {1},
                          .block = {static_cast<unsigned>(threads)},
                          .shared_bytes = shared_bytes,
                          .buffers = {em::buffer_of(out.data(), out.size(), "out")}};
  return em::launch(kernel, config, out.data());
}

bool mentions(const em::Finding& finding, const std::string& text) {
  return finding.message.find(text) != std::string::npos;
}

// Thread 0 arrives on a count-2 barrier in three rounds, thread 1 twice per round; everyone
// records what test_wait sees before and after each round.
__global__ void phases_by_arrivals(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  if (t == 0) flashjit::mbarrier_init(bar, 2);
  __syncthreads();
  for (int round = 0; round < 3; ++round) {
    const auto parity = static_cast<unsigned>(round & 1);
    if (t == 0) {
      flashjit::store_global(out, round, em::mbarrier_test_wait_parity(bar, parity) ? 1.0f : 0.0f);
      flashjit::mbarrier_arrive(bar);
    }
    __syncthreads();
    if (t == 1) {
      flashjit::mbarrier_arrive(bar);
      flashjit::store_global(out, 10 + round,
                             em::mbarrier_test_wait_parity(bar, parity) ? 1.0f : 0.0f);
    }
    __syncthreads();
  }
}

constexpr int kStages = 2, kSteps = 6, kRows = 4, kCols = 32;  // fp32 boxes of (4, 32)
constexpr int kConsumers = 64;                                 // warps 1 and 2
constexpr int kBoxBytes = kRows * kCols * 4;
constexpr int kBoxesOffset = 128;  // the ring's barriers first, then the boxes
using Ring = flashjit::PipelineRing<kStages>;
using Position = flashjit::RingPosition<kStages>;

// The ring's planted bugs: the consumers never release a slot, or they call try_wait once and
// go on whatever it returns (as if it always waited: the default schedule's try_wait does).
enum class RingBug { none, never_release, try_wait_once };

// Warp 0's lane 0 produces kSteps boxes (rows 4s..4s+3 of the tensor) into the ring; warps 1
// and 2 wait for each, add it up column-wise into out[step * 32 + column], release the slot.
template <RingBug Bug>
__global__ void ring_kernel(flashjit::tma_descriptor map, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  auto* base = flashjit::dynamic_shared<unsigned char>();
  const Ring ring{reinterpret_cast<mbarrier_t*>(base)};
  auto box = [&](int s) { return reinterpret_cast<float*>(base + kBoxesOffset + s * kBoxBytes); };
  if (t == 0) ring.init(kConsumers);
  __syncthreads();
  Position at;
  if (t == 0) {  // producer: wait for an empty slot, load into it
    for (int step = 0; step < kSteps; ++step, at.advance()) {
      mbarrier_t* full = ring.acquire(at, kBoxBytes);
      const int coords[2] = {0, kRows * step};
      flashjit::tma_load(box(at.stage), map, coords, full);
    }
  } else if (t >= 32) {  // consumers: wait for a full slot, read, release
    const int column = (t - 32) % kCols;
    for (int step = 0; step < kSteps; ++step, at.advance()) {
      if (Bug == RingBug::try_wait_once) {  // slot s's full barrier is the ring's s-th
        flashjit::mbarrier_try_wait_parity(reinterpret_cast<mbarrier_t*>(base) + at.stage,
                                           at.phase);
      } else {
        ring.wait(at);
      }
      float sum = 0.0f;
      for (int r = 0; r < kRows; ++r)
        sum += flashjit::load_shared(box(at.stage), r * kCols + column);
      if (t < 64) flashjit::store_global(out, step * kCols + column, sum);
      if (Bug != RingBug::never_release) ring.release(at);
    }
  }
}

em::TensorMap ring_map(std::vector<float>& tensor) {
  em::TensorMap map;
  map.element_bytes = 4;
  map.rank = 2;
  map.global_address = tensor.data();
  map.dims = {kCols, kSteps * kRows, 1, 1, 1};
  map.strides = {0, kCols * 4, 0, 0, 0};
  map.box = {kCols, kRows, 1, 1, 1};
  return map;
}

// Runs the ring over `tensor` into `out`, in the default order or explored from `seed`.
template <RingBug Bug>
em::Report run_ring(std::vector<float>& tensor, std::vector<float>& out,
                    std::optional<std::uint64_t> seed = std::nullopt) {
  em::TensorMap map = ring_map(tensor);
  REQUIRE(em::tensor_map_problem(map).empty());
  em::LaunchConfig config{.kernel_name = "ring",
                          .grid = {1},
                          .block = {96},
                          .shared_bytes = kBoxesOffset + kStages * kBoxBytes,
                          .buffers = {em::buffer_of(tensor.data(), tensor.size(), "tensor"),
                                      em::buffer_of(out.data(), out.size(), "out")},
                          .explore_seed = seed};
  return em::launch(ring_kernel<Bug>, config, flashjit::tma_descriptor{&map}, out.data());
}

std::vector<float> ring_tensor() {
  std::vector<float> tensor(kSteps * kRows * kCols);
  for (std::size_t i = 0; i < tensor.size(); ++i) tensor[i] = static_cast<float>(i % 97);
  return tensor;
}

// out[step * kCols + c]: the column sums the ring's consumers must store.
std::vector<float> ring_sums(const std::vector<float>& tensor) {
  std::vector<float> sums(kSteps * kCols, 0.0f);
  for (int step = 0; step < kSteps; ++step) {
    for (int c = 0; c < kCols; ++c) {
      for (int r = 0; r < kRows; ++r) {
        sums[static_cast<std::size_t>(step * kCols + c)] +=
            tensor[static_cast<std::size_t>((kRows * step + r) * kCols + c)];
      }
    }
  }
  return sums;
}

}  // namespace

TEST_CASE("an mbarrier phase completes when its last expected arrival comes, then flips") {
  std::vector<float> out;
  const em::Report report = run(phases_by_arrivals, out, 64);
  CHECK_MESSAGE(report.clean(), report);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    CHECK(out[static_cast<std::size_t>(round)] == 0.0f);  // one of two arrivals: still open
    CHECK(out[static_cast<std::size_t>(10 + round)] == 1.0f);
  }
}

TEST_CASE("a TMA ring with a producer warp and two consumer warps runs its phases in order") {
  std::vector<float> tensor = ring_tensor();
  std::vector<float> out(kSteps * kCols, -1.0f);
  const em::Report report = run_ring<RingBug::none>(tensor, out);
  CHECK_MESSAGE(report.clean(), report);
  CHECK(out == ring_sums(tensor));
  CHECK_FALSE(report.schedule.explored);
  CHECK(report.schedule.early_landings == 0);
  CHECK(report.schedule.failed_try_waits == 0);
}

TEST_CASE("exploring, copies land early and try_wait fails, reproducibly, and the ring holds") {
  std::vector<float> tensor = ring_tensor();
  for (const std::uint64_t seed : {1u, 2u, 27u, 1000u}) {
    CAPTURE(seed);
    std::vector<float> out(kSteps * kCols, -1.0f);
    const em::Report report = run_ring<RingBug::none>(tensor, out, seed);
    CHECK_MESSAGE(report.clean(), report);
    CHECK(out == ring_sums(tensor));
    CHECK(report.schedule.explored);
    CHECK(report.schedule.seed == seed);
    CHECK(report.schedule.early_landings > 0);
    CHECK(report.schedule.failed_try_waits > 0);
    std::vector<float> again(kSteps * kCols, -1.0f);
    const em::Report replay = run_ring<RingBug::none>(tensor, again, seed);
    CHECK(replay.schedule.early_landings == report.schedule.early_landings);
    CHECK(replay.schedule.failed_try_waits == report.schedule.failed_try_waits);
  }
}

TEST_CASE("a consumer that ignores try_wait's false reads a slot unloaded: exploring finds it") {
  std::vector<float> tensor = ring_tensor();
  std::vector<float> out(kSteps * kCols, -1.0f);
  // The default order hides the bug: its try_wait waits for the phase and returns true.
  const em::Report hidden = run_ring<RingBug::try_wait_once>(tensor, out);
  CHECK_MESSAGE(hidden.clean(), hidden);
  CHECK(out == ring_sums(tensor));

  const em::Report report = run_ring<RingBug::try_wait_once>(tensor, out, 27);
  INFO(report);
  CHECK(report.schedule.failed_try_waits > 0);
  REQUIRE(report.count(em::FindingKind::tma_load_pending) > 0);
  const em::Finding& finding = *report.first(em::FindingKind::tma_load_pending);
  CHECK(finding.thread.x >= 32);  // a consumer
  CHECK(mentions(finding, "cp.async.bulk.tensor load"));
  CHECK(mentions(finding, "seed 27: FLASHJIT_EMULATOR_EXPLORE=27 replays it"));
}

namespace {

__global__ void init_twice(float*) {
  if (threadIdx.x == 0) {
    flashjit::mbarrier_init(barrier_at(kBarrierOffset), 1);
    flashjit::mbarrier_init(barrier_at(kBarrierOffset), 1);  // bug: no inval between
  }
}

__global__ void arrive_before_init(float*) {
  if (threadIdx.x == 3) flashjit::mbarrier_arrive(barrier_at(kBarrierOffset));  // bug
  __syncthreads();
  if (threadIdx.x == 0) flashjit::mbarrier_init(barrier_at(kBarrierOffset), 1);
}

// Thread 0 completes phases 0, 1 and 2 (seeing each complete before the next arrival);
// thread 1 then waits for "phase 0" by its parity.
__global__ void stale_parity(float*) {
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  if (threadIdx.x == 0) {
    flashjit::mbarrier_init(bar, 1);
    for (unsigned i = 0; i < 3; ++i) {
      flashjit::mbarrier_arrive(bar);
      flashjit::mbarrier_wait_parity(bar, i & 1u);
    }
  }
  __syncthreads();
  if (threadIdx.x == 1) flashjit::mbarrier_wait_parity(bar, 0);  // bug: phase 0 is long gone
}

// Thread 0 completes phase 0 of a count-1 barrier, then arrives in phase 1: legal only once a
// wait has seen phase 0 complete.
template <bool Observed>
__global__ void arrive_on_next_phase(float* out) {
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  if (threadIdx.x == 0) flashjit::mbarrier_init(bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    flashjit::mbarrier_arrive(bar);                        // phase 0 completes
    if (Observed) flashjit::mbarrier_wait_parity(bar, 0);  // the bug is leaving it out
    flashjit::mbarrier_arrive(bar);                        // phase 1 completes
    if (Observed) {  // (without the first wait, this one would be two phases stale)
      flashjit::store_global(out, 0, em::mbarrier_test_wait_parity(bar, 1) ? 1.0f : 0.0f);
    }
  }
}

__global__ void arrive_past_count(float*) {
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  if (threadIdx.x == 0) {
    flashjit::mbarrier_init(bar, 1);
    flashjit::mbarrier_arrive_expect_tx(bar, 16);  // all arrivals in, 16 bytes still expected
  }
  __syncthreads();
  if (threadIdx.x == 2) flashjit::mbarrier_arrive(bar);  // bug: one arrival too many
}

__global__ void nobody_arrives(float*) {
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  if (threadIdx.x == 0) flashjit::mbarrier_init(bar, 2);
  __syncthreads();
  if (threadIdx.x == 0) flashjit::mbarrier_arrive(bar);  // bug: count 2, one arrival
  flashjit::mbarrier_wait_parity(bar, 0);
}

template <int Threads>
__global__ void named_sync(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < 64) flashjit::named_barrier_sync(1, Threads);  // warps 0 and 1
  flashjit::store_global(out, t, 1.0f);
}

__global__ void named_counts_differ(float*) {
  if (threadIdx.x >= 64) return;
  flashjit::named_barrier_sync(2, threadIdx.x < 32 ? 64 : 96);  // bug: warp 1 says 96
}

__global__ void named_sync_with_arrive(float* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t < 32) {
    flashjit::named_barrier_arrive(3, 64);  // warp 0 signals, does not wait
  } else {
    flashjit::named_barrier_sync(3, 64);
    flashjit::store_global(out, t, 2.0f);
  }
}

// Reads by two warps, each ordered before a write that is ordered before the next access: a
// shared byte's readers are those since its last write. Warp 1 reads and writes x; a round of
// bar.sync (warps 0 and 1 of 3); warp 0 reads it; another round; warp 1 writes it again. Clean
// (the checker once kept warp 1's first read past its write, and took warp 0's read for a
// second warp's unordered one). With the bug, warp 1 writes again without the second round: a
// race with warp 0's read.
template <bool Bug>
__global__ void reads_since_the_write(float* out) {
  float* x = flashjit::dynamic_shared<float>();
  const int t = static_cast<int>(threadIdx.x);
  if (t == 32) {
    flashjit::store_shared(x, 0, 0.0f);
    const float seen = flashjit::load_shared(x, 0);
    flashjit::store_shared(x, 0, seen + 1.0f);
  }
  if (t < 64) {  // warp 2 waits at the end: the rounds hold warps 0 and 1, not every thread
    flashjit::named_barrier_sync(1, 64);
    if (t == 0) flashjit::store_global(out, 0, flashjit::load_shared(x, 0));
    if (!Bug) flashjit::named_barrier_sync(1, 64);
    if (t == 32) flashjit::store_shared(x, 0, 5.0f);
  }
  __syncthreads();
}

// Readers of several warps: warps 0 and 1 read x (written before a __syncthreads), then a round
// of bar.sync holds warps 0 and 1, then warp 1 writes x: each reader warp synchronized with the
// writer after its read, so the write is ordered after both (a warpgroup's reads of its own
// tiles, then its epilogue's writes behind its own named barrier). With the bug the round holds
// warps 1 and 2 only: warp 0's read is unordered with the write, a race.
template <bool Bug>
__global__ void reads_of_two_warps(float* out) {
  float* x = flashjit::dynamic_shared<float>();
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) flashjit::store_shared(x, 0, 3.0f);
  __syncthreads();
  if (t == 0 || t == 32) flashjit::store_global(out, t, flashjit::load_shared(x, 0));
  const bool in_round = Bug ? t >= 32 : t < 64;
  if (in_round) flashjit::named_barrier_sync(1, 64);
  if (t == 33) flashjit::store_shared(x, 0, 4.0f);
  __syncthreads();
}

// Data handed over by an mbarrier: thread 0 (warp 0) writes x in shared memory and arrives
// on a count-1 barrier; warp 1 waits for the phase and reads x. Arrive releases and the wait
// acquires, so the read is ordered after the write (the TMA forward's producer zeroes a V
// block's lines past a packed sequence and hands the slot over this way). With the bug thread 0
// writes x again after its arrival: a race with warp 1's reads. (Before the rule, the clean
// kernel was reported too: a false positive.)
template <bool Bug>
__global__ void handed_over_by_mbarrier(float* out) {
  float* x = flashjit::dynamic_shared<float>() + 4;  // past the barrier at offset 8
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) flashjit::mbarrier_init(bar, 1);
  __syncthreads();
  if (t == 0) {
    flashjit::store_shared(x, 0, 6.0f);
    flashjit::mbarrier_arrive(bar);
    if (Bug) flashjit::store_shared(x, 0, 7.0f);
  } else if (t >= 32) {
    flashjit::mbarrier_wait_parity(bar, 0);
    flashjit::store_global(out, t, flashjit::load_shared(x, 0));
  }
  __syncthreads();
}

// Readers of several warps handed over by an mbarrier: warps 0 and 1 read x, every thread of
// both arrives on a count-64 barrier, and warp 2 waits for the phase and writes x (a consumer
// warpgroup's wgmma reads of a ring slot, its threads' releases, then a producer thread that
// converts the next block into the slot). With the bug only warp 0 arrives (count 32): warp
// 1's read is unordered with the write, a race.
template <bool Bug>
__global__ void reads_of_two_warps_handed_over(float* out) {
  float* x = flashjit::dynamic_shared<float>() + 4;  // past the barrier at offset 8
  mbarrier_t* bar = barrier_at(kBarrierOffset);
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) {
    flashjit::mbarrier_init(bar, Bug ? 32 : 64);
    flashjit::store_shared(x, 0, 3.0f);
  }
  __syncthreads();
  if (t == 0 || t == 32) flashjit::store_global(out, t, flashjit::load_shared(x, 0));
  if (t < (Bug ? 32 : 64)) flashjit::mbarrier_arrive(bar);
  if (t == 64) {
    flashjit::mbarrier_wait_parity(bar, 0);
    flashjit::store_shared(x, 0, 4.0f);
  }
  __syncthreads();
}

}  // namespace

TEST_CASE(
    "reads by several warps are ordered before a write by a barrier all their threads arrived on") {
  std::vector<float> out;
  const em::Report ordered = run(reads_of_two_warps_handed_over<false>, out, 96);
  CHECK_MESSAGE(ordered.clean(), ordered);
  CHECK(out[0] == 3.0f);
  CHECK(out[32] == 3.0f);
  const em::Report racy = run(reads_of_two_warps_handed_over<true>, out, 96);
  INFO(racy);
  REQUIRE(racy.count(em::FindingKind::shared_race) == 1);
  const em::Finding& finding = *racy.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 64);
  CHECK(finding.write);
  CHECK(mentions(finding, "write after read by several threads"));
}

TEST_CASE("a shared write clears the readers before it: later accesses ordered after it are") {
  std::vector<float> out;
  const em::Report ordered = run(reads_since_the_write<false>, out, 96);
  CHECK_MESSAGE(ordered.clean(), ordered);
  CHECK(out[0] == 1.0f);
  const em::Report racing = run(reads_since_the_write<true>, out, 96);
  INFO(racing);
  REQUIRE(racing.count(em::FindingKind::shared_race) == 1);
  const em::Finding& finding = *racing.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 32);
  CHECK(mentions(finding, "write after read"));
}

TEST_CASE("mbarrier.init on a live barrier is reported") {
  std::vector<float> out;
  const em::Report report = run(init_twice, out, 32);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::mbarrier_reinit) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::mbarrier_reinit);
  CHECK(finding.thread.x == 0);
  CHECK(finding.offset == kBarrierOffset);
  CHECK(mentions(finding, "mbarrier.init"));
  CHECK(mentions(finding, "thread (0,0,0)"));
  CHECK(mentions(finding, "shared offset 8"));
  CHECK(report.findings.size() == 1);
}

TEST_CASE("an mbarrier used before its init is reported") {
  std::vector<float> out;
  const em::Report report = run(arrive_before_init, out, 32);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::mbarrier_uninitialized) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::mbarrier_uninitialized);
  CHECK(finding.thread.x == 3);
  CHECK(mentions(finding, "mbarrier.arrive"));
  CHECK(mentions(finding, "thread (3,0,0)"));
  CHECK(mentions(finding, "shared offset 8"));
  CHECK(report.findings.size() == 1);
}

TEST_CASE("a parity wait two or more phases behind the barrier is reported") {
  std::vector<float> out;
  const em::Report report = run(stale_parity, out, 32);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::mbarrier_stale_phase) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::mbarrier_stale_phase);
  CHECK(finding.thread.x == 1);
  CHECK(mentions(finding, "mbarrier.try_wait.parity 0"));
  CHECK(mentions(finding, "thread (1,0,0)"));
  CHECK(mentions(finding, "shared offset 8"));
  CHECK(mentions(finding, "for phase 0"));
  CHECK(mentions(finding, "completed 3 phases"));
}

TEST_CASE("an arrival on the next phase before any wait saw the phase complete is reported") {
  std::vector<float> out;
  const em::Report report = run(arrive_on_next_phase<false>, out, 32);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::mbarrier_phase_unobserved) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::mbarrier_phase_unobserved);
  CHECK(finding.thread.x == 0);
  CHECK(finding.offset == kBarrierOffset);
  CHECK(mentions(finding, "mbarrier.arrive"));
  CHECK(mentions(finding, "in phase 1"));
  CHECK(mentions(finding, "phase 0"));
  CHECK(mentions(finding, "shared offset 8"));
  CHECK(report.findings.size() == 1);

  const em::Report fixed = run(arrive_on_next_phase<true>, out, 32);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[0] == 1.0f);
}

TEST_CASE("an arrival on a phase whose arrivals are all in is reported") {
  std::vector<float> out;
  const em::Report report = run(arrive_past_count, out, 32);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::mbarrier_arrival_overflow) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::mbarrier_arrival_overflow);
  CHECK(finding.thread.x == 2);
  CHECK(mentions(finding, "mbarrier.arrive"));
  CHECK(mentions(finding, "thread (2,0,0)"));
  CHECK(mentions(finding, "shared offset 8"));
  // The 16 bytes never come either: the phase is reported at block end.
  CHECK(report.count(em::FindingKind::mbarrier_tx_mismatch) == 1);
}

TEST_CASE("waiting on an mbarrier phase that can never complete is a deadlock naming it") {
  std::vector<float> out;
  const em::Report report = run(nobody_arrives, out, 64);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::deadlock);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "mbarrier.try_wait.parity 0"));
  CHECK(mentions(finding, "shared offset 8"));
  CHECK(mentions(finding, "for phase 0"));
  CHECK(mentions(finding, "1 of 2 arrivals pending"));
  CHECK(report.findings.size() == 1);
}

TEST_CASE("a ring whose consumers never release a slot deadlocks its producer, named") {
  std::vector<float> tensor(kSteps * kRows * kCols, 1.0f);
  std::vector<float> out(kSteps * kCols, -1.0f);
  const em::Report report = run_ring<RingBug::never_release>(tensor, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::deadlock);
  // The producer filled both slots, then waits for slot 0's release: the empty barriers follow
  // the two full ones (8 bytes each), at shared offset 16.
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "mbarrier.try_wait.parity"));
  CHECK(mentions(finding, "shared offset 16"));
  CHECK(mentions(finding, "64 of 64 arrivals pending"));
  // The consumers had the first two boxes.
  CHECK(out[0] == static_cast<float>(kRows));
  CHECK(out[kCols] == static_cast<float>(kRows));
  CHECK(out[2 * kCols] == -1.0f);
}

TEST_CASE("bar.sync releases its warps once the count arrived, bar.arrive counts toward it") {
  std::vector<float> out;
  const em::Report report = run(named_sync<64>, out, 96);
  CHECK_MESSAGE(report.clean(), report);
  CHECK(out[0] == 1.0f);
  CHECK(out[95] == 1.0f);
  const em::Report signalled = run(named_sync_with_arrive, out, 64);
  CHECK_MESSAGE(signalled.clean(), signalled);
  CHECK(out[40] == 2.0f);
}

TEST_CASE("named barrier counts that are not a multiple of 32 or differ are reported") {
  std::vector<float> out;
  SUBCASE("a count of 48") {
    const em::Report report = run(named_sync<48>, out, 96);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::named_barrier_mismatch) > 0);
    const em::Finding& finding = *report.first(em::FindingKind::named_barrier_mismatch);
    CHECK(finding.thread.x == 0);
    CHECK(mentions(finding, "bar.sync 1, 48"));
    CHECK(mentions(finding, "multiple of 32"));
  }
  SUBCASE("counts 64 and 96 for one id") {
    const em::Report report = run(named_counts_differ, out, 96);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::named_barrier_mismatch) > 0);
    const em::Finding& finding = *report.first(em::FindingKind::named_barrier_mismatch);
    CHECK(finding.thread.x == 32);
    CHECK(finding.other_thread == 0);
    CHECK(mentions(finding, "bar.sync 2, 96"));
    CHECK(mentions(finding, "count of 64"));
  }
}

TEST_CASE("a named barrier round that can never fill is a deadlock naming the barrier") {
  std::vector<float> out;
  const em::Report report = run(named_sync<128>, out, 128);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::deadlock);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "bar.sync 1, 128"));
  CHECK(mentions(finding, "64 of 128 threads arrived"));
}

TEST_CASE("reads by several warps are ordered before a write by a round that holds them all") {
  std::vector<float> out;
  const em::Report ordered = run(reads_of_two_warps<false>, out, 96);
  CHECK_MESSAGE(ordered.clean(), ordered);
  CHECK(out[0] == 3.0f);
  CHECK(out[32] == 3.0f);
  const em::Report racy = run(reads_of_two_warps<true>, out, 96);
  INFO(racy);
  REQUIRE(racy.count(em::FindingKind::shared_race) == 1);
  const em::Finding& finding = *racy.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 33);
  CHECK(finding.write);
  CHECK(mentions(finding, "write after read by several threads"));
}

TEST_CASE("an mbarrier hands shared data over: arrive releases, a wait that sees it acquires") {
  std::vector<float> out;
  const em::Report ordered = run(handed_over_by_mbarrier<false>, out, 64);
  CHECK_MESSAGE(ordered.clean(), ordered);
  CHECK(out[32] == 6.0f);
  CHECK(out[63] == 6.0f);
  const em::Report racy = run(handed_over_by_mbarrier<true>, out, 64);
  INFO(racy);
  // Thread 0 runs on past its arrival before warp 1 wakes: each of warp 1's reads follows the
  // second write, which no synchronization orders before it.
  REQUIRE(racy.count(em::FindingKind::shared_race) == 32);
  const em::Finding& finding = *racy.first(em::FindingKind::shared_race);
  CHECK(finding.thread.x == 32);
  CHECK_FALSE(finding.write);
  CHECK(mentions(finding, "read after write by thread (0,0,0)"));
}

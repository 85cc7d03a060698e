// Global semaphores (ld.acquire spin, red.release add) on the emulator: blocks that take turns
// in the order of their index add in that order; a block's two warps may hand a turn to each
// other; and each rule caught on a planted bug: a wait for a turn no earlier block gives (a GPU
// could hang: the emulator's deadlock finding), a release before the bulk reduction it orders
// has landed.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/bulk_reduce.cuh"
#include "tile/memory.cuh"
#include "tile/semaphore.cuh"

namespace {

namespace em = flashjit::emulator;

constexpr int kFloats = 4;  // one reduction's run: 16 bytes
constexpr unsigned kRunBytes = kFloats * sizeof(float);
constexpr int kBlocks = 4;

bool mentions(const em::Finding& finding, const std::string& text) {
  return finding.message.find(text) != std::string::npos;
}

enum class Plant {
  none,
  reversed_turns,  // block b waits for turn kBlocks - 1 - b: for a later block
  early_release,   // the turn passes on after wait_group.read: the sum may not have landed
};

// Thread 0 of block b, in turn `turn(b)`: records the turns taken so far, then adds a run of
// b + 1 into `sums` and passes the turn on.
template <Plant P>
__global__ void take_turns(float* sums, int* turns, int* seen) {
  if (threadIdx.x != 0) return;
  const int block = static_cast<int>(blockIdx.x);
  float* run = flashjit::dynamic_shared<float>();
  for (int i = 0; i < kFloats; ++i) flashjit::store_shared(run, i, static_cast<float>(block + 1));
  flashjit::fence_proxy_async();
  flashjit::semaphore_wait_equal(turns, P == Plant::reversed_turns ? kBlocks - 1 - block : block);
  flashjit::store_global_raw(seen + block, flashjit::load_global_index(turns, 0));
  flashjit::bulk_reduce_add(sums, run, kRunBytes);
  flashjit::bulk_commit_group();
  if (P == Plant::early_release) {
    flashjit::bulk_wait_group_read<0>();
  } else {
    flashjit::bulk_wait_group<0>();
  }
  flashjit::semaphore_release_add(turns, 1);
  if (P == Plant::early_release) flashjit::bulk_wait_group<0>();
}

struct Turns {
  em::Report report;
  std::vector<float> sums = std::vector<float>(kFloats, 0.0f);
  std::vector<int> turns = std::vector<int>(1, 0);
  std::vector<int> seen = std::vector<int>(kBlocks, -1);
};

template <Plant P>
Turns run_turns() {
  Turns run;
  em::LaunchConfig config{.kernel_name = "take_turns",
                          .grid = {kBlocks},
                          .block = {32},
                          .shared_bytes = 1024,
                          .buffers = {em::buffer_of(run.sums.data(), run.sums.size(), "sums"),
                                      em::buffer_of(run.turns.data(), run.turns.size(), "turns"),
                                      em::buffer_of(run.seen.data(), run.seen.size(), "seen")}};
  run.report =
      em::launch(take_turns<P>, config, run.sums.data(), run.turns.data(), run.seen.data());
  return run;
}

// Warp 1's lane 0 waits for the turn warp 0's lane 0 passes on after writing `out[0]`; then
// reads it.
__global__ void hand_over(int* turns, int* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t == 32) {
    flashjit::semaphore_wait_equal(turns, 1);
    flashjit::store_global_raw(out + 1, flashjit::load_global_index(out, 0) + 1);
  } else if (t == 0) {
    flashjit::store_global_raw(out, 41);
    flashjit::semaphore_release_add(turns, 1);
  }
}

}  // namespace

TEST_CASE("blocks that take turns on a semaphore go in the order of their index") {
  const Turns run = run_turns<Plant::none>();
  CHECK_MESSAGE(run.report.clean(), run.report);
  for (int b = 0; b < kBlocks; ++b) CHECK(run.seen[static_cast<std::size_t>(b)] == b);
  CHECK(run.turns[0] == kBlocks);
  for (const float s : run.sums) CHECK(s == 1.0f + 2.0f + 3.0f + 4.0f);
}

TEST_CASE("a warp waits for the turn another warp of its block passes on") {
  std::vector<int> turns(1, 0), out(2, 0);
  em::LaunchConfig config{.kernel_name = "hand_over",
                          .grid = {1},
                          .block = {64},
                          .buffers = {em::buffer_of(turns.data(), turns.size(), "turns"),
                                      em::buffer_of(out.data(), out.size(), "out")}};
  const em::Report report = em::launch(hand_over, config, turns.data(), out.data());
  CHECK_MESSAGE(report.clean(), report);
  CHECK(out[1] == 42);  // warp 1, run first, waited for warp 0's write
}

TEST_CASE("a wait for a turn only a later block gives is reported as a deadlock") {
  const Turns run = run_turns<Plant::reversed_turns>();
  INFO(run.report);
  REQUIRE(run.report.count(em::FindingKind::deadlock) >= 1);
  const em::Finding& finding = *run.report.first(em::FindingKind::deadlock);
  CHECK(finding.block.x == 0);
  CHECK(mentions(finding, "spins on the semaphore"));
  CHECK(mentions(finding, "until it holds 3 (it holds 0)"));
  CHECK(mentions(finding, "no block before this one"));
}

TEST_CASE("passing the turn on before the bulk reduction has landed is reported") {
  const Turns run = run_turns<Plant::early_release>();
  INFO(run.report);
  REQUIRE(run.report.count(em::FindingKind::bulk_reduce_in_flight) == kBlocks);
  REQUIRE(run.report.findings.size() == kBlocks);
  const em::Finding& finding = *run.report.first(em::FindingKind::bulk_reduce_in_flight);
  CHECK(mentions(finding, "semaphore release"));
  CHECK(mentions(finding, "without .read"));
  CHECK(run.turns[0] == kBlocks);  // the release still happens: the rest of the grid runs
}

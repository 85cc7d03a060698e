// Programmatic dependent launch on the emulator: in a launch that may overlap the grid before
// it, every thread waits for that grid (griddepcontrol.wait) before its first global access.
// A planted read before the wait is reported and names the buffer; the same kernel launched
// without the overlap, or with the wait first, runs clean.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"
#include "tile/semaphore.cuh"

namespace {

namespace em = flashjit::emulator;

constexpr int kThreads = 64;

// Each thread doubles its element of `in` into `out`; `read_first` reads before the wait.
template <bool ReadFirst>
__global__ void double_after_wait(const int* in, int* out) {
  const int t = static_cast<int>(threadIdx.x);
  int x = 0;
  if constexpr (ReadFirst) x = flashjit::load_global_index(in, t);
  flashjit::wait_for_previous_grid();
  flashjit::allow_next_grid();
  if constexpr (!ReadFirst) x = flashjit::load_global_index(in, t);
  flashjit::store_global_raw(out + t, 2 * x);
}

struct Run {
  em::Report report;
  std::vector<int> out = std::vector<int>(kThreads, 0);
};

template <bool ReadFirst>
Run run_doubling(bool overlaps) {
  std::vector<int> in(kThreads);
  for (int i = 0; i < kThreads; ++i) in[static_cast<std::size_t>(i)] = i;
  Run run;
  em::LaunchConfig config{.kernel_name = "double_after_wait",
                          .grid = {1},
                          .block = {kThreads},
                          .buffers = {em::buffer_of(in.data(), in.size(), "in"),
                                      em::buffer_of(run.out.data(), run.out.size(), "out")}};
  config.overlaps_previous_grid = overlaps;
  run.report = em::launch(double_after_wait<ReadFirst>, config, in.data(), run.out.data());
  return run;
}

}  // namespace

TEST_CASE("an overlapping launch whose threads wait before touching global memory runs clean") {
  const Run run = run_doubling<false>(true);
  CHECK(run.report.clean());
  CHECK(run.out[5] == 10);
}

TEST_CASE("a global read before griddepcontrol.wait in an overlapping launch is reported") {
  const Run run = run_doubling<true>(true);
  CHECK(run.report.count(em::FindingKind::global_before_grid_wait) > 0);
  const em::Finding* finding = run.report.first(em::FindingKind::global_before_grid_wait);
  REQUIRE(finding != nullptr);
  CHECK(finding->buffer == "in");
  CHECK(!finding->write);
  CHECK(finding->message.find("griddepcontrol.wait") != std::string::npos);
  // The writes come after the wait: only the reads are reported.
  CHECK(run.report.count(em::FindingKind::global_before_grid_wait) ==
        std::min<std::size_t>(kThreads, em::Report::kMaxFindings));
}

TEST_CASE("the same read before the wait is no finding when the launch overlaps nothing") {
  const Run run = run_doubling<true>(false);
  CHECK(run.report.clean());
  CHECK(run.out[kThreads - 1] == 2 * (kThreads - 1));
}

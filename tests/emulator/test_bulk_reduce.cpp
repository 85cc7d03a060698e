// Bulk reductions (cp.reduce.async.bulk .add.f32) on the emulator: the sums that several blocks
// and warps add into one destination, the work they count, and each rule of the PTX ISA caught
// on a planted bug, with the kernel that keeps the rule clean.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/bulk_reduce.cuh"
#include "tile/memory.cuh"

namespace {

namespace em = flashjit::emulator;

constexpr int kFloats = 64;  // one reduction's run: 256 bytes
constexpr unsigned kRunBytes = kFloats * sizeof(float);
constexpr std::size_t kShared = 4096;

bool mentions(const em::Finding& finding, const std::string& text) {
  return finding.message.find(text) != std::string::npos;
}

// Every warp writes a run of partial sums to its own shared memory, (block + 1)(warp + 1) + i
// at element i, and its lane 0 adds the run into `sums`: every block adds into the same sums.
__global__ void accumulate(float* sums) {
  const int t = static_cast<int>(threadIdx.x), warp = t / 32, lane = t % 32;
  float* run = flashjit::dynamic_shared<float>() + warp * kFloats;
  for (int i = lane; i < kFloats; i += 32) {
    flashjit::store_shared(run, i, static_cast<float>((blockIdx.x + 1) * (warp + 1) + i));
  }
  flashjit::fence_proxy_async();
  __syncwarp();
  if (lane == 0) {
    flashjit::bulk_reduce_add(sums, run, kRunBytes);
    flashjit::bulk_commit_group();
    flashjit::bulk_wait_group<0>();
  }
}

// The bugs planted one at a time in thread 0's reduction of a run of ones into `sums`.
enum class Plant {
  none,
  no_fence,                // the generic writes to the source reach the async proxy unfenced
  source_written_early,    // the source changes before a wait_group covers the reduction
  destination_read_early,  // the destination is read after wait_group.read only
  misaligned,              // a destination 4 bytes off 16-byte alignment
  bad_size,                // 24 bytes: not a multiple of 16
  out_of_bounds,           // a run past the end of the destination's buffer
};

template <Plant P>
__global__ void planted(float* sums, float* out) {
  if (threadIdx.x != 0) return;
  float* run = flashjit::dynamic_shared<float>();
  for (int i = 0; i < kFloats; ++i) flashjit::store_shared(run, i, 1.0f);
  if (P != Plant::no_fence) flashjit::fence_proxy_async();
  float* destination = P == Plant::misaligned      ? sums + 1
                       : P == Plant::out_of_bounds ? sums + 2 * kFloats - 16
                                                   : sums;
  flashjit::bulk_reduce_add(destination, run, P == Plant::bad_size ? 24u : kRunBytes);
  flashjit::bulk_commit_group();
  if (P == Plant::source_written_early) flashjit::store_shared(run, 3, 2.0f);
  flashjit::bulk_wait_group_read<0>();
  flashjit::store_shared(run, 5, 2.0f);  // the source is free once read
  if (P == Plant::destination_read_early) {
    flashjit::store_global(out, 0, flashjit::load_global(sums, 7));
  }
  flashjit::bulk_wait_group<0>();
  flashjit::store_global(out, 1, flashjit::load_global(sums, 7));
}

struct Planted {
  em::Report report;
  std::vector<float> sums = std::vector<float>(2 * kFloats, 0.0f);
  std::vector<float> out = std::vector<float>(2, -1.0f);
};

template <Plant P>
Planted run_planted() {
  Planted run;
  em::LaunchConfig config{.kernel_name = "planted_bulk_reduce",
                          .grid = {1},
                          .block = {32},
                          .shared_bytes = kShared,
                          .buffers = {em::buffer_of(run.sums.data(), run.sums.size(), "sums"),
                                      em::buffer_of(run.out.data(), run.out.size(), "out")}};
  run.report = em::launch(planted<P>, config, run.sums.data(), run.out.data());
  return run;
}

// The finding of `kind`, required to be the launch's only one, by thread 0.
const em::Finding& only_finding(const em::Report& report, em::FindingKind kind) {
  REQUIRE(report.count(kind) == 1);
  REQUIRE(report.findings.size() == 1);
  const em::Finding& finding = *report.first(kind);
  CHECK(finding.thread.x == 0);
  return finding;
}

}  // namespace

TEST_CASE("bulk reductions from every warp of every block add up, and count their bytes") {
  constexpr int kBlocks = 3, kWarps = 4;
  std::vector<float> sums(kFloats, 0.5f);
  em::LaunchConfig config{.kernel_name = "bulk_reduce_accumulate",
                          .grid = {kBlocks},
                          .block = {kWarps * 32},
                          .shared_bytes = kShared,
                          .buffers = {em::buffer_of(sums.data(), sums.size(), "sums")}};
  const em::Report report = em::launch(accumulate, config, sums.data());
  CHECK_MESSAGE(report.clean(), report);
  for (int i = 0; i < kFloats; ++i) {
    CAPTURE(i);
    // 0.5 + Σ_b Σ_w ((b + 1)(w + 1) + i) = 0.5 + 6 · 10 + 12 i
    CHECK(sums[static_cast<std::size_t>(i)] == 0.5f + 60.0f + 12.0f * static_cast<float>(i));
  }
  constexpr std::uint64_t kReduced = std::uint64_t{kBlocks} * kWarps * kRunBytes;
  CHECK(report.work.global_bytes_written == kReduced);  // the runs, each element once
  CHECK(report.work.global_bytes_read == 0);
  CHECK(report.work.shared_bytes_read == kReduced);  // the sources, read by the async proxy
}

TEST_CASE("a bulk reduction that keeps every rule runs clean") {
  const Planted run = run_planted<Plant::none>();
  CHECK_MESSAGE(run.report.clean(), run.report);
  for (int i = 0; i < kFloats; ++i) CHECK(run.sums[static_cast<std::size_t>(i)] == 1.0f);
  CHECK(run.sums[kFloats] == 0.0f);
  CHECK(run.out[1] == 1.0f);  // read after the wait_group
}

TEST_CASE("a bulk reduction reading generic writes with no fence.proxy.async is reported") {
  const Planted run = run_planted<Plant::no_fence>();
  INFO(run.report);
  const em::Finding& finding = only_finding(run.report, em::FindingKind::proxy_fence_missing);
  CHECK(mentions(finding, "cp.reduce.async.bulk"));
  CHECK(mentions(finding, "shared offset 0"));
  CHECK(mentions(finding, "no fence.proxy.async"));
}

TEST_CASE("writing a bulk reduction's source before a wait_group covers it is reported") {
  const Planted run = run_planted<Plant::source_written_early>();
  INFO(run.report);
  const em::Finding& finding = only_finding(run.report, em::FindingKind::tma_store_in_flight);
  CHECK(finding.write);
  CHECK(finding.offset == 12);  // element 3
  CHECK(mentions(finding, "source of a cp.reduce.async.bulk still in flight"));
}

TEST_CASE("touching a bulk reduction's destination after only wait_group.read is reported") {
  const Planted run = run_planted<Plant::destination_read_early>();
  INFO(run.report);
  const em::Finding& finding = only_finding(run.report, em::FindingKind::bulk_reduce_in_flight);
  CHECK_FALSE(finding.write);
  CHECK(finding.buffer == "sums");
  CHECK(finding.offset == 7 * 4);
  CHECK(mentions(finding, "cp.reduce.async.bulk of thread (0,0,0) still adds into"));
  CHECK(mentions(finding, "without .read"));
  CHECK(run.out[1] == 1.0f);  // after the full wait the same read is clean
}

TEST_CASE("a bulk reduction off its operands' rules is reported and adds nothing") {
  SUBCASE("a destination off 16-byte alignment") {
    const Planted run = run_planted<Plant::misaligned>();
    INFO(run.report);
    const em::Finding& finding = only_finding(run.report, em::FindingKind::misaligned_access);
    CHECK(mentions(finding, "global destination"));
    CHECK(mentions(finding, "16-byte aligned"));
    for (const float s : run.sums) CHECK(s == 0.0f);
  }
  SUBCASE("a size that is not a multiple of 16 bytes") {
    const Planted run = run_planted<Plant::bad_size>();
    INFO(run.report);
    const em::Finding& finding = only_finding(run.report, em::FindingKind::invalid_operand);
    CHECK(mentions(finding, "24 bytes"));
    CHECK(mentions(finding, "non-zero multiple of 16"));
    for (const float s : run.sums) CHECK(s == 0.0f);
  }
  SUBCASE("a run past the end of the destination's buffer") {
    const Planted run = run_planted<Plant::out_of_bounds>();
    INFO(run.report);
    const em::Finding& finding = only_finding(run.report, em::FindingKind::global_out_of_bounds);
    CHECK(finding.write);
    CHECK(finding.buffer == "sums");
    CHECK(mentions(finding, "cp.reduce.async.bulk"));
    for (const float s : run.sums) CHECK(s == 0.0f);
  }
}

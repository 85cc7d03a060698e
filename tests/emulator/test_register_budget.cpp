// setmaxnreg on the emulator: the launch's register count, a producer warpgroup handing its
// registers to two consumer warpgroups as FlashAttention-3 does, an increase that waits for a
// later decrease, and one planted bug per check (each finding's kind, thread and values).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"
#include "tile/register_budget.cuh"

namespace {

namespace em = flashjit::emulator;
constexpr int kWarpgroup = 128;
constexpr int kCounterSlot = 1024;  // out[kCounterSlot]: a counter the warpgroups share

int warpgroup() { return static_cast<int>(threadIdx.x) / kWarpgroup; }

void record_registers(float* out) {
  flashjit::store_global(out, static_cast<int>(threadIdx.x),
                         static_cast<float>(em::setmaxnreg_current()));
}

/// Warpgroup 0 produces with `Producer` registers, the others consume with `Consumer`.
template <int Producer, int Consumer>
__global__ void producer_and_consumers(float* out) {
  if (warpgroup() == 0) {
    flashjit::warpgroup_release_registers<Producer>();
  } else {
    flashjit::warpgroup_claim_registers<Consumer>();
  }
  record_registers(out);
}

/// Warpgroup 0 claims 232 first; warpgroup 1 counts to 128, then releases to 40, which lets
/// warpgroup 0 go on: it stores the count it sees after its claim.
__global__ void claim_before_release(float* out) {
  if (warpgroup() == 0) {
    flashjit::warpgroup_claim_registers<232>();
    flashjit::store_global(out, kCounterSlot + 1, flashjit::load_global(out, kCounterSlot));
  } else if (warpgroup() == 1) {
    flashjit::atomic_add_global(out, kCounterSlot, 1.0f);
    flashjit::warpgroup_release_registers<40>();
  }
  record_registers(out);
}

__global__ void launch_count(float* out) { record_registers(out); }

/// Thread 37 (bug) decreases to 48 while the rest of warpgroup 0 decreases to 40.
__global__ void count_differs_in_thread_37(float*) {
  if (threadIdx.x == 37) {
    em::setmaxnreg_dec(48);
  } else {
    em::setmaxnreg_dec(40);
  }
}

/// Warp 2 (bug) increases where the rest of its warpgroup decreases.
__global__ void warp_2_increases(float*) {
  if (threadIdx.x / 32 == 2) {
    em::setmaxnreg_inc(232);
  } else {
    em::setmaxnreg_dec(40);
  }
}

template <int Count>
__global__ void decrease_to(float* out) {
  em::setmaxnreg_dec(Count);
  record_registers(out);
}

template <int Count>
__global__ void increase_to(float* out) {
  em::setmaxnreg_inc(Count);
  record_registers(out);
}

em::Report run(void (*kernel)(float*), std::vector<float>& out, int threads) {
  out.assign(kCounterSlot + 2, 0.0f);
  em::LaunchConfig config{.kernel_name = "registers",
                          .grid = {1},
                          .block = {static_cast<unsigned>(threads)},
                          .shared_bytes = 0,
                          .buffers = {em::buffer_of(out.data(), out.size(), "out")}};
  return em::launch(kernel, config, out.data());
}

bool mentions(const em::Finding& finding, const std::string& text) {
  return finding.message.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("a launch gives each thread what the fullest register-file quadrant allows") {
  std::vector<float> out;
  for (const auto& [threads, registers] : std::vector<std::pair<int, float>>{
           {128, 255}, {256, 255}, {288, 168}, {384, 168}, {512, 128}, {1024, 64}}) {
    CAPTURE(threads);
    const em::Report report = run(launch_count, out, threads);
    CHECK_MESSAGE(report.clean(), report);
    CHECK(out[0] == registers);
    CHECK(out[static_cast<std::size_t>(threads - 1)] == registers);
  }
}

TEST_CASE("a producer warpgroup's registers go to two consumer warpgroups (384 threads)") {
  std::vector<float> out;
  SUBCASE("40 / 232, FlashAttention-3 with cp.async K/V") {
    const em::Report report = run(producer_and_consumers<40, 232>, out, 3 * kWarpgroup);
    CHECK_MESSAGE(report.clean(), report);
    CHECK(out[5] == 40.0f);
    CHECK(out[kWarpgroup + 9] == 232.0f);
    CHECK(out[2 * kWarpgroup + 127] == 232.0f);
  }
  SUBCASE("24 / 240, FlashAttention-3 with TMA K/V") {
    const em::Report report = run(producer_and_consumers<24, 240>, out, 3 * kWarpgroup);
    CHECK_MESSAGE(report.clean(), report);
    CHECK(out[127] == 24.0f);
    CHECK(out[2 * kWarpgroup] == 240.0f);
  }
}

TEST_CASE("an increase waits until another warpgroup's later decrease frees the registers") {
  std::vector<float> out;
  const em::Report report = run(claim_before_release, out, 3 * kWarpgroup);
  CHECK_MESSAGE(report.clean(), report);
  CHECK(out[kCounterSlot] == 128.0f);
  CHECK(out[kCounterSlot + 1] == 128.0f);  // warpgroup 0 went on after warpgroup 1's release
  CHECK(out[0] == 232.0f);
  CHECK(out[kWarpgroup] == 40.0f);
  CHECK(out[2 * kWarpgroup] == 168.0f);  // warpgroup 2 kept the launch's count
}

TEST_CASE("threads of a warpgroup in setmaxnreg with different counts are reported") {
  std::vector<float> out;
  const em::Report report = run(count_differs_in_thread_37, out, kWarpgroup);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::setmaxnreg_nonuniform) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::setmaxnreg_nonuniform);
  CHECK(finding.thread.x == 37);
  CHECK(finding.other_thread == 0);
  CHECK(mentions(finding, "thread (37,0,0)"));
  CHECK(mentions(finding, "setmaxnreg.dec.sync.aligned.u32 48 in this thread"));
  CHECK(mentions(finding, "thread (0,0,0) of its warpgroup executes setmaxnreg.dec"));
  CHECK(report.findings.size() == 1);
}

TEST_CASE("a warp increasing where its warpgroup decreases is reported") {
  std::vector<float> out;
  const em::Report report = run(warp_2_increases, out, kWarpgroup);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::setmaxnreg_nonuniform) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::setmaxnreg_nonuniform);
  CHECK(finding.thread.x == 64);
  CHECK(mentions(finding, "thread (64,0,0)"));
  CHECK(mentions(finding, "setmaxnreg.inc.sync.aligned.u32 232"));
  CHECK(report.findings.size() == 1);
}

TEST_CASE("a setmaxnreg count that is not a multiple of 8 in 24..256 is reported") {
  std::vector<float> out;
  em::Report report;
  SUBCASE("36") { report = run(decrease_to<36>, out, kWarpgroup); }
  SUBCASE("16") { report = run(decrease_to<16>, out, kWarpgroup); }
  SUBCASE("264") { report = run(increase_to<264>, out, kWarpgroup); }
  INFO(report);
  REQUIRE(report.count(em::FindingKind::setmaxnreg_invalid_count) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::setmaxnreg_invalid_count);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "thread (0,0,0)"));
  CHECK(mentions(finding, "setmaxnreg."));
  CHECK(mentions(finding, "multiple of 8 in 24..256"));
  CHECK(report.findings.size() == 1);
  CHECK(out[0] == 255.0f);  // skipped: the launch's count stays
}

TEST_CASE("consumers asking for more registers than the CTA will ever have deadlock") {
  std::vector<float> out;
  // 40 / 256: the producer frees 16384 (plus 1024 never held), each consumer needs 11264.
  const em::Report report = run(producer_and_consumers<40, 256>, out, 3 * kWarpgroup);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::deadlock) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::deadlock);
  CHECK(finding.thread.x == 2 * kWarpgroup);  // warpgroup 1 got its registers; 2 waits
  CHECK(mentions(finding, "thread (256,0,0)"));
  CHECK(mentions(finding, "waits in setmaxnreg.inc.sync.aligned.u32 256"));
  CHECK(mentions(finding, "for 11264 more registers"));
  CHECK(mentions(finding, "6144 free"));
  CHECK(report.findings.size() == 1);
  CHECK(out[kWarpgroup] == 256.0f);
}

TEST_CASE("setmaxnreg.inc below or .dec above the registers held is reported") {
  std::vector<float> out;
  SUBCASE("inc to 120 holding 168") {
    const em::Report report = run(increase_to<120>, out, 3 * kWarpgroup);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::setmaxnreg_wrong_direction) == 3);  // per warpgroup
    const em::Finding& finding = *report.first(em::FindingKind::setmaxnreg_wrong_direction);
    CHECK(finding.thread.x == 0);
    CHECK(mentions(finding, "thread (0,0,0)"));
    CHECK(mentions(finding, "setmaxnreg.inc.sync.aligned.u32 120 while the warpgroup holds 168"));
    CHECK(out[0] == 168.0f);
  }
  SUBCASE("dec to 200 holding 168") {
    const em::Report report = run(decrease_to<200>, out, 3 * kWarpgroup);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::setmaxnreg_wrong_direction) == 3);
    CHECK(mentions(*report.first(em::FindingKind::setmaxnreg_wrong_direction),
                   ".dec must not raise"));
  }
}

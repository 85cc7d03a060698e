#include "gpu/probe_runner.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <sstream>

#include "api/runtime_parts.hpp"
#include "emulator/launch.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/executor.hpp"

namespace flashjit::testing {
namespace {

namespace em = flashjit::emulator;

// Different poisons on each side, so that a word one side never writes cannot match.
constexpr unsigned kGpuPoison = 0xaaaaaaaau;
constexpr unsigned kEmulatorPoison = 0x55555555u;

/// The GPU, opened once for the whole binary. The probes are test-only templates, not embedded
/// in the library: NVRTC reads them, with the library's templates, from a directory the build
/// assembles (FLASHJIT_PROBE_TEMPLATE_DIR), set before the first compile reads the templates.
Runtime& gpu() {
  static Runtime runtime = [] {
    setenv("FLASHJIT_TEMPLATE_DIR", FLASHJIT_PROBE_TEMPLATE_DIR, 1);
    return Runtime();
  }();
  return runtime;
}

std::size_t out_count(const Probe& probe) {
  return static_cast<std::size_t>(kProbeThreads) * static_cast<std::size_t>(probe.out_words);
}

}  // namespace

Words run_on_gpu(const Probe& probe, const Words& in) {
  Runtime& runtime = gpu();
  const std::size_t in_bytes = in.size() * sizeof(unsigned);
  const std::size_t out_bytes = out_count(probe) * sizeof(unsigned);
  DeviceBuffer in_buffer = runtime.allocate(in_bytes), out_buffer = runtime.allocate(out_bytes);
  runtime.copy_to_device(in_buffer.data(), in.data(), in_bytes);
  const Words poison(out_count(probe), kGpuPoison);
  runtime.copy_to_device(out_buffer.data(), poison.data(), out_bytes);
  const detail::KernelSpec spec{.op = "testing",
                                .header = "testing/primitives.cuh",
                                .name_expression = "flashjit::testing::" + probe.name,
                                .readable_name = probe.readable_name,
                                .options = {},
                                .arch = runtime.device().arch(),
                                .role = "probe"};
  detail::LaunchShape shape;
  shape.block_x = kProbeThreads;
  shape.dynamic_shared_bytes = static_cast<std::size_t>(probe.shared_bytes);
  detail::launch_kernel(detail::backend_of(runtime).executor(), spec, shape, {},
                        static_cast<const unsigned*>(in_buffer.data()),
                        static_cast<unsigned*>(out_buffer.data()));
  runtime.synchronize();
  Words out(out_count(probe));
  runtime.copy_to_host(out.data(), out_buffer.data(), out_bytes);
  return out;
}

Words run_on_emulator(const Probe& probe, const Words& in) {
  Words out(out_count(probe), kEmulatorPoison);
  const em::LaunchConfig config{.kernel_name = probe.readable_name,
                                .grid = {1},
                                .block = {kProbeThreads},
                                .shared_bytes = static_cast<std::size_t>(probe.shared_bytes),
                                .buffers = {em::buffer_of(in.data(), in.size(), "in"),
                                            em::buffer_of(out.data(), out.size(), "out")}};
  const em::Report report = em::launch(probe.host, config, in.data(), out.data());
  REQUIRE_MESSAGE(report.clean(), report);
  return out;
}

void check_words(const Probe& probe, const Words& gpu_out, const Words& emulator_out,
                 const std::function<bool(std::size_t)>& agree) {
  REQUIRE(gpu_out.size() == emulator_out.size());
  const auto words = static_cast<std::size_t>(probe.out_words);
  std::size_t mismatches = 0;
  std::ostringstream first;
  for (std::size_t i = 0; i < gpu_out.size(); ++i) {
    if (agree(i) || ++mismatches > 8) continue;
    first << "\n  thread " << i / words << " word " << i % words << ": gpu 0x" << std::hex
          << gpu_out[i] << ", emulator 0x" << emulator_out[i] << std::dec;
  }
  CHECK_MESSAGE(mismatches == 0, probe.readable_name << ": " << mismatches << " of "
                                                     << gpu_out.size() << " words differ"
                                                     << first.str());
}

void check_bit_exact(const Probe& probe, const Words& in) {
  const Words gpu_out = run_on_gpu(probe, in), emulator_out = run_on_emulator(probe, in);
  check_words(probe, gpu_out, emulator_out,
              [&](std::size_t i) { return gpu_out[i] == emulator_out[i]; });
}

Words random_words(std::mt19937& rng, std::size_t count) {
  Words words(count);
  for (unsigned& word : words) word = static_cast<unsigned>(rng());
  return words;
}

}  // namespace flashjit::testing

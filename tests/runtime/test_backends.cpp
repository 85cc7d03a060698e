// The Runtime's backends: the emulator backend without a GPU (memory, softmax, errors), the
// emulated kernel table (every entry a valid spec of its op, every default the tests need
// present), and on a GPU the cuda executor's spec memo.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/check/attention_reference.hpp"
#include "attention/inference/kvcache_append.hpp"
#include "attention/inference/unused_rows.hpp"
#include "attention/sinks/attention_sinks.hpp"
#include "common/builtin_kernels.hpp"
#include "common/op_registry.hpp"
#include "flashjit/flashjit.hpp"
#include "layer_norm/layer_norm.hpp"
#include "merge_states/merge_states.hpp"
#include "reference/checker.hpp"
#include "runtime/executor.hpp"
#include "runtime/kernel_cache.hpp"
#include "softmax/softmax.hpp"
#include "softmax/softmax_case.hpp"
#include "support/temp_dir.hpp"

#if defined(FLASHJIT_EMULATOR)
#error \
    "FLASHJIT_EMULATOR leaked into a user of flashjit: only the ops' emulated instances may see it"
#endif

using namespace flashjit;

namespace {

Runtime emulator_runtime() { return Runtime(RuntimeOptions{.backend = Backend::emulator}); }

/// Runs softmax of `rows` x `cols` (row stride cols + 3) through `runtime` and checks it.
void check_softmax(Runtime& runtime, DType dtype, std::int64_t rows, std::int64_t cols) {
  const testing::SoftmaxVerdict verdict = testing::run_softmax_case(
      runtime, {.rows = rows, .cols = cols, .dtype = dtype, .scale = 0.7f});
  CHECK_MESSAGE(verdict.ok, verdict.y);
}

/// Every spec the ops' spaces can render for the emulator's arch: the softmax, merge and layer
/// norm spaces and every forward and backward config of every supported head dim.
std::set<std::string> every_valid_name_expression() {
  std::set<std::string> names;
  for (const kernels::SoftmaxConfig& config : kernels::softmax_configs()) {
    names.insert(kernels::softmax_spec(config, detail::kEmulatorArch).name_expression);
  }
  for (const kernels::MergeStatesConfig& config : kernels::merge_states_configs()) {
    names.insert(kernels::merge_states_spec(config, detail::kEmulatorArch).name_expression);
  }
  for (const char* arch : {detail::kEmulatorArch, "sm_90a"}) {  // sm_90a: + the cluster splits
    for (const detail::KernelSpec& spec :
         kernels::find_op("layer-norm").specs(arch, kernels::SpecSet::all)) {
      names.insert(spec.name_expression);
    }
  }
  for (const detail::KernelSpec& spec : kernels::kvcache_append_specs(detail::kEmulatorArch)) {
    names.insert(spec.name_expression);
  }
  for (const detail::KernelSpec& spec : kernels::unused_rows_specs(detail::kEmulatorArch)) {
    names.insert(spec.name_expression);
  }
  for (const detail::KernelSpec& spec : kernels::sinks_specs(detail::kEmulatorArch)) {
    names.insert(spec.name_expression);
  }
  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
        for (bool softcap : {false, true}) {
          for (const kernels::ForwardConfig& config :
               kernels::forward_configs(dtype, head_dim, mask, softcap)) {
            if (config.shared_bytes() > kernels::arch_shared_memory_limit(detail::kEmulatorArch) ||
                !kernels::runs_on(config, detail::kEmulatorArch))
              continue;
            names.insert(kernels::forward_spec(config, detail::kEmulatorArch).name_expression);
          }
          for (bool deterministic : {false, true}) {
            for (const kernels::BackwardConfig& config :
                 kernels::backward_configs(dtype, head_dim, mask, softcap, deterministic)) {
              if (config.shared_bytes() >
                      kernels::arch_shared_memory_limit(detail::kEmulatorArch) ||
                  !kernels::runs_on(config, detail::kEmulatorArch)) {
                continue;
              }
              for (const auto& spec :
                   kernels::backward_specs(config, detail::kEmulatorArch).in_order()) {
                names.insert(spec.name_expression);
              }
            }
          }
        }
      }
    }
  }
  return names;
}

/// Whether the table holds exactly the spec `config` renders for the emulator.
bool has_forward(const kernels::ForwardConfig& config) {
  const detail::KernelSpec spec = kernels::forward_spec(config, detail::kEmulatorArch);
  const detail::EmulatedKernel* entry =
      kernels::emulated::builtin_kernels().find(spec.name_expression);
  return entry != nullptr && entry->spec == spec;
}

/// Whether the table holds exactly every spec the backward of `config` launches.
bool has_backward(const kernels::BackwardConfig& config) {
  if (!kernels::runs_on(config, detail::kEmulatorArch)) return false;  // TMA: built on first use
  const std::vector<detail::KernelSpec> all =
      kernels::backward_specs(config, detail::kEmulatorArch).in_order();
  return std::all_of(all.begin(), all.end(), [](const detail::KernelSpec& spec) {
    const detail::EmulatedKernel* entry =
        kernels::emulated::builtin_kernels().find(spec.name_expression);
    return entry != nullptr && entry->spec == spec;
  });
}

}  // namespace

TEST_CASE("the emulator backend opens without a GPU and describes the sm_80 it models") {
  Runtime runtime = emulator_runtime();
  CHECK(runtime.backend() == Backend::emulator);
  CHECK(runtime.device().name == "flashjit CPU emulator");
  CHECK(runtime.device().arch() == detail::kEmulatorArch);
  CHECK(runtime.device().shared_memory_optin == 163 * 1024);
  CHECK(runtime.device().sm_count > 0);
}

TEST_CASE("emulator memory: aligned host memory, copies are round trips") {
  Runtime runtime = emulator_runtime();
  DeviceBuffer empty = runtime.allocate(0);
  CHECK(empty.data() != nullptr);
  std::vector<unsigned char> input(1000), output(1000);
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<unsigned char>(i * 7);
  DeviceBuffer buffer = runtime.allocate(input.size());
  CHECK(reinterpret_cast<std::uintptr_t>(buffer.data()) % 256 == 0);
  CHECK(buffer.size() == input.size());
  runtime.copy_to_device(buffer.data(), input.data(), input.size());
  DeviceBuffer moved = std::move(buffer);
  runtime.synchronize();
  runtime.copy_to_host(output.data(), moved.data(), output.size());
  CHECK(output == input);

  // Stream-ordered memory: the same round trip, and moving keeps its stream-ordered release.
  DeviceBuffer ordered = runtime.allocate_on_stream(input.size(), nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(ordered.data()) % 256 == 0);
  runtime.copy_to_device(ordered.data(), input.data(), input.size());
  DeviceBuffer ordered_moved = std::move(ordered);
  CHECK(ordered.data() == nullptr);
  std::fill(output.begin(), output.end(), 0);
  runtime.copy_to_host(output.data(), ordered_moved.data(), output.size());
  CHECK(output == input);
}

TEST_CASE("softmax through the emulator backend matches the reference") {
  Runtime runtime = emulator_runtime();
  for (DType dtype : {DType::f16, DType::bf16, DType::f32}) {
    for (std::int64_t cols : {1, 100, 1000, 5000}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(cols);
      check_softmax(runtime, dtype, 9, cols);
    }
  }
}

namespace {

/// Launches the softmax at 96 columns, a spec the emulator was not built with, on `runtime`
/// (whose host toolchain the caller broke) and returns the Error the launch throws.
Error unbuilt_softmax_error(Runtime& runtime) {
  detail::KernelSpec spec = kernels::softmax_spec({DType::f32, 128, 32}, runtime.device().arch());
  spec.name_expression = "flashjit::softmax_kernel<flashjit::SoftmaxConfig<float, 96, 32>>";
  spec.readable_name = "softmax.fp32.cols96.t32";
  float data[4] = {};
  try {
    detail::launch_kernel(detail::backend_of(runtime).executor(), spec, {},
                          {{data, sizeof(data), "x"}}, 0);
  } catch (const Error& error) {
    return error;
  }
  throw std::logic_error("the launch of a spec the emulator was not built with threw no error");
}

}  // namespace

TEST_CASE("a spec the emulator was not built with, and no host compiler: an error that says how") {
  // Without a host compiler the emulator runs only its build-time kernels.
  testing::ScopedEnv no_compiler("FLASHJIT_HOST_CXX", "/nonexistent/c++");
  Runtime runtime = emulator_runtime();
  const Error error = unbuilt_softmax_error(runtime);
  const std::string message = error.what();
  CHECK(error.kind() == ErrorKind::unsupported);
  CHECK(message.find("softmax.fp32.cols96.t32") != std::string::npos);
  CHECK(message.find("flashjit::softmax_kernel<flashjit::SoftmaxConfig<float, 96, 32>>") !=
        std::string::npos);
  CHECK(message.find("FLASHJIT_HOST_CXX is '/nonexistent/c++'") != std::string::npos);
  CHECK(message.find("Set FLASHJIT_HOST_CXX to a C++20 compiler") != std::string::npos);
  CHECK(message.find("nearest:\n  softmax.fp32.cols128.t32") != std::string::npos);
}

TEST_CASE("a compiler but no emulator archive: the error asks for the archive, not a compiler") {
  testing::ScopedEnv no_archive("FLASHJIT_EMULATOR_LIBRARY", "/nonexistent/libflashjit_emulator.a");
  Runtime runtime = emulator_runtime();
  const std::string message = unbuilt_softmax_error(runtime).what();
  CHECK(message.find("FLASHJIT_EMULATOR_LIBRARY is '/nonexistent/libflashjit_emulator.a'") !=
        std::string::npos);
  CHECK(message.find("Set FLASHJIT_EMULATOR_LIBRARY to the emulator's archive") !=
        std::string::npos);
  CHECK(message.find("FLASHJIT_HOST_CXX") == std::string::npos);
}

TEST_CASE("the nearest kernels the error lists are the nearest head dims") {
  Runtime runtime = emulator_runtime();
  const std::string arch = runtime.device().arch();
  // Head dim 88 is not built for the emulator; 80 and 96 are.
  const kernels::ForwardConfig config =
      kernels::default_forward_config(DType::bf16, 88, MaskKind::none, false, arch);
  const detail::KernelSpec spec = kernels::forward_spec(config, arch);
  REQUIRE(kernels::emulated::builtin_kernels().find(spec.name_expression) == nullptr);
  const std::string message = detail::missing_kernel_message(
      kernels::emulated::builtin_kernels(), spec, "no compiler", "Set FLASHJIT_HOST_CXX");
  const std::string listed = message.substr(message.find("nearest:"));
  std::istringstream lines(listed);
  std::string line;
  std::getline(lines, line);  // "nearest:"
  for (int i = 0; i < 6 && std::getline(lines, line); ++i) {
    CAPTURE(line);
    CHECK(
        (line.find(".hdim80.") != std::string::npos || line.find(".hdim96.") != std::string::npos));
  }
  // Among the equally near, those sharing the dtype and mask (and the tiles) come first.
  std::istringstream again(listed);
  std::getline(again, line);  // "nearest:"
  std::getline(again, line);
  CHECK(line == "  attention_forward.hdim80.bf16.br128.bc64.w4.s2");
}

TEST_CASE("an emulator finding in a launch is an error that names the buffer") {
  Runtime runtime = emulator_runtime();
  const kernels::SoftmaxConfig config{DType::f32, 128, 32};
  constexpr long long kRows = 4, kCols = 128;
  std::vector<float> x(kRows * kCols, 1.0f), y(kRows * kCols);
  detail::LaunchShape shape;
  shape.block_x = 128;  // four rows of 32 threads
  // y is registered two rows short, as if the op had sized it wrong: the kernel's writes to
  // rows 2 and 3 are out of bounds (and skipped by the emulator).
  const std::vector<detail::KernelBuffer> buffers = {{x.data(), x.size() * sizeof(float), "x"},
                                                     {y.data(), y.size() * sizeof(float) / 2, "y"}};
  try {
    detail::launch_kernel(detail::backend_of(runtime).executor(),
                          kernels::softmax_spec(config, "sm_80"), shape, buffers,
                          static_cast<const float*>(x.data()), y.data(), kRows,
                          static_cast<int>(kCols), kCols, kCols, 1.0f);
    FAIL("expected an error");
  } catch (const Error& error) {
    CHECK(error.kind() == ErrorKind::kernel_fault);
    const std::string message = error.what();
    CHECK(message.find("global_out_of_bounds") != std::string::npos);
    CHECK(message.find("'y'") != std::string::npos);
    CHECK(message.find("softmax.fp32.cols128.t32.sm80") != std::string::npos);
  }
}

TEST_CASE("the emulator models sm_80, sm_89 or sm_90a, and names any other arch asked of it") {
  CHECK(emulator_runtime().device().arch() == "sm_80");
  Runtime hopper(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_90a"});
  CHECK(hopper.device().arch() == "sm_90a");
  CHECK(hopper.device().shared_memory_optin == 227 * 1024);
  Runtime ada(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_89"});
  CHECK(ada.device().arch() == "sm_89");
  CHECK(ada.device().shared_memory_optin == 99 * 1024);
  try {
    Runtime bad(RuntimeOptions{.backend = Backend::emulator, .emulated_arch = "sm_100a"});
    FAIL("expected an error");
  } catch (const InvalidArgument& error) {
    CHECK(error.argument() == "emulated_arch");
    CHECK(std::string(error.what()).find("sm_80 (A100), sm_89 (L40S) and sm_90a (H100)") !=
          std::string::npos);
  }
}

TEST_CASE("every emulated kernel is a valid spec of its op for the emulator's arch") {
  const std::set<std::string> valid = every_valid_name_expression();
  const detail::EmulatedKernelTable& table = kernels::emulated::builtin_kernels();
  CHECK(table.kernels().size() >= 33);
  for (const detail::EmulatedKernel& kernel : table.kernels()) {
    CAPTURE(kernel.spec.name_expression);
    CHECK(kernel.spec.arch == detail::kEmulatorArch);
    CHECK(bool(kernel.launch));
    CHECK(valid.contains(kernel.spec.name_expression));
    CHECK(table.find(kernel.spec.name_expression) == &kernel);
  }
}

TEST_CASE("the emulated kernel table has every merge_states config, both forms") {
  for (const kernels::MergeStatesConfig& config : kernels::merge_states_configs()) {
    const detail::KernelSpec spec = kernels::merge_states_spec(config, detail::kEmulatorArch);
    const detail::EmulatedKernel* entry =
        kernels::emulated::builtin_kernels().find(spec.name_expression);
    CAPTURE(spec.name_expression);
    REQUIRE(entry != nullptr);
    CHECK(entry->spec == spec);
  }
}

TEST_CASE("the emulated kernel table has every layer_norm kernel, forward and backward") {
  const auto specs =
      kernels::find_op("layer-norm").specs(detail::kEmulatorArch, kernels::SpecSet::all);
  CHECK(specs.size() == 2 * kernels::layer_norm_configs().size() + 3);
  for (const detail::KernelSpec& spec : specs) {
    const detail::EmulatedKernel* entry =
        kernels::emulated::builtin_kernels().find(spec.name_expression);
    CAPTURE(spec.name_expression);
    REQUIRE(entry != nullptr);
    CHECK(entry->spec == spec);
  }
}

TEST_CASE("the emulated kernel table has every softmax config") {
  for (const kernels::SoftmaxConfig& config : kernels::softmax_configs()) {
    const detail::KernelSpec spec = kernels::softmax_spec(config, detail::kEmulatorArch);
    const detail::EmulatedKernel* entry =
        kernels::emulated::builtin_kernels().find(spec.name_expression);
    CHECK_MESSAGE((entry != nullptr && entry->spec == spec), spec.readable_name);
  }
}

TEST_CASE("the emulated kernel table has the forward configs the tests use") {
  const std::string arch = detail::kEmulatorArch;
  for (int head_dim : {8, 16, 32, 40, 64, 80, 96, 128, 256}) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
        const auto config = kernels::default_forward_config(dtype, head_dim, mask, false, arch);
        CHECK_MESSAGE(has_forward(config), kernels::forward_spec(config, arch).readable_name);
      }
    }
  }
  for (int head_dim : {64, 128}) {
    for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
      const auto softcap = kernels::default_forward_config(DType::bf16, head_dim, mask, true, arch);
      CHECK_MESSAGE(has_forward(softcap), kernels::forward_spec(softcap, arch).readable_name);
      int present = 0;  // the default and the alternatives
      for (const auto& config : kernels::forward_configs(DType::bf16, head_dim, mask, false)) {
        if (kernels::runs_on(config, arch)) present += has_forward(config) ? 1 : 0;
      }
      CAPTURE(head_dim);
      CHECK(present >= 4);
    }
  }
}

TEST_CASE("the emulated kernel table has the backward configs the tests use") {
  const std::string arch = detail::kEmulatorArch;
  auto name = [&](const kernels::BackwardConfig& config) {
    const kernels::BackwardSpecs specs = kernels::backward_specs(config, arch);
    return specs.dkdv.readable_name + " + " + specs.dq.readable_name;
  };
  for (bool deterministic : {false, true}) {
    for (int head_dim : {8, 40, 64, 128, 256}) {
      for (DType dtype : {DType::f16, DType::bf16}) {
        for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
          const auto config =
              kernels::default_backward_config(dtype, head_dim, mask, false, deterministic, arch);
          CHECK_MESSAGE(has_backward(config), name(config));
        }
      }
    }
    for (int head_dim : {64, 128}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::window}) {
        const auto softcap = kernels::default_backward_config(DType::bf16, head_dim, mask, true,
                                                              deterministic, arch);
        CHECK_MESSAGE(has_backward(softcap), name(softcap));
        // The tests sweep more than the default: every config of the space the table holds.
        int held = 0;
        for (const auto& config :
             kernels::backward_configs(DType::bf16, head_dim, mask, false, deterministic)) {
          held += has_backward(config) ? 1 : 0;
        }
        CAPTURE(head_dim);
        CAPTURE(deterministic);
        CHECK(held >= 2);
      }
    }
  }
}

TEST_CASE("the cuda executor finds a launched spec again without its cache key") {
  if (query_system().devices.empty()) return;  // needs a GPU
  Runtime runtime;
  check_softmax(runtime, DType::f32, 4, 100);  // loads the kernel
  const int lookups = detail::KernelCache::process_cache().stats().memory_hits +
                      detail::KernelCache::process_cache().stats().disk_hits +
                      detail::KernelCache::process_cache().stats().compiles;
  check_softmax(runtime, DType::f32, 4, 100);
  CHECK(detail::KernelCache::process_cache().stats().memory_hits +
            detail::KernelCache::process_cache().stats().disk_hits +
            detail::KernelCache::process_cache().stats().compiles ==
        lookups);
}

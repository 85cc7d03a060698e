// `flashjit bench`, attention's own subcommand (OpCommands::add_commands): times one attention
// op on random inputs on the GPU the way the autotuner does (autotune::time_launches: warm-up,
// median of repeated runs, L2 flushed before each run) and prints milliseconds and TFLOP/s;
// or, with --first-result, the time to the first result of one forward call in this fresh
// process (with no GPU and --arch: the part of it that needs no GPU, obtaining the kernel).
// Result lines start with a key and a number so that scripts can grep them
// (bench/first_result.sh does).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/runtime_parts.hpp"
#include "attention/attention_backward.hpp"
#include "attention/attention_calls.hpp"
#include "attention/attention_forward.hpp"
#include "attention/attention_tuning.hpp"
#include "attention/check/attention_run.hpp"
#include "attention/check/host_path.hpp"
#include "autotune/timer.hpp"
#include "chosen_kernels.hpp"
#include "commands.hpp"
#include "flashjit/attention.hpp"
#include "flashjit/device.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/runtime_backend.hpp"

namespace flashjit::tools {
namespace {

constexpr const char* kForward = "attention-forward";
constexpr const char* kBackward = "attention-backward";

struct BenchOptions {
  std::string op;  // kForward or kBackward; empty with --first-result (always the forward)
  std::int64_t head_dim = 128;
  std::int64_t seqlen = 4096;  // both query and key length
  std::int64_t batch = 4;
  std::int64_t heads = 16;
  std::int64_t heads_kv = 0;  // 0: as many as query heads
  std::string dtype = "bf16";
  bool causal = false;
  bool first_result = false;
  std::string arch;  // --first-result without a GPU: the target to obtain the kernel for
  double budget_ms = autotune::TimingOptions{}.budget_ms;
  std::uint64_t seed = 1;
  std::string config;  // a config of the op's space by name; empty: the runtime's choice
};

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// The problem the options describe, validated (InvalidArgument naming the option otherwise).
Attention bench_attention(const BenchOptions& options) {
  if (!attention_forward_space::head_dim_supported(static_cast<int>(options.head_dim))) {
    throw InvalidArgument("--head-dim", "must be a multiple of 8 from 8 to 256");
  }
  Attention attention;
  attention.batch = options.batch;
  attention.heads_q = options.heads;
  attention.heads_kv = options.heads_kv > 0 ? options.heads_kv : options.heads;
  attention.seqlen_q = options.seqlen;
  attention.seqlen_k = options.seqlen;
  attention.head_dim = options.head_dim;
  attention.causal = options.causal;
  if (attention.heads_q % attention.heads_kv != 0) {
    throw InvalidArgument("--heads-kv",
                          "must divide --heads (" + std::to_string(attention.heads_q) + ")");
  }
  return attention;
}

/// --dtype's: bf16 or f16, or e4m3 (the fp8 forward: e4m3 q, k, v, bf16 o; not `backward`).
DType bench_dtype(const std::string& name, bool backward) {
  const DType dtype = parse_dtype(name, "--dtype");
  if (dtype == DType::f32) {
    throw InvalidArgument("--dtype", "attention runs in bf16 or f16 (e4m3: the fp8 forward)");
  }
  if (dtype == DType::e4m3 && backward) {
    throw InvalidArgument("--dtype", "is e4m3, the fp8 forward's; it has no backward");
  }
  return dtype;
}

std::string describe(const Attention& a, DType dtype) {
  return "batch " + std::to_string(a.batch) + ", heads " + std::to_string(a.heads_q) + " (kv " +
         std::to_string(a.heads_kv) + "), seqlen " + std::to_string(a.seqlen_q) + ", head_dim " +
         std::to_string(a.head_dim) + ", " + std::string(dtype_name(dtype)) +
         (a.causal ? ", causal" : "");
}

// ---- inputs ----------------------------------------------------------------------------------

/// Uniform values in [-1, 1) rounded to `dtype` (bf16, f16 or e4m3), as its bytes, from a
/// splitmix64 stream (fast enough for the hundreds of millions of elements a large shape has;
/// zeros rare, which would flatter the kernel's power draw and clocks).
std::vector<unsigned char> random_values(std::size_t count, DType dtype, std::uint64_t seed) {
  std::vector<unsigned char> bytes(count * dtype_size(dtype));
  std::uint64_t state = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const float x = static_cast<float>(z >> 40) * 0x1p-23f - 1.0f;  // [-1, 1)
    if (dtype == DType::e4m3) {
      bytes[i] = e4m3_bits_from_float(x);
      continue;
    }
    const std::uint16_t bits =
        dtype == DType::bf16 ? bf16_bits_from_float(x) : f16_bits_from_float(x);
    std::memcpy(&bytes[2 * i], &bits, 2);
  }
  return bytes;
}

/// The device tensors of one call, [B, L, H, D] memory; the gradients only for the backward.
struct Tensors {
  std::vector<DeviceBuffer> buffers;
  TensorView q, k, v, o, lse, dout, dq, dk, dv;
};

Tensors make_tensors(Runtime& runtime, const Attention& a, DType dtype, bool backward,
                     std::uint64_t seed) {
  Tensors t;
  auto tensor = [&](std::int64_t heads, bool random, DType type) {
    const std::size_t count = static_cast<std::size_t>(a.batch * a.seqlen_q * heads * a.head_dim);
    t.buffers.push_back(runtime.allocate(count * dtype_size(type)));
    void* data = t.buffers.back().data();
    if (random) {
      const std::vector<unsigned char> host = random_values(count, type, seed++);
      runtime.copy_to_device(data, host.data(), host.size());
    }
    return attention_tensor(data, type, Layout::bshd, a.batch, a.seqlen_q, heads, a.head_dim);
  };
  t.q = tensor(a.heads_q, true, dtype);
  t.k = tensor(a.heads_kv, true, dtype);
  t.v = tensor(a.heads_kv, true, dtype);
  t.o = tensor(a.heads_q, false, dtype == DType::e4m3 ? DType::bf16 : dtype);  // fp8: o bf16
  const std::size_t lse_count = static_cast<std::size_t>(a.batch * a.heads_q * a.seqlen_q);
  t.buffers.push_back(runtime.allocate(lse_count * sizeof(float)));
  t.lse = lse_tensor(static_cast<float*>(t.buffers.back().data()), a);
  if (backward) {
    t.dout = tensor(a.heads_q, true, dtype);
    t.dq = tensor(a.heads_q, false, dtype);
    t.dk = tensor(a.heads_kv, false, dtype);
    t.dv = tensor(a.heads_kv, false, dtype);
  }
  return t;
}

// ---- timing an op ----------------------------------------------------------------------------

/// One call of the op on `t`: the runtime's own choice, or the config `named`.
void launch_op(Runtime& runtime, const Attention& a, const Tensors& t, bool backward,
               const std::optional<autotune::TunedConfig>& named, Stream stream) {
  detail::RuntimeBackend& backend = detail::backend_of(runtime);
  if (backward && named) {
    kernels::attention_backward(backend, a, t.q, t.k, t.v, t.o, t.lse, t.dout, t.dq, t.dk, t.dv,
                                named->get<kernels::BackwardConfig>(), stream);
  } else if (backward) {
    runtime.backward(a, t.q, t.k, t.v, t.o, t.lse, t.dout, t.dq, t.dk, t.dv, stream);
  } else if (named) {
    kernels::attention_forward(backend, a, t.q, t.k, t.v, t.o, t.lse,
                               named->get<kernels::ForwardConfig>(), stream);
  } else {
    runtime.forward(a, t.q, t.k, t.v, t.o, t.lse, stream);
  }
}

/// Whether there is a GPU to run on; if not, says so and why in one line on stderr.
bool have_gpu(const char* what) {
  const SystemInfo system = query_system();
  if (!system.devices.empty()) return true;
  std::fprintf(stderr, "flashjit: error: %s needs a GPU and there is none here (%s)\n", what,
               system.unavailable_reason.c_str());
  return false;
}

int bench_op(const BenchOptions& options) {
  if (options.op.empty()) {
    throw InvalidArgument("--op",
                          "required: attention-forward or attention-backward "
                          "(or --first-result)");
  }
  if (!options.arch.empty()) {
    throw InvalidArgument("--arch", "only applies to --first-result; timing runs on GPU 0");
  }
  const Attention attention = bench_attention(options);
  const bool backward = options.op == kBackward;
  const DType dtype = bench_dtype(options.dtype, backward);
  const kernels::AttentionProblem problem(backward, dtype, attention);
  std::optional<autotune::TunedConfig> named;
  if (!options.config.empty()) named = named_config(problem, options.config, "--config");
  if (!have_gpu("flashjit bench")) return 1;
  Runtime runtime;
  const DeviceInfo& gpu = runtime.device();
  std::printf("bench:   %s, %s\n", options.op.c_str(), describe(attention, dtype).c_str());
  std::printf("device:  GPU 0, %s (%s)\n", gpu.name.c_str(), gpu.arch().c_str());
  std::printf("kernels: %s\n", chosen_kernels(runtime, problem, named).c_str());
  std::printf("preparing random inputs...\n");
  std::fflush(stdout);
  Tensors t = make_tensors(runtime, attention, dtype, backward, options.seed);
  // The backward's o and lse come from the forward on the same inputs, as in training.
  if (backward) runtime.forward(attention, t.q, t.k, t.v, t.o, t.lse);
  runtime.synchronize();
  autotune::TimingOptions timing;
  timing.budget_ms = options.budget_ms;
  std::printf("timing (warm-up %d, then %d to %d runs within %.0f ms, L2 flushed)...\n",
              timing.warmup_runs, timing.min_runs, timing.max_runs, timing.budget_ms);
  std::fflush(stdout);
  const autotune::Timing result = autotune::time_launches(
      detail::backend_of(runtime),
      [&](Stream stream) { launch_op(runtime, attention, t, backward, named, stream); }, timing);
  // FlashAttention's FLOP count (the tuning problem's), as `flashjit autotune` reports.
  const double flops = problem.flops();
  const double tflops = flops / (result.median_ms * 1e-3) / 1e12;
  std::printf("time_ms %.4f min_ms %.4f runs %d\n", result.median_ms, result.min_ms, result.runs);
  std::printf("tflops %.2f\n", tflops);
  return 0;
}

// ---- time to first result --------------------------------------------------------------------

struct StatsSnapshot {
  int memory_hits, disk_hits, compiles;
};

StatsSnapshot snapshot() {
  const detail::CacheStats& stats = detail::KernelCache::process_cache().stats();
  return {stats.memory_hits.load(), stats.disk_hits.load(), stats.compiles.load()};
}

/// Where the kernels a call obtained between two snapshots came from: "compiled" if any was
/// compiled, else "disk" if any was read from disk, else "memory" (the process's kernel cache,
/// or the runtime's own table of loaded kernels, which does not touch the cache).
const char* source_between(const StatsSnapshot& before, const StatsSnapshot& after) {
  if (after.compiles > before.compiles) return "compiled";
  if (after.disk_hits > before.disk_hits) return "disk";
  return "memory";
}

void print_cache_dir() {
  const detail::DiskCache* disk = detail::KernelCache::process_cache().disk();
  std::printf("cache:   %s\n", disk ? disk->root().c_str() : "memory only");
}

/// On a GPU: the wall time of the first Runtime::forward + synchronize of this process (the
/// kernel compiled, read from disk or found in memory, loaded, launched, finished), then of an
/// identical second call.
int first_result_on_gpu(const Attention& attention, DType dtype, std::uint64_t seed) {
  auto start = std::chrono::steady_clock::now();
  Runtime runtime;
  const double open_ms = elapsed_ms(start);
  const DeviceInfo& gpu = runtime.device();
  std::printf("device:  GPU 0, %s (%s)\n", gpu.name.c_str(), gpu.arch().c_str());
  std::printf("preparing random inputs (not timed)...\n");
  std::fflush(stdout);
  Tensors t = make_tensors(runtime, attention, dtype, false, seed);
  runtime.synchronize();
  std::printf("runtime_open_ms %.1f (driver and context, before the calls; not included)\n",
              open_ms);
  const char* labels[] = {"first_result_ms", "second_result_ms"};
  const char* notes[] = {"first Runtime::forward + synchronize in this process",
                         "an identical second call"};
  // No kernel was looked up before the first call, so its counters start at zero; reading
  // them now would set up the process's kernel cache outside the timed call.
  StatsSnapshot before{0, 0, 0};
  for (int call = 0; call < 2; ++call) {
    start = std::chrono::steady_clock::now();
    runtime.forward(attention, t.q, t.k, t.v, t.o, t.lse);
    runtime.synchronize();
    const double ms = elapsed_ms(start);
    const StatsSnapshot after = snapshot();
    std::printf("%s %.3f source=%s (%s)\n", labels[call], ms, source_between(before, after),
                notes[call]);
    std::fflush(stdout);
    before = after;
  }
  // Asked only now: choose_config's database read is part of what the first call timed.
  std::printf("kernel:  %s\n",
              chosen_kernels(runtime, kernels::AttentionProblem(false, dtype, attention)).c_str());
  print_cache_dir();
  return 0;
}

/// Without a GPU: the time to obtain the forward kernel Runtime::forward would use on `arch`
/// (KernelCache::get: memory, else disk, else NVRTC), twice in this process. Nothing is
/// launched, so this is a lower bound of the time to first result on such a GPU.
int first_result_without_gpu(const Attention& attention, DType dtype, const std::string& arch,
                             const std::string& why) {
  const detail::KernelSpec spec = kernels::forward_spec(
      kernels::default_forward_config(dtype, static_cast<int>(attention.head_dim),
                                      kernels::forward_mask_kind(attention), false, arch),
      arch);
  std::printf("device:  none (%s)\n", why.c_str());
  std::printf(
      "note:    no launch was timed: only obtaining the forward kernel for %s "
      "(memory, disk or NVRTC), the part of the first call that needs no GPU\n",
      arch.c_str());
  std::printf("kernel:  %s (heuristic default: without a GPU the tuning database is not read)\n",
              spec.display_name().c_str());
  std::fflush(stdout);
  const char* labels[] = {"kernel_ready_ms", "kernel_ready_again_ms"};
  const char* notes[] = {"first KernelCache get in this process, no launch",
                         "second get in the same process, no launch"};
  for (int call = 0; call < 2; ++call) {
    const auto start = std::chrono::steady_clock::now();
    const detail::CacheLookup lookup = detail::KernelCache::process_cache().get(spec);
    const double ms = elapsed_ms(start);
    std::printf("%s %.3f source=%s (%s)\n", labels[call], ms,
                detail::cache_source_name(lookup.source), notes[call]);
    std::fflush(stdout);
  }
  constexpr int kCalls = 20000;
  std::printf(
      "host_path_us %.3f (Runtime::forward's host work with the kernel cached: validation, "
      "config choice, spec, params, grid, TMA maps described; mean of %d calls; the driver's "
      "function lookup, map encoding and launch not included)\n",
      forward_host_path_us(attention, dtype, arch, kCalls), kCalls);
  if (dtype == DType::e4m3) {  // (the fp8 forward is dense only: no decoding)
    print_cache_dir();
    return 0;
  }
  std::printf(
      "decode_host_path_us %.3f (Runtime::forward_sequences' host work decoding one token a "
      "sequence at this shape's batch, heads and context on pages of 16, the kernel cached: "
      "validation, config and splits, params, held counters and workspace, launch arguments; "
      "mean of %d calls; the driver's launch not included)\n",
      decode_host_path_us(attention, dtype, arch, kCalls), kCalls);
  print_cache_dir();
  return 0;
}

int first_result(const BenchOptions& options) {
  if (!options.op.empty() && options.op != kForward) {
    throw InvalidArgument("--op", "--first-result measures attention-forward; leave --op out");
  }
  if (!options.config.empty()) {
    throw InvalidArgument("--config", "--first-result times the runtime's own choice");
  }
  if (!options.arch.empty()) {
    try {
      detail::validate_arch(options.arch);
    } catch (const InvalidArgument&) {
      throw InvalidArgument(
          "--arch", "must look like sm_80 or sm_90a (sm_80 or newer), not '" + options.arch + "'");
    }
  }
  const Attention attention = bench_attention(options);
  const DType dtype = bench_dtype(options.dtype, false);
  std::printf("first result: %s, %s\n", kForward, describe(attention, dtype).c_str());
  const SystemInfo system = query_system();
  if (!system.devices.empty()) {
    const std::string gpu_arch = system.devices.front().arch();
    if (!options.arch.empty() && options.arch != gpu_arch) {
      throw InvalidArgument("--arch", options.arch + " is not GPU 0's arch (" + gpu_arch +
                                          "); leave --arch out on a GPU");
    }
    return first_result_on_gpu(attention, dtype, options.seed);
  }
  if (options.arch.empty()) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "flashjit: error: no GPU here (%s); pass --arch (e.g. --arch sm_90a) to time "
                 "obtaining the kernel without a launch\n",
                 system.unavailable_reason.c_str());
    return 1;
  }
  return first_result_without_gpu(attention, dtype, options.arch, system.unavailable_reason);
}

}  // namespace

Subcommand add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Time an attention op on random inputs on the GPU (ms, TFLOP/s), or with --first-result "
      "the time to the first result of one forward call in a fresh process");
  bench->add_option("--op", options->op, "attention-forward or attention-backward")
      ->check(CLI::IsMember({kForward, kBackward}));
  bench->add_option("--head-dim", options->head_dim, "Head dimension: a multiple of 8 up to 256")
      ->check(CLI::PositiveNumber);
  bench->add_option("--seqlen", options->seqlen, "Query and key length")
      ->check(CLI::PositiveNumber);
  bench->add_option("--batch", options->batch, "Batch size")->check(CLI::PositiveNumber);
  bench->add_option("--heads", options->heads, "Query heads")->check(CLI::PositiveNumber);
  bench->add_option("--heads-kv", options->heads_kv, "Key/value heads (default: --heads)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--dtype", options->dtype,
                    "bf16 or f16; e4m3 for the fp8 forward (e4m3 q, k, v, bf16 o)");
  bench->add_flag("--causal", options->causal, "Causal mask");
  bench->add_flag("--first-result", options->first_result,
                  "Time the first forward call of this process (kernel compile or load "
                  "included), then a second one");
  bench->add_option("--arch", options->arch,
                    "With --first-result and no GPU: the target (e.g. sm_90a) to obtain the "
                    "kernel for; no launch is timed");
  bench
      ->add_option("--budget-ms", options->budget_ms,
                   "Stop adding timed runs once their total passes this")
      ->check(CLI::PositiveNumber);
  bench->add_option("--seed", options->seed, "Seed of the random inputs");
  bench->add_option("--config", options->config,
                    "This config of the op's space instead of the runtime's choice, named as "
                    "`flashjit autotune --plan` prints it (e.g. br128.bc64.w8.s2.fp8, the fp8 "
                    "forward's mma.sync form)");
  return {bench, [options] {
            return options->first_result ? first_result(*options) : bench_op(*options);
          }};
}

}  // namespace flashjit::tools

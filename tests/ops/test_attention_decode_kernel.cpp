// The decode kernel (ops/attention/decode/): decoding calls run on it, on every cache form it
// takes (dense and paged caches with pages of 1 to 64 keys, fp8 caches, cache rows and left
// pads, appends with rotary, GQA groups and speculative tokens, splits merged in the launch),
// each sequence against its float64 reference; the memory model's evidence that it keeps HBM
// busy (bytes in flight per SM, full sectors, each K/V byte read once); and its PTX: no global
// load in the main loop, so no copy waits on one.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_forward.hpp"
#include "attention/check/inference_case.hpp"
#include "attention/inference/attention_inference.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "attention/inference/kvcache_append.hpp"
#include "autotune/tuning_state.hpp"
#include "common/builtin_kernels.hpp"
#include "merge_states/merge_states.hpp"
#include "runtime/compiler.hpp"
#include "runtime/forwarding_backend.hpp"
#include "runtime/template_sources.hpp"
#include "support/emulator_runtime.hpp"
#include "support/ptx_loops.hpp"
#include "support/recording_backend.hpp"

namespace flashjit::testing {
namespace {

/// Runs `c` on `runtime` and checks it against its reference; returns the kernels that ran.
std::vector<KernelWork> check_decode(Runtime& runtime, const InferenceCase& c) {
  INFO(c.name());
  runtime.reset_emulated_work();
  const InferenceVerdict verdict = run_inference_case(runtime, c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  return runtime.emulated_work();
}

/// Whether the attention of `work` ran on the decode kernel, with no merge launch after it.
bool decoded_in_one_launch(const std::vector<KernelWork>& work) {
  int decode = 0, merges = 0;
  for (const KernelWork& kernel : work) {
    if (kernel.kernel.starts_with("attention_forward") &&
        kernel.kernel.find(".decode.") != std::string::npos) {
      ++decode;
    }
    if (kernel.kernel.starts_with("merge_states")) ++merges;
  }
  return decode == 1 && merges == 0;
}

/// The global loads of `ptx` inside a loop that issues 16-byte cp.async copies (K and V): the
/// lines reading global memory (ld.global) between a label and a later branch back to it, in a
/// loop whose lines hold such a copy. A load there gates the copies issued after it. With
/// `nested_only`, only the loads in a copy loop inside another copy loop: a loop over a block's
/// rows inside the loop over key blocks, where a load costs a latency per row, not per block.
std::vector<std::string> global_loads_in_copy_loops(const std::string& ptx,
                                                    bool nested_only = false) {
  const std::vector<std::string> lines = ptx_lines(ptx);
  const std::vector<PtxLoop> copy_loops = ptx_loops_with(lines, {"cp.async.cg.shared.global"});
  std::set<std::string> found;
  for (const PtxLoop& loop : copy_loops) {
    const bool nested = std::any_of(copy_loops.begin(), copy_loops.end(),
                                    [&](const PtxLoop& outer) { return outer.contains(loop); });
    if (nested_only && !nested) continue;
    for (std::size_t line = loop.begin; line <= loop.end; ++line) {
      if (lines[line].find("ld.global") != std::string::npos) found.insert(lines[line]);
    }
  }
  return {found.begin(), found.end()};
}

/// The integer divisions (div or rem of s32, u32, s64, u64) in the main loop of `ptx` (the
/// loop that waits on cp.async groups and runs mma.sync) from its wait to its last 16-byte
/// copy: the arithmetic that places a chunk's rows, which a division per row (~20 instructions
/// in SASS, the hardware having no integer divider) makes a long dependent chain.
std::vector<std::string> divisions_placing_copies(const std::string& ptx) {
  const std::vector<std::string> lines = ptx_lines(ptx);
  const std::regex division(R"(\b(div|rem)\.[su](32|64)\b)");
  std::vector<std::string> found;
  for (const PtxLoop& loop : ptx_loops_with(lines, {"cp.async.wait_group", "mma.sync"})) {
    std::size_t wait = loop.end, last_copy = loop.begin;
    for (std::size_t line = loop.begin; line <= loop.end; ++line) {
      if (lines[line].find("cp.async.wait_group") != std::string::npos) wait = std::min(wait, line);
      if (lines[line].find("cp.async.cg.shared.global") != std::string::npos) last_copy = line;
    }
    for (std::size_t line = wait; line <= last_copy; ++line) {
      if (std::regex_search(lines[line], division)) found.push_back(lines[line]);
    }
  }
  return found;
}

/// The emulator backend, counting every allocation made through it (host-side and
/// stream-ordered).
class CountingBackend final : public detail::ForwardingBackend {
 public:
  CountingBackend()
      : ForwardingBackend(
            detail::open_emulator_backend(kernels::emulated::builtin_kernels(), "sm_80")) {}
  int allocations_made = 0;

  void* allocate(std::size_t bytes) override {
    ++allocations_made;
    return ForwardingBackend::allocate(bytes);
  }
  void* allocate_on_stream(std::size_t bytes, Stream stream) override {
    ++allocations_made;
    return ForwardingBackend::allocate_on_stream(bytes, stream);
  }
};

/// The PTX of a paged, split, GQA-packed decoding kernel: bf16, head dim 128, on `arch`.
std::string paged_decode_ptx(kernels::ForwardConfig config, const std::string& arch) {
  config.varlen = config.paged = config.pack_gqa = config.split = true;
  return detail::compile_ptx(kernels::forward_spec(config, arch), detail::TemplateSet::embedded());
}

/// Whether `ptx` waits for the previous grid (griddepcontrol.wait) before its first global
/// access (a load, store, atomic or copy not of the parameter, shared, local or constant space)
/// and before its first branch, so that every thread waits before it touches memory.
bool waits_before_global_access(const std::string& ptx) {
  static const std::regex access(
      R"(^\s*(@!?%p\d+\s+)?(ld|st|atom|red|cp\.async|cp\.reduce|prefetch)\.(?!param|shared|local|const))");
  static const std::regex branch(R"(^\s*(@!?%p\d+\s+)?bra)");
  for (const std::string& line : ptx_lines(ptx)) {
    if (line.find("griddepcontrol.wait") != std::string::npos) return true;
    if (std::regex_search(line, access) || std::regex_search(line, branch)) {
      MESSAGE("before any griddepcontrol.wait: " << line);
      return false;
    }
  }
  return false;
}

/// A contiguous tensor of `shape` on `backend`, kept in `held`: `bytes` first, zeros after.
TensorView device_tensor(detail::RuntimeBackend& backend, std::vector<DeviceBuffer>& held,
                         DType dtype, std::initializer_list<std::int64_t> shape,
                         std::vector<unsigned char> bytes = {}) {
  std::size_t size = dtype_size(dtype);
  for (std::int64_t extent : shape) size *= static_cast<std::size_t>(extent);
  bytes.resize(size, 0);
  held.push_back(backend.allocate_buffer(size));
  backend.copy_to_device(held.back().data(), bytes.data(), size);
  return TensorView::contiguous(held.back().data(), dtype, shape);
}

}  // namespace

TEST_CASE("decode, append and merge kernels' PTX: griddepcontrol.wait before any global access") {
  const std::optional<kernels::ForwardConfig> decode =
      kernels::decode_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_90a", 16);
  REQUIRE(decode.has_value());
  const std::string decode_ptx = paged_decode_ptx(*decode, "sm_90a");
  CHECK(waits_before_global_access(decode_ptx));
  CHECK(decode_ptx.find("griddepcontrol.launch_dependents") != std::string::npos);
  for (const RotaryKind rotary : {RotaryKind::none, RotaryKind::half, RotaryKind::interleaved}) {
    const std::string append_ptx =
        detail::compile_ptx(kernels::kvcache_append_spec(DType::bf16, rotary, "sm_90a"),
                            detail::TemplateSet::embedded());
    CHECK(waits_before_global_access(append_ptx));
    CHECK(append_ptx.find("griddepcontrol.launch_dependents") != std::string::npos);
  }
  const std::string merge_ptx =
      detail::compile_ptx(kernels::merge_states_spec(kernels::MergeStatesConfig{}, "sm_90a"),
                          detail::TemplateSet::embedded());
  CHECK(waits_before_global_access(merge_ptx));
  // Before sm_90 there is no griddepcontrol: the kernels compile without it.
  const std::optional<kernels::ForwardConfig> ampere =
      kernels::decode_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_80", 16);
  REQUIRE(ampere.has_value());
  CHECK(paged_decode_ptx(*ampere, "sm_80").find("griddepcontrol") == std::string::npos);
  // The check finds what it looks for: the mma.sync forward reads global memory with no wait.
  const kernels::ForwardConfig fa2 =
      kernels::mma_sync_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_90a", 1, true);
  CHECK(!waits_before_global_access(paged_decode_ptx(fa2, "sm_90a")));
}

TEST_CASE("an append and the decode kernel after it are launched to overlap the grid before") {
  // Batch 2, one query, GQA 8:1, head dim 64: a dense cache of 64 rows holding 10 and 20 keys,
  // one new key and value each, zeros throughout. The emulator runs each overlapping launch
  // with its rule on: a global access before a kernel's wait would fail the call.
  testing::LaunchRecordingBackend backend("sm_90a");
  autotune::TuningState choice(TuningPolicy::off, backend);
  const Attention a{
      .batch = 2, .heads_q = 8, .heads_kv = 1, .seqlen_q = 1, .seqlen_k = 64, .head_dim = 64};
  std::vector<DeviceBuffer> held;
  const auto tensor = [&](DType dtype, std::initializer_list<std::int64_t> shape,
                          std::vector<unsigned char> bytes = {}) {
    return device_tensor(backend, held, dtype, shape, std::move(bytes));
  };
  const std::vector<std::int32_t> cached = {10, 20};
  std::vector<unsigned char> cached_bytes(sizeof(std::int32_t) * cached.size());
  std::memcpy(cached_bytes.data(), cached.data(), cached_bytes.size());
  Sequences s;
  s.seqlens_k = tensor(DType::i32, {2}, cached_bytes);
  s.k_new = tensor(DType::bf16, {2, 1, 1, 64});
  s.v_new = tensor(DType::bf16, {2, 1, 1, 64});
  const TensorView q = tensor(DType::bf16, {2, 1, 8, 64}), o = tensor(DType::bf16, {2, 1, 8, 64});
  const TensorView k = tensor(DType::bf16, {2, 64, 1, 64}), v = tensor(DType::bf16, {2, 64, 1, 64});
  kernels::run_attention_forward_sequences(backend, choice, a, s, q, k, v, o, TensorView{},
                                           /*check_indices=*/false, Stream{});
  REQUIRE(backend.launches.size() == 2);
  CHECK(backend.launches[0].first.find("kvcache_append") != std::string::npos);
  CHECK(backend.launches[1].first.find(".decode.") != std::string::npos);
  for (const auto& [kernel, shape] : backend.launches) {
    CAPTURE(kernel);
    CHECK(shape.overlap_previous);
  }
  // Overlap is asked for, and granted on Hopper and later under a driver of CUDA 12.3 or later.
  const detail::LaunchShape& shape = backend.launches[1].second;
  CHECK(detail::overlaps_previous_launch(shape, 9, 12030));
  CHECK(!detail::overlaps_previous_launch(shape, 8, 12080));
  CHECK(!detail::overlaps_previous_launch(shape, 9, 12020));
  CHECK(!detail::overlaps_previous_launch(detail::LaunchShape{}, 9, 12080));
}

TEST_CASE("decode kernel PTX: no global load in a loop that issues K/V copies (sm_80, sm_90a)") {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    CAPTURE(arch);
    const std::optional<kernels::ForwardConfig> decode =
        kernels::decode_forward_config(DType::bf16, 128, MaskKind::none, false, arch, 16);
    REQUIRE(decode.has_value());
    const std::string ptx = paged_decode_ptx(*decode, arch);
    REQUIRE(ptx.find("cp.async.cg.shared.global") != std::string::npos);
    REQUIRE(ptx.find("cp.async.ca.shared.global") != std::string::npos);  // the page indices
    const std::vector<std::string> loads = global_loads_in_copy_loops(ptx);
    for (const std::string& load : loads) MESSAGE("in the copy loop: " << load);
    CHECK(loads.empty());
  }
  // The check finds what it looks for: the mma.sync forward's paged loads read the page table
  // in the loop that issues the copies.
  const kernels::ForwardConfig fa2 =
      kernels::mma_sync_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_80", 1, true);
  CHECK(!global_loads_in_copy_loops(paged_decode_ptx(fa2, "sm_80")).empty());
}

TEST_CASE("decode kernel PTX: no integer division places a chunk's copies (sm_80, sm_90a)") {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    CAPTURE(arch);
    const std::optional<kernels::ForwardConfig> decode =
        kernels::decode_forward_config(DType::bf16, 128, MaskKind::none, false, arch, 16);
    REQUIRE(decode.has_value());
    const std::vector<std::string> divisions =
        divisions_placing_copies(paged_decode_ptx(*decode, arch));
    for (const std::string& line : divisions) MESSAGE("placing the copies: " << line);
    CHECK(divisions.empty());
  }
  // The check finds what it looks for: the mma.sync forward divides each row's position by
  // the page size.
  const kernels::ForwardConfig fa2 =
      kernels::mma_sync_forward_config(DType::bf16, 128, MaskKind::none, false, "sm_80", 1, true);
  CHECK(!divisions_placing_copies(paged_decode_ptx(fa2, "sm_80")).empty());
}

TEST_CASE(
    "paged mma.sync and wide (MLA) forwards' PTX: a block's page lookups come before its rows' "
    "copies, not one per row in the row loop") {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    CAPTURE(arch);
    // The mma.sync forward's decoding tile (head dim 128) and the wide path's MLA (576/512,
    // V in the keys, 128 heads).
    const kernels::ForwardConfig fa2 =
        kernels::mma_sync_forward_config(DType::bf16, 128, MaskKind::none, false, arch, 1, true);
    const kernels::ForwardConfig mla = kernels::wide_forward_config(
        DType::bf16, 576, 512, MaskKind::none, false, /*values_in_keys=*/true, arch, 128);
    for (const kernels::ForwardConfig& config : {fa2, mla}) {
      const std::string ptx = paged_decode_ptx(config, arch);
      REQUIRE(ptx.find("cp.async.cg.shared.global") != std::string::npos);
      const std::vector<std::string> loads = global_loads_in_copy_loops(ptx, true);
      for (const std::string& load : loads) MESSAGE("in a row loop: " << load);
      CHECK(loads.empty());
      if (config.warpgroups()) {
        // sm_90a's MLA kernel on wgmma: the page indices come by cp.async a block ahead, so no
        // global load at all in its copy loops.
        CHECK(ptx.find("cp.async.ca.shared.global") != std::string::npos);
        CHECK(global_loads_in_copy_loops(ptx).empty());
      } else {
        // The lookups are there, in the key-block loop (one load a lane per block).
        CHECK(!global_loads_in_copy_loops(ptx).empty());
      }
    }
    CHECK(mla.warpgroups() == (arch == "sm_90a"));
  }
}

TEST_CASE("decode kernel: pages of 1, 16 and 64 keys, GQA 8:1 and 4:1, splits 1 to 7") {
  for (std::int64_t page_size : {1, 16, 64}) {
    for (int splits : {1, 3, 7}) {
      // At head dim 128 a warp streams more chunks than its ring has slots (20 at 4 stages).
      InferenceCase c{.seqlens_q = {1, 1, 1}, .seqlens_k = {page_size == 16 ? 1300 : 300, 1, 130}};
      c.heads_q = page_size == 16 ? 8 : 16;
      c.heads_kv = 2;
      c.head_dim = page_size == 16 ? 128 : 64;
      c.keys = KeyStorage::paged;
      c.page_size = page_size;
      c.splits = splits;
      c.seed = static_cast<std::uint64_t>(page_size * 10 + splits);
      CHECK(decoded_in_one_launch(check_decode(emulator(), c)));
    }
  }
}

TEST_CASE("decode kernel: fp8 (e4m3) caches, dense and on pages of 1 and 16, split and not") {
  for (std::int64_t page_size : {0, 1, 16}) {
    InferenceCase c{.seqlens_q = {2, 2}, .seqlens_k = {700, 65}};
    c.heads_q = 16;
    c.heads_kv = 2;
    c.head_dim = 128;
    c.kv_e4m3 = true;
    c.keys = page_size > 0 ? KeyStorage::paged : KeyStorage::dense;
    c.page_size = page_size > 0 ? page_size : 16;
    c.causal = true;
    c.splits = page_size == 1 ? 1 : 3;
    CHECK(decoded_in_one_launch(check_decode(emulator(), c)));
  }
}

TEST_CASE("decode kernel: cache rows and left pads, dense and paged, with causal queries") {
  for (KeyStorage keys : {KeyStorage::dense, KeyStorage::paged}) {
    InferenceCase c{.seqlens_q = {2, 2, 2}, .seqlens_k = {90, 200, 33}};
    c.heads_q = 8;
    c.heads_kv = 1;
    c.keys = keys;
    c.page_size = 16;
    c.leftpad = {5, 0, 17};
    c.cache_batch_idx = true;
    c.causal = true;
    c.splits = 3;
    CHECK(decoded_in_one_launch(check_decode(emulator(), c)));
  }
}

TEST_CASE("decode kernel: appends with rotary on pages of 1, speculative tokens, MHA") {
  InferenceCase append{.seqlens_q = {3, 3}, .seqlens_k = {70, 41}};
  append.heads_q = 8;
  append.heads_kv = 2;
  append.keys = KeyStorage::paged;
  append.page_size = 1;
  append.append = 3;
  append.rotary = true;
  append.causal = true;
  const std::vector<KernelWork> work = check_decode(emulator(), append);
  CHECK(std::any_of(work.begin(), work.end(), [](const KernelWork& k) {
    return k.kernel.find(".decode.") != std::string::npos;
  }));
  // One query head per key/value head: rows are the query tokens alone.
  InferenceCase mha{.seqlens_q = {4, 4}, .seqlens_k = {150, 64}};
  mha.heads_q = 2;
  mha.heads_kv = 2;
  mha.head_dim = 128;
  mha.causal = true;
  mha.splits = 2;
  CHECK(decoded_in_one_launch(check_decode(emulator(), mha)));
}

TEST_CASE("decode kernel: a split decoding call allocates nothing once its stream holds scratch") {
  // Batch 2, one query, GQA 8:1 over a dense cache of 300 keys, split 3 ways (forced).
  CountingBackend backend;
  autotune::TuningState choice(TuningPolicy::off, backend);
  const Attention a{
      .batch = 2, .heads_q = 8, .heads_kv = 1, .seqlen_q = 1, .seqlen_k = 300, .head_dim = 64};
  Sequences sequences;
  sequences.splits = 3;
  std::vector<DeviceBuffer> held;
  const auto tensor = [&](DType dtype, std::initializer_list<std::int64_t> shape) {
    return device_tensor(backend, held, dtype, shape);
  };
  const TensorView q = tensor(DType::bf16, {2, 1, 8, 64}), o = tensor(DType::bf16, {2, 1, 8, 64});
  const TensorView k = tensor(DType::bf16, {2, 300, 1, 64}),
                   v = tensor(DType::bf16, {2, 300, 1, 64});
  const TensorView lse = tensor(DType::f32, {2, 8, 1});
  const auto call = [&] {
    const int before = backend.allocations_made;
    kernels::run_attention_forward_sequences(backend, choice, a, sequences, q, k, v, o, lse,
                                             /*check_indices=*/false, Stream{});
    return backend.allocations_made - before;
  };
  CHECK(call() == 2);  // the stream's first: its counters and its workspace
  CHECK(call() == 0);
  CHECK(call() == 0);
  sequences.splits = 7;  // more partials: the workspace grows once
  CHECK(call() == 1);
  CHECK(call() == 0);
  // The last call's work: one launch of the decode kernel, its splits merged in it.
  REQUIRE(backend.counted_work() != nullptr);
  CHECK(decoded_in_one_launch(*backend.counted_work()));
}

TEST_CASE(
    "decode kernel on the memory model: 64 KB in flight per SM, full sectors, K/V once, no "
    "padding rows") {
  // Batch 8 at context 4096, head dim 128, GQA 32:4 on pages of 16, on the modelled H100.
  static Runtime modelled(RuntimeOptions{
      .backend = Backend::emulator, .emulated_arch = "sm_90a", .model_memory = true});
  const InferenceCase c = paged_decode_case(8, 4096);
  const std::vector<KernelWork> work = check_decode(modelled, c);
  REQUIRE(decoded_in_one_launch(work));
  const KernelWork& decode = *std::find_if(work.begin(), work.end(), [](const KernelWork& k) {
    return k.kernel.find(".decode.") != std::string::npos;
  });
  const MemoryCounters& memory = decode.work.memory;
  REQUIRE(memory.modelled);
  INFO(decode.kernel << ": " << memory.bytes_in_flight_per_cta << " bytes in flight a CTA, "
                     << memory.ctas_per_sm << " CTAs an SM, sector use "
                     << memory.global_sector_use());
  CHECK(memory.bytes_in_flight_per_sm >= 64 * 1024);
  CHECK(memory.global_sector_use() >= 0.99);
  // Each K/V byte once: with Q, O, the page indices and the split partials (written and read
  // back once), within 2 % of the K/V, Q and O bytes.
  const double kv = 2.0 * 8 * 4096 * 4 * 128 * 2, q_and_o = 2.0 * 8 * 32 * 128 * 2;
  const double bytes = global_bytes(work);
  INFO("global bytes " << bytes << ", K and V " << kv);
  CHECK(bytes <= 1.02 * (kv + q_and_o));
  CHECK(bytes >= kv);
  // The GQA group of 8 is the products' small dimension: no mma spent on padding rows, so the
  // tensor work is exactly S's and O's (2 · 2 · heads · keys · head dim a sequence).
  CHECK(decode.work.tensor_flops == std::uint64_t{4} * 8 * 32 * 4096 * 128);
}

}  // namespace flashjit::testing

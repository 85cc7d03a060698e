// The warp-specialized Hopper backward (ops/attention/hopper/tma_backward_kernel.cuh: TMA, mbarrier
// rings, wgmma, dQ by bulk reductions), compiled for the host, run on the CPU emulator of an
// sm_90a device through the public Runtime API, with explicit BackwardConfigs and as the
// default at head dims 64 and 128, after the library's own forward; each gradient checked against
// the float64 reference (attention/backward_case) at the backward suite's bar. An emulator finding
// (race, proxy fence, wgmma operand or bulk reduction in flight) throws, so a pass also means none.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attention/attention_backward.hpp"
#include "attention/attention_forward.hpp"
#include "attention/check/backward_case.hpp"
#include "attention/check/inference_case.hpp"
#include "attention/hopper/tma_backward_space.cuh"
#include "attention/parts/dq_accum_layout.cuh"
#include "flashjit/error.hpp"
#include "runtime/compiler.hpp"
#include "runtime/template_sources.hpp"
#include "support/backward_case_builders.hpp"
#include "support/emulator_runtime.hpp"
#include "support/ptx_loops.hpp"

namespace flashjit::testing {
namespace {

using reference::Layout;

/// The TMA backward config for `c` with Bc keys per CTA, `stages` Q/dO slots and Br query
/// rows a step, its two consumer warpgroups sharing Bc = 64 keys when `shared_keys`.
kernels::BackwardConfig tma_config(const BackwardCase& c, int block_n, int stages,
                                   bool shared_keys = false, int block_m = kTmaBackwardBlockM) {
  kernels::BackwardConfig config;
  config.dtype = c.dtype;
  config.head_dim = static_cast<int>(c.problem.head_dim);
  config.mask = kernels::forward_mask_kind(c.attention());
  config.softcap = c.problem.softcap > 0;
  config.key = {block_m, block_n, tma_backward_threads(block_n, shared_keys) / 32, stages};
  config.tma = true;
  return config;
}

/// `spec` compiled by NVRTC and ptxas, its registers, spills and advisories printed.
detail::CompiledKernel compile_and_report(const detail::KernelSpec& spec) {
  detail::CompiledKernel kernel = detail::compile_kernel(spec, detail::TemplateSet::embedded());
  std::cout << spec.readable_name << ": " << kernel.resources.registers << " registers, "
            << kernel.resources.spill_bytes() << " spill bytes, "
            << kernel.resources.advisories.size() << " advisories\n";
  for (const std::string& advisory : kernel.resources.advisories) {
    std::cout << "  " << advisory << "\n";
  }
  return kernel;
}

/// `spec`'s PTX, once NVRTC and ptxas have built it (checked: no spill, no advisory).
std::string gated_ptx(const detail::KernelSpec& spec) {
  const detail::CompiledKernel kernel = compile_and_report(spec);
  CHECK(kernel.resources.spill_bytes() == 0);
  CHECK(kernel.resources.advisories.empty());
  return detail::compile_ptx(spec, detail::TemplateSet::embedded());
}

void check(const BackwardCase& c, int block_n, int stages, bool shared_keys = false,
           int block_m = kTmaBackwardBlockM) {
  CAPTURE(c.name());
  CAPTURE(block_n);
  CAPTURE(stages);
  CAPTURE(shared_keys);
  CAPTURE(block_m);
  kernels::BackwardConfig config = tma_config(c, block_n, stages, shared_keys, block_m);
  config.deterministic = c.deterministic;
  REQUIRE(config.valid());
  const BackwardVerdict verdict = run_backward_case(hopper_emulator(), c, config);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
}

/// Whether a dK/dV kernel of the TMA backward (its varlen form when `varlen`) has run on
/// hopper_emulator() since its work was last reset.
bool ran_tma_backward(bool varlen) {
  for (const KernelWork& kernel : hopper_emulator().emulated_work()) {
    const std::string& name = kernel.kernel;
    if (name.find("attention_backward.dkdv.") == 0 && name.find(".tma") != std::string::npos &&
        (name.find(".varlen") != std::string::npos) == varlen) {
      return true;
    }
  }
  return false;
}

/// Runs `c` with sm_90a's default config and checks it against the reference, and that the
/// dK/dV kernel that ran was the TMA backward.
void check_default_is_tma(const BackwardCase& c) {
  CAPTURE(c.name());
  hopper_emulator().reset_emulated_work();
  const BackwardVerdict verdict = run_backward_case(hopper_emulator(), c, std::nullopt);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  CHECK(ran_tma_backward(false));
}

/// Runs the variable-length backward `c` on sm_90a (its default: the TMA backward's varlen
/// form), checks every sequence against its reference and that the kernel was that one; in the
/// deterministic mode runs it again for the same bits.
void check_packed_is_tma(const InferenceCase& c) {
  INFO(c.name());
  hopper_emulator().reset_emulated_work();
  const InferenceVerdict verdict = run_inference_backward_case(hopper_emulator(), c);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  CHECK(ran_tma_backward(true));
  if (c.deterministic) {
    const InferenceVerdict again = run_inference_backward_case(hopper_emulator(), c);
    CHECK(again.out.size() == verdict.out.size());
    CHECK(std::memcmp(again.out.data(), verdict.out.data(), verdict.out.size() * sizeof(double)) ==
          0);
  }
}

}  // namespace

TEST_CASE("TMA backward on the emulator: ragged lengths, one and two warpgroups, both dtypes") {
  check(make_case(2, 2, 100, 150, 64), 64, 2);
  check(with_dtype(make_case(1, 1, 130, 70, 64), DType::f16), 128, 2);
  check(make_case(1, 1, 64, 192, 128), 128, 1);
}

TEST_CASE("TMA backward on the emulator: causal both ways, GQA, windows, softcap, bhsd") {
  check(make_case(4, 2, 96, 160, 64, /*causal=*/true), 128, 2);
  check(make_case(2, 1, 160, 96, 96, /*causal=*/true), 64, 2);
  check(with_layout(windowed(150, 150, 40, 10, 64), Layout::bhsd), 64, 1);
  check(with_softcap(make_case(1, 1, 80, 80, 128), 20.0), 128, 2);
}

// Two consumer warpgroups sharing 64 keys (the form above a padded head dim of 128, and at 128
// with softcap): each computes the scores of half the query rows, one accumulates dV and the
// other dK from Pᵀ and dSᵀ in shared memory, and they split dQ's columns (evenly at 128 and 256,
// 128 and 64 at 192). Ragged rows in the second warpgroup's half (a block of 1 to 33 valid
// rows), causal, GQA, windows, softcap, both layouts, both dtypes and both dQ modes.
TEST_CASE("TMA backward with shared keys: head dims 128 to 256") {
  check(make_case(2, 1, 100, 150, 256), 64, 1, true);
  check(with_dtype(make_case(1, 1, 97, 70, 192, /*causal=*/true), DType::f16), 64, 2, true);
  check(with_softcap(make_case(2, 2, 80, 80, 128), 20.0), 64, 2, true);
  check(with_layout(windowed(150, 120, 40, 10, 136), Layout::bhsd), 64, 1, true);
  check(make_case(4, 2, 33, 65, 200, /*causal=*/true), 64, 1, true);
  check(deterministic(make_case(2, 1, 130, 200, 192, /*causal=*/true)), 64, 2, true);
  check(deterministic(with_softcap(make_case(1, 1, 70, 129, 256), 10.0)), 64, 1, true);
}

// Br 128 at a padded head dim of 64 (FlashAttention-3's 128 x 128): each warpgroup's scores
// over 128 queries, dQ in two 64-row wgmmas, two blocks of row statistics a step. Ragged last
// blocks of 1 to 127 rows (and a second block of statistics past the head's), causal both
// ways, GQA, windows, softcap, both layouts and dtypes, Bc 64 and 128, both dQ modes.
TEST_CASE("TMA backward with Br 128 at head dim 64: both Bc, masks, both dQ modes") {
  check(make_case(2, 2, 100, 150, 64), 128, 2, false, 128);
  check(with_dtype(make_case(1, 1, 130, 70, 64, /*causal=*/true), DType::f16), 64, 2, false, 128);
  check(make_case(4, 2, 200, 96, 64, /*causal=*/true), 128, 1, false, 128);
  check(with_layout(windowed(150, 150, 40, 10, 64), Layout::bhsd), 128, 2, false, 128);
  check(with_softcap(make_case(1, 1, 129, 80, 64), 20.0), 128, 2, false, 128);
  check(deterministic(make_case(2, 1, 260, 200, 64, /*causal=*/true)), 128, 2, false, 128);
  check(deterministic(windowed(300, 300, 40, 10, 64)), 64, 1, false, 128);
  // Only at a padded head dim of 64, with keys of each warpgroup's own.
  CHECK_FALSE(tma_config(make_case(1, 1, 64, 64, 72), 128, 2, false, 128).valid());
  CHECK_FALSE(tma_config(make_case(1, 1, 64, 64, 128), 64, 2, true, 128).valid());
}

// Two stages above a padded head dim of 192: no room for dQ's staging block, so the consumers
// add dQ from registers with vector reductions and stage dK and dV in the Q slots; the
// deterministic mode refuses it (its sums are the writer's, in turn).
TEST_CASE("TMA backward with shared keys, two stages at head dim 256: dQ from registers") {
  REQUIRE(tma_backward_dq_from_registers(256, 64, 2, true));
  CHECK_FALSE(tma_backward_dq_from_registers(192, 64, 2, true));
  CHECK_FALSE(tma_backward_dq_from_registers(256, 64, 1, true));
  check(make_case(2, 1, 100, 150, 256), 64, 2, true);
  check(with_dtype(make_case(2, 2, 129, 97, 232, /*causal=*/true), DType::f16), 64, 2, true);
  check(with_softcap(windowed(150, 120, 40, 10, 256), 10.0), 64, 2, true);
  kernels::BackwardConfig ordered = tma_config(make_case(1, 1, 70, 129, 256), 64, 2, true);
  ordered.deterministic = true;
  CHECK_FALSE(ordered.valid());
  // Spill-free and advisory-free for sm_90a, both masks, packed too; no bulk reduction left.
  for (const bool varlen : {false, true}) {
    for (const bool masked : {false, true}) {
      kernels::BackwardConfig config =
          tma_config(make_case(1, 1, 64, 64, 256, masked), 64, 2, true);
      config.varlen = varlen;
      const detail::KernelSpec spec = kernels::backward_specs(config, "sm_90a").dkdv;
      CAPTURE(spec.readable_name);
      const std::string ptx = gated_ptx(spec);
      CHECK(ptx.find("red.global.add.v2.f32") != std::string::npos);
      CHECK(ptx.find("cp.reduce.async.bulk") == std::string::npos);
    }
  }
  // Still in the tuning space (the atomic mode's), not the default.
  const kernels::BackwardConfig fallback =
      kernels::default_backward_config(DType::bf16, 256, MaskKind::none, false, false, "sm_90a");
  CHECK(fallback.key.stages == 1);
  const auto space = kernels::backward_configs(DType::bf16, 256, MaskKind::none, false, false);
  CHECK(std::any_of(space.begin(), space.end(),
                    [](const kernels::BackwardConfig& c) { return c.tma && c.key.stages == 2; }));
}

// The deterministic mode: dQ's sums into each query block take turns from the last key block
// that sees it down (and in the order of the two warpgroups, at head dim 64 with Bc 128, where
// each adds its own). A
// turn counted wrong is a deadlock finding (the emulator runs blocks in index order, so a wait
// for a later block never ends), which throws; each case also reruns for the same bits.
TEST_CASE("TMA backward on the emulator, deterministic: turns over causal, windows and GQA") {
  check(deterministic(make_case(2, 1, 200, 200, 64)), 128, 2);                   // two teams
  check(deterministic(make_case(4, 2, 96, 260, 128, /*causal=*/true)), 128, 1);  // one team
  check(deterministic(make_case(2, 2, 260, 96, 64, /*causal=*/true)), 64, 2);
  check(deterministic(windowed(300, 300, 40, 10, 64)), 64, 1);  // key blocks that see none
  check(deterministic(with_dtype(windowed(129, 63, -1, 8), DType::f16)), 128, 2);
}

// The backward suite's shapes at head dims 64 and 128 (test_attention_backward_emulated.cpp),
// atomic and deterministic, with no config: sm_90a's default, which is the TMA backward there
// (but with softcap at 128); the run's dK/dV kernel is checked to be it. Its 1000-token cases
// are a test case of their own, so that CTest runs them beside the others.
TEST_CASE("TMA backward as sm_90a's default: the backward suite's shapes at head dims 64, 128") {
  BackwardCase scaled = make_case(1, 1, 65, 65, 64);
  scaled.problem.softmax_scale = 0.3;
  for (const BackwardCase& c :
       {make_case(1, 1, 1, 1, 64), make_case(1, 1, 17, 17, 64), make_case(1, 1, 1, 129, 64),
        make_case(1, 1, 129, 1, 64), with_dtype(make_case(1, 1, 17, 1, 128), DType::f16),
        make_case(1, 1, 129, 17, 64, true), make_case(1, 1, 17, 129, 64, true),
        with_dtype(make_case(1, 1, 63, 129, 128, true), DType::f16), make_case(1, 1, 129, 129, 128),
        with_layout(with_dtype(make_case(1, 1, 100, 100, 128, true), DType::f16), Layout::bhsd),
        with_layout(make_case(8, 1, 129, 129, 128, true), Layout::bhsd), windowed(200, 200, 32, 0),
        windowed(129, 129, 16, 16), windowed(129, 63, -1, 8), windowed(100, 100, 0, 0),
        with_dtype(windowed(65, 65, 8, 40, 128), DType::f16), windowed(128, 512, 256, 0),
        windowed(1, 65, 0, 0, 128), with_softcap(make_case(1, 1, 129, 129, 64), 30), scaled,
        // and its deterministic ones (the same kernel, its dQ sums in turn)
        deterministic(make_case(1, 1, 129, 129, 64)), deterministic(make_case(8, 1, 63, 63, 64)),
        deterministic(make_case(4, 2, 40, 90, 64)), deterministic(windowed(129, 63, -1, 8)),
        deterministic(make_case(2, 2, 129, 200, 128, true)),
        deterministic(with_dtype(windowed(130, 130, 24, 8, 128), DType::f16))}) {
    check_default_is_tma(c);
  }
}

// The backward suite's cases at head dim 256 and with softcap at 128, and a padded head dim
// of 192, where sm_90a's default is the TMA backward with two warpgroups sharing 64 keys.
TEST_CASE("TMA backward as sm_90a's default: head dims 136 to 256, softcap at 128") {
  for (const BackwardCase& c :
       {with_layout(make_case(1, 1, 1, 129, 256, true), Layout::bhsd), make_case(1, 1, 63, 63, 256),
        deterministic(make_case(1, 1, 129, 129, 256, true)),
        with_dtype(make_case(1, 1, 17, 33, 256), DType::f16), windowed(128, 512, 256, 0, 256),
        with_dtype(windowed(1, 65, 0, 0, 256), DType::f16),
        deterministic(with_softcap(make_case(2, 2, 70, 70, 128, true), 5)),
        with_softcap(make_case(1, 1, 129, 129, 128), 30), make_case(4, 2, 129, 100, 160, true)}) {
    check_default_is_tma(c);
  }
}

TEST_CASE("TMA backward as sm_90a's default: the backward suite's 1000-token shapes") {
  for (const BackwardCase& c :
       {deterministic(make_case(1, 1, 1000, 1000, 64, true)), make_case(1, 1, 1000, 129, 128),
        make_case(1, 1, 17, 1000, 128, true),
        with_dtype(make_case(1, 1, 1000, 17, 64, true), DType::f16),
        deterministic(make_case(2, 1, 1000, 300, 128, true))}) {
    check_default_is_tma(c);
  }
}

// Packed sequences (cu_seqlens) on sm_90a's default, the TMA backward's varlen form: every
// sequence its own rows, lengths 0 and 1 included, a last key or query block that TMA fills past
// the sequence's end with the next one's rows (or, for the last sequence, with spare rows of NaN,
// which must not reach a gradient), GQA, masks, softcap, both dQ modes (bit-identical reruns).
TEST_CASE("TMA backward on packed sequences: lengths 0 to 200, masks, GQA, both dQ modes") {
  InferenceCase gqa = random_lengths_case(4, 150, 200, 71);
  gqa.keys = KeyStorage::packed;
  gqa.heads_q = 4;
  gqa.heads_kv = 2;
  gqa.causal = true;
  gqa.spare_rows = 40;
  check_packed_is_tma(gqa);

  InferenceCase wide = random_lengths_case(3, 130, 130, 72);
  wide.keys = KeyStorage::packed;
  wide.head_dim = 128;
  wide.heads_q = 2;
  wide.dtype = DType::f16;
  wide.deterministic = true;
  wide.spare_rows = 8;
  check_packed_is_tma(wide);

  InferenceCase window = random_lengths_case(3, 140, 140, 73);
  window.keys = KeyStorage::packed;
  window.causal = true;
  window.window_left = 30;
  window.deterministic = true;
  check_packed_is_tma(window);

  InferenceCase softcap = random_lengths_case(2, 100, 100, 74);
  softcap.keys = KeyStorage::packed;
  softcap.softcap = 5.0;
  softcap.spare_rows = 64;
  check_packed_is_tma(softcap);
}

TEST_CASE("TMA backward on packed sequences with shared keys: head dims 192 and 256") {
  InferenceCase wide = random_lengths_case(3, 120, 150, 75);
  wide.keys = KeyStorage::packed;
  wide.head_dim = 256;
  wide.heads_q = 2;
  wide.causal = true;
  wide.spare_rows = 24;
  check_packed_is_tma(wide);

  InferenceCase turns = random_lengths_case(3, 100, 130, 76);
  turns.keys = KeyStorage::packed;
  turns.head_dim = 192;
  turns.dtype = DType::f16;
  turns.deterministic = true;
  turns.spare_rows = 8;
  check_packed_is_tma(turns);
}

TEST_CASE("TMA backward on packed keys with dense queries of one length, both dQ modes") {
  for (const bool deterministic : {false, true}) {
    InferenceCase c{.seqlens_q = {70, 70, 70}, .seqlens_k = {0, 130, 75}};
    c.keys = KeyStorage::packed;
    c.head_dim = 128;
    c.causal = true;
    c.deterministic = deterministic;
    c.spare_rows = 16;
    check_packed_is_tma(c);
  }
}

/// The dK/dV kernel's work in a run of `c` on the emulated sm_90a with `config`.
WorkCounters key_kernel_work(const BackwardCase& c,
                             const std::optional<kernels::BackwardConfig>& config) {
  hopper_emulator().reset_emulated_work();
  const BackwardVerdict verdict = run_backward_case(hopper_emulator(), c, config);
  CHECK_MESSAGE(verdict.ok, verdict.describe());
  WorkCounters work;
  for (const KernelWork& kernel : hopper_emulator().emulated_work()) {
    if (kernel.kernel.find("attention_backward.dkdv.") == 0) work += kernel.work;
  }
  return work;
}

double shared_bytes_per_flop(const WorkCounters& work) {
  return static_cast<double>(work.shared_bytes_read + work.shared_bytes_written) /
         static_cast<double>(work.tensor_flops);
}

// At head dim 128 (Bc 128, each warpgroup its own keys) and 256 (two warpgroups sharing 64 keys,
// Pᵀ and dSᵀ through shared memory), causal, GQA: the same tensor FLOPs as the mma.sync kernel
// (no product computed twice) and at most 0.6x its shared bytes per FLOP.
TEST_CASE("TMA backward: at most 0.6x the shared bytes per tensor FLOP of the mma.sync one") {
  for (const auto& [head_dim, shared_keys] : {std::pair{128, false}, {256, true}}) {
    const BackwardCase c = make_case(4, 2, 256, 256, head_dim, /*causal=*/true);
    const WorkCounters mma_sync = key_kernel_work(
        c,
        kernels::fallback_backward_config(
            c.dtype, head_dim, kernels::forward_mask_kind(c.attention()), false, false, "sm_90a"));
    const WorkCounters tma =
        key_kernel_work(c, tma_config(c, shared_keys ? 64 : 128, shared_keys ? 1 : 2, shared_keys));
    MESSAGE("head dim " << head_dim << ", mma.sync dK/dV kernel: " << mma_sync.tensor_flops
                        << " tensor FLOPs, " << mma_sync.shared_bytes_read << " shared bytes read, "
                        << mma_sync.shared_bytes_written << " written, " << mma_sync.ldmatrix_bytes
                        << " by ldmatrix; " << shared_bytes_per_flop(mma_sync) << " bytes a FLOP");
    MESSAGE("head dim " << head_dim << ", TMA dK/dV kernel"
                        << std::string(shared_keys ? " (shared keys)" : "") << ": "
                        << tma.tensor_flops << " tensor FLOPs, " << tma.shared_bytes_read
                        << " shared bytes read, " << tma.shared_bytes_written << " written, "
                        << tma.ldmatrix_bytes << " by ldmatrix; " << shared_bytes_per_flop(tma)
                        << " bytes a FLOP");
    REQUIRE(mma_sync.tensor_flops > 0);
    CHECK(tma.tensor_flops == mma_sync.tensor_flops);
    CHECK(tma.ldmatrix_bytes == 0);
    CHECK(shared_bytes_per_flop(tma) <= 0.6 * shared_bytes_per_flop(mma_sync));
  }
}

/// Shared-memory wavefronts of one warp's 8-byte stores (lane → float index): the warp goes in
/// two halves of 16 lanes, each taking as many wavefronts as the most distinct words one of
/// the 32 banks holds.
int pair_store_wavefronts(const std::array<int, 32>& float_index) {
  int wavefronts = 0;
  for (int half = 0; half < 2; ++half) {
    std::map<int, std::set<int>> words_by_bank;
    for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
      for (int word : {float_index[lane], float_index[lane] + 1}) {
        words_by_bank[word % 32].insert(word);
      }
    }
    std::size_t most = 0;
    for (const auto& [bank, words] : words_by_bank) most = std::max(most, words.size());
    wavefronts += static_cast<int>(most);
  }
  return wavefronts;
}

/// The wavefronts of every dQ staging store of a warp (add_query_gradients: rows g and g + 8 of
/// the warp's 16, columns 8j + 2t as pairs), summed, for dq_accum's rows from `first_row`.
int dq_staging_wavefronts(int head_dim, long long first_row, bool permuted) {
  int total = 0;
  for (int warp_row0 : {0, 16, 32, 48}) {
    for (int half = 0; half < 2; ++half) {
      for (int group = 0; group < head_dim / 8; ++group) {
        std::array<int, 32> index{};
        for (int lane = 0; lane < 32; ++lane) {
          const int row = warp_row0 + half * 8 + lane / 4;
          const int col = group * 8 + lane % 4 * 2;
          const int column_xor = permuted ? dq_accum_column_xor(head_dim, first_row + row) : 0;
          CHECK((col ^ column_xor) < head_dim);  // the permutation stays in the row
          index[static_cast<std::size_t>(lane)] = row * head_dim + (col ^ column_xor);
        }
        total += pair_store_wavefronts(index);
      }
    }
  }
  return total;
}

TEST_CASE("TMA backward: dQ's staging stores take the fewest wavefronts in the permuted layout") {
  for (const int head_dim : {64, 128, 192, 256}) {
    for (const long long first_row : {0LL, 1LL, 5LL, 8LL * 1000 + 3}) {
      CAPTURE(head_dim);
      CAPTURE(first_row);
      const int stores = 4 * 2 * head_dim / 8;  // per warp: 2 halves of 8-column groups
      CHECK(dq_staging_wavefronts(head_dim, first_row, true) == 2 * stores);  // 256 B: 2
      // Plain rows of 64 or more floats put the 4 rows of a half on the same banks.
      CHECK(dq_staging_wavefronts(head_dim, first_row, false) == 8 * stores);
    }
  }
  // Head dims not a multiple of 64 permute fewer bits: no worse than plain rows.
  for (int head_dim = 64; head_dim <= 256; head_dim += 8) {
    CAPTURE(head_dim);
    CHECK(dq_staging_wavefronts(head_dim, 3, true) <= dq_staging_wavefronts(head_dim, 3, false));
  }
}

TEST_CASE("TMA backward: refused on sm_80 and outside its space, before any launch") {
  const BackwardCase c = make_case(1, 1, 64, 64, 64);
  kernels::BackwardConfig config = tma_config(c, 96, 2);
  CHECK_FALSE(config.valid());
  config = tma_config(c, 64, 3);
  CHECK_FALSE(config.valid());
  CHECK(tma_config(with_dtype(make_case(1, 1, 8, 8, 256), DType::f16), 64, 1, true).valid());
  kernels::BackwardConfig two_stages = tma_config(make_case(1, 1, 8, 8, 256), 64, 2, true);
  CHECK(two_stages.valid());  // without a dQ staging block (dQ from registers): 210 KB
  two_stages.deterministic = true;
  CHECK_FALSE(two_stages.valid());  // the ordered sums need the staging block: 274 KB
  CHECK_FALSE(tma_config(make_case(1, 1, 8, 8, 256), 64, 1).valid());  // dK and dV spill
  CHECK_FALSE(tma_config(make_case(1, 1, 8, 8, 192), 128, 1).valid());
  CHECK_FALSE(tma_config(c, 64, 2, true).valid());  // no dQ columns for the second warpgroup
  CHECK(tma_config(make_case(1, 1, 8, 8, 192), 64, 2, true).valid());  // 209 KB
  const std::string name =
      kernels::backward_specs(tma_config(c, 128, 2), "sm_90a").dkdv.readable_name;
  CHECK(name == "attention_backward.dkdv.hdim64.bf16.br64.bc128.w12.s2.tma");
  kernels::BackwardConfig packed = tma_config(c, 128, 2);
  packed.varlen = true;  // packed sequences: the same kernel, each CTA its sequence's rows
  CHECK(packed.valid());
  CHECK(kernels::backward_specs(packed, "sm_90a").dkdv.readable_name == name + ".varlen");

  static Runtime ampere(RuntimeOptions{.backend = Backend::emulator});
  CHECK_THROWS_WITH_AS(run_backward_case(ampere, c, tma_config(c, 64, 2)),
                       doctest::Contains("runs on sm_90a only"), InvalidArgument);
}

TEST_CASE(
    "TMA backward: NVRTC builds it for sm_90a, its PTX issues wgmma, TMA and bulk reductions") {
  struct Tile {
    int head_dim, block_n, stages;
    bool shared_keys;
  };
  for (const Tile t : {Tile{64, 128, 2, false}, Tile{64, 64, 2, false}, Tile{128, 128, 2, false},
                       Tile{128, 64, 2, true}, Tile{192, 64, 2, true}, Tile{256, 64, 1, true}}) {
    for (const bool masked : {false, true}) {
      BackwardCase c = make_case(1, 1, 64, 64, t.head_dim, masked);
      const kernels::BackwardConfig config = tma_config(c, t.block_n, t.stages, t.shared_keys);
      REQUIRE(config.valid());
      const detail::KernelSpec spec = kernels::backward_specs(config, "sm_90a").dkdv;
      CAPTURE(spec.readable_name);
      const detail::CompiledKernel kernel = compile_and_report(spec);
      CHECK(kernel.cubin.substr(1, 3) == "ELF");
      CHECK(kernel.resources.spill_bytes() == 0);  // the gate: no spill, no advisory
      CHECK(kernel.resources.advisories.empty());
      const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
      // Sᵀ = K Qᵀ and dPᵀ = V dOᵀ: N = Br 64, or each warpgroup's half with shared keys
      CHECK(ptx.find(t.shared_keys ? "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16"
                                   : "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") !=
            std::string::npos);
      CHECK(ptx.find("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier") !=
            std::string::npos);
      CHECK(ptx.find("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32") !=
            std::string::npos);
      CHECK(ptx.find("ldmatrix") == std::string::npos);  // no product is fed by ldmatrix
    }
  }
}

/// The global loads in the step loops of `ptx` (loops that issue wgmma and compute 2^x) between
/// a wgmma's issue and the next 2^x: loads whose latency the step's softmax would wait on.
std::vector<std::string> global_loads_before_softmax(const std::string& ptx) {
  const std::vector<std::string> lines = ptx_lines(ptx);
  const std::vector<PtxLoop> steps = ptx_loops_with(lines, {"wgmma.mma_async", "ex2.approx"});
  REQUIRE_MESSAGE(!steps.empty(), "no loop issues wgmma and computes 2^x: the test needs updating");
  std::set<std::string> found;
  for (const PtxLoop& loop : steps) {
    bool after_wgmma = false;
    for (std::size_t line = loop.begin; line <= loop.end; ++line) {
      if (lines[line].find("wgmma.mma_async") != std::string::npos) after_wgmma = true;
      if (lines[line].find("ex2.approx") != std::string::npos) after_wgmma = false;
      if (after_wgmma && lines[line].find("ld.global") != std::string::npos) {
        found.insert(lines[line]);
      }
    }
  }
  return {found.begin(), found.end()};
}

TEST_CASE("TMA backward: LSE and D come with Q and dO, no global load between wgmma and softmax") {
  // Each step's rows' LSE and D arrive by TMA in the slot Q and dO land in, on their barrier
  // (attention/parts/row_stats.cuh); loaded from global memory after the products' issue, their
  // latency stood between the products and the softmax in every step.
  for (const int head_dim : {64, 128, 192, 256}) {
    for (const MaskKind mask : {MaskKind::none, MaskKind::window}) {
      for (const bool deterministic : {false, true}) {
        for (const bool varlen : {false, true}) {
          kernels::BackwardConfig config = kernels::default_backward_config(
              DType::bf16, head_dim, mask, false, deterministic, "sm_90a");
          REQUIRE(config.tma);
          config.varlen = varlen;
          const detail::KernelSpec spec = kernels::backward_specs(config, "sm_90a").dkdv;
          CAPTURE(spec.readable_name);
          const std::string ptx = detail::compile_ptx(spec, detail::TemplateSet::embedded());
          CHECK(ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier") !=
                std::string::npos);  // the statistics' box
          CHECK(global_loads_before_softmax(ptx) == std::vector<std::string>{});
        }
      }
    }
  }
}

TEST_CASE("TMA backward, deterministic: sm_90a's default takes turns by acquire and release") {
  for (const int head_dim : {64, 128, 192, 256}) {
    for (const MaskKind mask : {MaskKind::none, MaskKind::window}) {
      const kernels::BackwardConfig config =
          kernels::default_backward_config(DType::bf16, head_dim, mask, false, true, "sm_90a");
      REQUIRE(config.tma);
      const detail::KernelSpec spec = kernels::backward_specs(config, "sm_90a").dkdv;
      CAPTURE(spec.readable_name);
      const std::string ptx = gated_ptx(spec);
      CHECK(ptx.find("ld.acquire.gpu.global.b32") != std::string::npos);
      CHECK(ptx.find("red.release.gpu.global.add.s32") != std::string::npos);
      CHECK(ptx.find("fence.proxy.async.global") != std::string::npos);
      CHECK(ptx.find("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32") !=
            std::string::npos);
    }
  }
}

TEST_CASE("TMA backward on packed sequences: sm_90a's defaults compile without spills") {
  for (const auto& [head_dim, softcap] :
       {std::pair{64, false}, {128, false}, {128, true}, {192, false}, {256, false}}) {
    for (const bool deterministic : {false, true}) {
      kernels::BackwardConfig config = kernels::default_backward_config(
          DType::bf16, head_dim, MaskKind::window, softcap, deterministic, "sm_90a");
      REQUIRE(config.tma);
      config.varlen = true;
      const detail::KernelSpec spec = kernels::backward_specs(config, "sm_90a").dkdv;
      CAPTURE(spec.readable_name);
      const detail::CompiledKernel kernel = compile_and_report(spec);
      CHECK(kernel.resources.spill_bytes() == 0);
      CHECK(kernel.resources.stack_bytes == 0);
      CHECK(kernel.resources.advisories.empty());
    }
  }
}

}  // namespace flashjit::testing

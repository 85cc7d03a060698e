// The attention forward op's compile matrix (docs/design.md): for sm_80 and sm_90a, every
// spec `flashjit compile --op attention-forward --all` lists compiles with NVRTC, and the
// defaults (what runs without tuning) neither spill nor keep arrays in local memory (a stack
// frame: a register tile indexed at run time, which ptxas does not count as a spill) nor carry a
// ptxas performance advisory (a serialized wgmma pipeline, say), at the head dims
// compile_sample keeps (every padded tile shape with FLASHJIT_COMPILE_MATRIX=full; CI
// compiles a lighter sample). One test case per arch, so that CTest can run the two side by
// side.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "attention/attention_forward.hpp"
#include "attention/inference/attention_inference_config.hpp"
#include "common/op_registry.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/parallel.hpp"
#include "support/compile_checks.hpp"
#include "support/modifier_expressions.hpp"

using namespace flashjit;
using namespace flashjit::detail;

namespace {

// NVRTC takes hundreds of MB per compile, and CI has 2 cores.
constexpr int kWorkers = 2;

void check_compile_matrix(const std::string& arch) {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  const kernels::OpInfo& op = kernels::find_op("attention-forward");
  std::set<std::string> defaults;
  for (const KernelSpec& spec : op.specs(arch, kernels::SpecSet::defaults)) {
    defaults.insert(spec.readable_name);
  }
  const auto specs = testing::compile_sample(op.specs(arch, kernels::SpecSet::all), defaults);
  REQUIRE(!specs.empty());
  int spilling = 0;
  run_ordered<CacheLookup>(
      static_cast<int>(specs.size()), kWorkers,
      [&](int i) { return cache.get(specs[static_cast<std::size_t>(i)]); },
      [&](int i, Outcome<CacheLookup>& outcome) {
        const KernelSpec& spec = specs[static_cast<std::size_t>(i)];
        const std::string name = spec.display_name();
        if (outcome.error) {
          try {
            std::rethrow_exception(outcome.error);
          } catch (const std::exception& error) {
            FAIL_CHECK(name << " does not compile: " << error.what());
          }
          return;
        }
        const ResourceUsage& resources = outcome.value.entry->kernel.resources;
        CHECK_MESSAGE(resources.registers > 0, name);
        if (resources.spill_bytes() != 0) {
          ++spilling;
          MESSAGE(name << " spills " << resources.spill_bytes() << " bytes");
        }
        if (defaults.count(spec.readable_name) != 0) {
          CHECK_MESSAGE(resources.spill_bytes() == 0, "default config " << name << " spills "
                                                                        << resources.spill_bytes()
                                                                        << " bytes");
          CHECK_MESSAGE(resources.stack_bytes == 0, "default config "
                                                        << name << " has a stack frame of "
                                                        << resources.stack_bytes << " bytes");
          for (const std::string& advisory : resources.advisories) {
            FAIL_CHECK("default config " << name << " has a ptxas advisory: " << advisory);
          }
        }
      });
  MESSAGE(specs.size() << " specs for " << arch << ", " << defaults.size() << " defaults, "
                       << spilling << " spilling");
}

}  // namespace

TEST_CASE(
    "attention-forward: every listed spec compiles for sm_80, the defaults in registers "
    "with no ptxas advisory") {
  check_compile_matrix("sm_80");
}

TEST_CASE(
    "attention-forward: every listed spec compiles for sm_90a, the defaults in registers "
    "with no ptxas advisory") {
  check_compile_matrix("sm_90a");
}

TEST_CASE(
    "attention-forward: the configs with score and mask modifiers compile in registers for sm_80 "
    "and sm_90a (the TMA and decode kernels' with no ptxas advisory), and NVRTC's error for a "
    "bad expression names the field") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  const kernels::ScoreModifiers modifiers{"score - 0.125f * (h + 1) * (q_idx - kv_idx)",
                                          "q_idx / 64 == kv_idx / 64 || kv_idx < 4"};
  std::vector<KernelSpec> specs;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (int head_dim : {64, 128, 256}) {
      const kernels::ForwardConfig config =
          kernels::modifiers_forward_config(DType::bf16, head_dim, MaskKind::window, false, arch);
      specs.push_back(kernels::forward_spec(config, arch, modifiers));
    }
  }
  // The decode kernel's defaults with them (paged, GQA-packed, split: the most index work), 16
  // and 32 packed rows where they run: each warp evaluates them over all of its rows.
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (int head_dim : {64, 128, 256}) {
      for (std::int64_t rows : {16, 32}) {
        std::optional<kernels::ForwardConfig> config = kernels::decode_forward_config(
            DType::bf16, head_dim, MaskKind::window, false, arch, rows, false);
        if (!config) {  // O for 32 rows of 256 columns does not fit a warp's registers
          CHECK((head_dim == 256 && rows == 32));
          continue;
        }
        config->varlen = config->paged = config->pack_gqa = config->split = true;
        specs.push_back(kernels::forward_spec(*config, arch, modifiers));
      }
    }
  }
  // The dense forward's on sm_90a: the TMA defaults, causal (persistent up to head dim 128)
  // and not (clusters from head dim 128), and with a block mask (one CTA a tile, reading it).
  std::int32_t entries[4] = {};
  for (int head_dim : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      for (bool block_mask : {false, true}) {
        Attention attention{.head_dim = head_dim, .causal = causal};
        if (block_mask) {
          attention.block_mask = TensorView::contiguous(entries, DType::i32, {1, 1, 1, 4});
        }
        const kernels::ForwardConfig config =
            kernels::dense_modifiers_forward_config(DType::bf16, attention, "sm_90a");
        CHECK(config.path() == kernels::ForwardPath::tma);
        CHECK(!(block_mask && (config.persistent() || config.cluster())));
        specs.push_back(kernels::forward_spec(config, "sm_90a", modifiers));
      }
    }
  }
  testing::check_compiles_without_spills(cache, specs);
  const kernels::ScoreModifiers bad{"score + undefined_name", ""};
  const kernels::ForwardConfig config =
      kernels::modifiers_forward_config(DType::bf16, 64, MaskKind::none, false, "sm_80");
  CHECK_THROWS_WITH(cache.get(kernels::forward_spec(config, "sm_80", bad)),
                    doctest::Contains("attention.score_mod"));
}

TEST_CASE(
    "attention-forward: the fp8 forward's defaults compile in registers with no ptxas advisory: "
    "mma.sync on sm_89 at every head dim and on sm_90a up to 192, TMA and wgmma on sm_90a") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  std::vector<KernelSpec> specs;
  // With the window mask and softcap, the forms with the most per-score work (and registers).
  for (int head_dim : {16, 64, 96, 128, 192, 256}) {
    const auto form = [&](const kernels::ForwardConfig& config, const char* arch) {
      CHECK(config.path() == kernels::ForwardPath::fp8);
      specs.push_back(kernels::forward_spec(config, arch));
    };
    form(kernels::default_forward_config(DType::e4m3, head_dim, MaskKind::window, true, "sm_89"),
         "sm_89");
    // sm_90a converts fp8 mma.sync to 16-bit products, which spills at 256 (docs/attention.md).
    if (head_dim < 64 || head_dim > 192) continue;
    form(kernels::fallback_forward_config(DType::e4m3, head_dim, MaskKind::window, true, "sm_90a"),
         "sm_90a");
  }
  // The TMA form at each padded head dim, with one and two consumer warpgroups.
  for (int head_dim : {64, 128, 192, 256}) {
    for (const kernels::ForwardConfig& config :
         kernels::forward_configs(DType::e4m3, head_dim, MaskKind::window, true)) {
      if (config.fp8_tma()) specs.push_back(kernels::forward_spec(config, "sm_90a"));
    }
  }
  CHECK(kernels::default_forward_config(DType::e4m3, 128, MaskKind::window, true, "sm_90a")
            .fp8_tma());
  testing::check_compiles_without_spills(cache, specs);
}

TEST_CASE("attention-forward: every function of the modifier grammar compiles under NVRTC") {
  KernelCache::Options options;
  options.use_disk = false;
  KernelCache cache(options);
  const kernels::ScoreModifiers every{testing::every_function_score_mod(),
                                      testing::every_function_mask_mod()};
  Attention attention;
  attention.score_mod = every.score;
  attention.mask_mod = every.mask;
  CHECK_NOTHROW(kernels::validate_attention(attention));  // the grammar accepts it
  // One arch: the math functions are NVRTC's built-ins on every one.
  const kernels::ForwardConfig config =
      kernels::modifiers_forward_config(DType::bf16, 64, MaskKind::none, false, "sm_80");
  CHECK_NOTHROW(cache.get(kernels::forward_spec(config, "sm_80", every)));
}

// `flashjit run --counters` with the emulator's memory model: its lines for every op, its JSON,
// and its figures for the Hopper backward against what ncu measured on an H200 on 2026-11-27,
// on the kernels ncu measured: commit 9b37df3's (bench/results/2026-11-27-nvidia-h200-third-
// lease/run1/ncu.log: dQ's staging stores permuted, two stages) is today's at head dim 128; commit
// a8e4e32's (bench/results/2026-11-27-nvidia-h200/run2/ncu.log: plain staging rows, scalar
// stores) is today's with those stores put back as they were, from a copy of the templates.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"
#include "tools/cli_runner.hpp"

namespace flashjit::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  return json::parse(in);
}

TEST_CASE("run --counters: the memory model's lines and JSON for every op") {
  TempDir dir;
  const std::vector<std::vector<std::string>> runs = {
      {"--op", "attention-forward", "--seqlen-q", "128", "--heads", "2"},
      {"--op", "attention-forward", "--arch", "sm_90a", "--seqlen-q", "128", "--heads", "2"},
      {"--op", "attention-backward", "--arch", "sm_90a", "--seqlen-q", "128", "--heads", "2"},
      {"--op", "attention-forward", "--paged", "--seqlen-q", "1", "--seqlen-k", "300"},
      {"--op", "softmax", "--rows", "16", "--cols", "256"},
      {"--op", "layer-norm", "--rows", "16", "--cols", "256"},
      {"--op", "merge-states", "--seqlen-q", "16", "--heads", "2"},
      {"--op", "multiscale", "--seqlen-q", "32", "--heads", "1"}};
  for (std::vector<std::string> args : runs) {
    const fs::path json_path = dir.path() / "counters.json";
    args.insert(args.begin(), {"run", "--emulate", "--counters"});
    args.insert(args.end(), {"--counters-json", json_path.string()});
    const ChildResult run = flashjit_cli(args, dir.path().string());
    CAPTURE(run.output);
    REQUIRE(run.exit_code == 0);
    CHECK(contains(run.out, "PASS"));
    const double sector_use = line_value(run.out, "global_sector_use");
    CHECK(sector_use > 0);
    CHECK(sector_use <= 1.0);
    CHECK(line_value(run.out, "bytes_in_flight_per_sm") > 0);
    CHECK(line_value(run.out, "dram_bytes_modelled") > 0);
    CHECK(line_value(run.out, "dram_bytes_ratio") > 0);
    CHECK(contains(run.out, "shared_wavefronts_per_request"));
    const json report = read_json(json_path);
    REQUIRE(!report["kernels"].empty());
    CHECK(report["ratios"]["global_sector_use"].get<double>() ==
          doctest::Approx(sector_use).epsilon(1e-3));
    CHECK(report["ratios"]["dram_bytes_modelled"].get<double>() ==
          line_value(run.out, "dram_bytes_modelled"));
    CHECK(!report["sum"]["memory"]["sites"].empty());
  }
}

/// The dK/dV kernel's counters from `run`'s JSON: the backward at head dim 128 on one CTA's
/// worth of the 8k problem ncu profiled (128 keys against all 8192 queries: the same steps, in
/// the same mix, as each of its 2048 CTAs).
json backward_dkdv(const TempDir& dir, const std::vector<std::string>& env) {
  const fs::path json_path = dir.path() / "backward.json";
  const ChildResult run =
      flashjit_cli({"run", "--emulate", "--arch", "sm_90a", "--op", "attention-backward",
                    "--head-dim", "128", "--seqlen-q", "8192", "--seqlen-k", "128", "--heads", "1",
                    "--counters-json", json_path.string()},
                   dir.path().string(), env);
  CAPTURE(run.output);
  REQUIRE(run.exit_code == 0);
  const json report = read_json(json_path);
  for (const json& kernel : report["kernels"]) {
    const std::string name = kernel["kernel"].get<std::string>();
    if (name.find(".dkdv.") == std::string::npos) continue;
    // The config ncu measured (the default then and now).
    CHECK(name.find("hdim128.bf16.br64.bc128.w12") != std::string::npos);
    REQUIRE(kernel["counters"]["ctas"].get<int>() == 1);
    return kernel["counters"]["memory"];
  }
  FAIL("no dkdv kernel in " << json_path);
  return {};
}

/// Per kind: requests, wavefronts and ideal wavefronts summed over the shared sites, bytes and
/// sector bytes over the global loads.
struct Totals {
  double requests = 0, wavefronts = 0, ideal = 0, bytes = 0, sector_bytes = 0;
};
Totals totals(const json& memory, const std::string& kind) {
  Totals t;
  for (const json& site : memory["sites"]) {
    if (site["kind"] != kind) continue;
    t.requests += site["requests"].get<double>();
    if (site.contains("wavefronts")) {
      t.wavefronts += site["wavefronts"].get<double>();
      t.ideal += site["ideal_wavefronts"].get<double>();
    } else {
      t.bytes += site["bytes"].get<double>();
      t.sector_bytes += site["sector_bytes"].get<double>();
    }
  }
  return t;
}

bool within_25_percent(double modelled, double measured) {
  return modelled > 0.75 * measured && modelled < 1.25 * measured;
}

// ncu's figures, from the logs (2048 CTAs each): its "N-way" is wavefronts per request.
constexpr double kCtas = 2048;
// Shared reads ncu's runs did not have: since then each consumer warp reads its query columns'
// LSE and D from the slot's row statistics (8-byte reads of a row pair, 16 a step: 8 column
// groups, LSE and D), where it had loaded them from global memory; 128 steps, 8 warps a CTA.
constexpr double kStatReads = 128 * 8 * 16;

TEST_CASE("memory model: the Hopper backward's shared and global requests as ncu counted them") {
  TempDir dir;
  const json memory = backward_dkdv(dir, {});
  // Third lease: stores 117443368 wavefronts over 69206016 requests (1.7-way), loads 1954961
  // over 262144 (7.5-way; 4 ideal each), global loads 16.0 of every 32 bytes a sector.
  const Totals stores = totals(memory, "shared_store");
  const Totals loads = totals(memory, "shared_load");
  const Totals global = totals(memory, "global_load");
  MESSAGE("stores " << stores.wavefronts / stores.requests << " a request (ncu 1.70), loads "
                    << loads.wavefronts / loads.requests << ", global loads " << global.requests);
  CHECK(stores.requests == 69206016 / kCtas);  // the same instructions, the same count
  CHECK(within_25_percent(stores.wavefronts / stores.requests, 117443368.0 / 69206016));
  CHECK(loads.requests == 262144 / kCtas + kStatReads);
  // The epilogue's: ncu 1954961 - 906385 conflicts = 4 a request; the statistics' 2 (8 bytes).
  CHECK(loads.ideal == 4 * 262144 / kCtas + 2 * kStatReads);
  // The epilogue's loads are 16-byte reads of consecutive chunks: 4 wavefronts by their
  // addresses. ncu counted 7.5 (6.7 in the run before, the same addresses): the rest is other
  // shared traffic meeting them in the banks, which a per-request model does not see.
  CHECK(loads.wavefronts == loads.ideal);
  // ncu counted the consumers' LSE and D loads from global memory (16 of every 32 bytes of a
  // sector used); they come by TMA with Q and dO now, so the kernel has no global load left.
  CHECK(global.requests == 0);
}

/// `dir`/templates: a copy of the kernel templates with the Hopper backward's dQ staging stores
/// as commit a8e4e32 had them: each fp32 on its own (two 4-byte stores where there is one of 8
/// bytes now), into plain rows of head_dim floats (dq_accum's layout plain to match).
fs::path templates_before_permutation(const TempDir& dir) {
  const fs::path copy = dir.path() / "templates";
  fs::copy(fs::path(FLASHJIT_SOURCE_DIR) / "ops", copy, fs::copy_options::recursive);
  auto edit = [&](const std::string& file, const std::string& from, const std::string& to,
                  const std::string& replacement) {
    std::ifstream in(copy / file);
    std::stringstream text;
    text << in.rdbuf();
    std::string source = text.str();
    const std::size_t begin = source.find(from);
    REQUIRE_MESSAGE(begin != std::string::npos,
                    file << " changed: the reconstruction of commit a8e4e32's stores needs "
                            "updating");
    const std::size_t end = source.find(to, begin);
    REQUIRE(end != std::string::npos);
    source.replace(begin, end - begin, replacement);
    std::ofstream(copy / file) << source;
  };
  edit("attention/hopper/tma_backward_kernel.cuh", "store_shared_pair(line, col ^ column_xor,", ";",
       "store_shared(line, col, dq[panel].frag[0][group][2 * half]);\n"
       "          store_shared(line, col + 1, dq[panel].frag[0][group][2 * half + 1])");
  edit("attention/parts/dq_accum_layout.cuh", "  return int(row & row_bits) << 3;", "\n}",
       "  return int(row & row_bits) * 0;");
  return copy;
}

TEST_CASE("memory model: the Hopper backward's dQ staging stores before the permutation") {
  TempDir dir;
  const fs::path templates = templates_before_permutation(dir);
  const json memory = backward_dkdv(dir, {"FLASHJIT_TEMPLATE_DIR=" + templates.string()});
  // ncu on commit a8e4e32: stores 587295189 wavefronts over 102760448 requests (5.7-way).
  const Totals stores = totals(memory, "shared_store");
  MESSAGE("stores " << stores.wavefronts / stores.requests << " a request (ncu 5.72)");
  CHECK(stores.requests == 102760448 / kCtas);
  CHECK(within_25_percent(stores.wavefronts / stores.requests, 587295189.0 / 102760448));
  const Totals loads = totals(memory, "shared_load");
  CHECK(loads.requests == 262144 / kCtas + kStatReads);
}

}  // namespace
}  // namespace flashjit::testing

#pragma once
// `flashjit run --counters`: the emulator's work counters of an op's kernels, how they compare
// with the least work the problem needs (docs/emulator.md), and, since --counters turns the
// emulator's memory model on, what ncu's memory tables would show (docs/emulator.md).
// `--counters-json FILE` writes the same, per kernel and per instruction site, as JSON.
#include <string>
#include <vector>

#include "flashjit/runtime.hpp"
#include "flashjit/work_counters.hpp"
#include "op_commands.hpp"

namespace flashjit::tools {

/// What the problem needs at least: its useful tensor FLOPs (0 for ops without products) and
/// global bytes.
struct WorkMinimum {
  double flops = 0;
  double bytes = 0;
};

/// The latency Little's law is applied at for bytes_in_flight_bandwidth: about a DRAM load's on
/// an H100 under load.
inline constexpr double kModelledLatencyNs = 1000.0;

/// With --counters, prints the summed counters of the kernels whose names start with `prefix`,
/// one `name value` line each, their ratios to `minimum`, and the memory model's lines
/// (shared_wavefronts_per_request, global_sector_use, bytes_in_flight_per_sm,
/// dram_bytes_modelled, dram_bytes_ratio); with --counters-json, writes them to that file.
/// Does nothing when neither was given.
void report_work(const RunContext& context, const Runtime& runtime, const std::string& prefix,
                 WorkMinimum minimum);

/// The JSON report_work writes (kernels, their sum, the ratios), for tests and benchmarks.
std::string work_json(const std::vector<KernelWork>& work, const std::string& prefix,
                      WorkMinimum minimum, const DeviceInfo& device);

}  // namespace flashjit::tools

#include "work_report.hpp"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

namespace flashjit::tools {
namespace {

using nlohmann::json;

WorkCounters summed(const std::vector<KernelWork>& work, const std::string& prefix) {
  WorkCounters sum;
  for (const KernelWork& kernel : work) {
    if (kernel.kernel.rfind(prefix, 0) == 0) sum += kernel.work;
  }
  return sum;
}

json site_json(const MemorySite& s) {
  json j = {
      {"site", s.site}, {"instruction", s.instruction}, {"kind", s.kind}, {"requests", s.requests}};
  if (s.kind != "global_load" && s.kind != "global_store") {
    j["wavefronts"] = s.wavefronts;
    j["ideal_wavefronts"] = s.ideal_wavefronts;
    j["wavefronts_per_request"] = s.wavefronts_per_request();
    j["conflict_degree"] = s.conflict_degree();
  } else {
    j["bytes"] = s.bytes;
    j["sector_bytes"] = s.sector_bytes;
    j["sector_use"] = s.sector_bytes > 0 ? double(s.bytes) / double(s.sector_bytes) : 1.0;
  }
  return j;
}

json counters_json(const WorkCounters& w) {
  json j = {{"tensor_flops", w.tensor_flops},
            {"shared_bytes_read", w.shared_bytes_read},
            {"shared_bytes_written", w.shared_bytes_written},
            {"global_bytes_read", w.global_bytes_read},
            {"global_bytes_written", w.global_bytes_written},
            {"barriers", w.barriers},
            {"ctas", w.ctas},
            {"ldmatrix_bytes", w.ldmatrix_bytes},
            {"kv_loads_ahead", w.kv_loads_ahead},
            {"q_loads_ahead", w.q_loads_ahead}};
  const MemoryCounters& m = w.memory;
  if (!m.modelled) return j;
  json sites = json::array();
  for (const MemorySite& s : m.sites) sites.push_back(site_json(s));
  j["memory"] = {{"shared_requests", m.shared_requests},
                 {"shared_wavefronts", m.shared_wavefronts},
                 {"shared_ideal_wavefronts", m.shared_ideal_wavefronts},
                 {"wgmma_core_matrices", m.wgmma_core_matrices},
                 {"wgmma_wavefronts", m.wgmma_wavefronts},
                 {"global_requests", m.global_requests},
                 {"global_bytes", m.global_bytes},
                 {"global_sector_bytes", m.global_sector_bytes},
                 {"bytes_in_flight_per_cta", m.bytes_in_flight_per_cta},
                 {"ctas_per_sm", m.ctas_per_sm},
                 {"bytes_in_flight_per_sm", m.bytes_in_flight_per_sm},
                 {"dram_bytes_read", m.dram_bytes_read},
                 {"dram_bytes_written", m.dram_bytes_written},
                 {"sites", sites}};
  return j;
}

// The ratios and the memory model's figures of a sum, by the names --counters prints.
json ratios_json(const WorkCounters& sum, WorkMinimum minimum, const DeviceInfo& device) {
  const double shared = double(sum.shared_bytes_read) + double(sum.shared_bytes_written);
  const double global = double(sum.global_bytes_read) + double(sum.global_bytes_written);
  json j;
  j["tensor_flops_ratio"] =
      minimum.flops > 0 ? json(double(sum.tensor_flops) / minimum.flops) : json(nullptr);
  j["global_bytes_ratio"] = global / minimum.bytes;
  j["shared_bytes_per_tensor_flop"] =
      sum.tensor_flops > 0 ? shared / double(sum.tensor_flops) : 0.0;
  const MemoryCounters& m = sum.memory;
  if (!m.modelled) return j;
  const MemorySite* worst = m.worst_shared_site();
  j["shared_wavefronts_per_request"] = {
      {"worst", m.worst_shared_wavefronts_per_request()},
      {"worst_conflict_degree", worst != nullptr ? worst->conflict_degree() : 0.0},
      {"worst_site", worst != nullptr ? json(worst->site + " " + worst->instruction) : json()},
      {"average", m.shared_wavefronts_per_request()}};
  j["global_sector_use"] = m.global_sector_use();
  j["bytes_in_flight_per_sm"] = m.bytes_in_flight_per_sm;
  j["bytes_in_flight_bandwidth_gb_per_s"] =
      double(m.bytes_in_flight_per_sm) * double(device.sm_count) / kModelledLatencyNs;
  j["modelled_latency_ns"] = kModelledLatencyNs;
  j["dram_bytes_modelled"] = m.dram_bytes();
  j["dram_bytes_ratio"] = double(m.dram_bytes()) / minimum.bytes;
  return j;
}

void print_line(const char* name, unsigned long long value) {
  std::printf("%-29s %llu\n", name, value);
}

void print_memory(const WorkCounters& sum, const json& ratios) {
  const MemoryCounters& m = sum.memory;
  if (!m.modelled) return;
  const MemorySite* worst = m.worst_shared_site();
  if (worst != nullptr) {
    std::printf("%-29s %.4f worst (%s %s: %.2fx the fewest), %.4f average\n",
                "shared_wavefronts_per_request", worst->wavefronts_per_request(),
                worst->site.c_str(), worst->instruction.c_str(), worst->conflict_degree(),
                m.shared_wavefronts_per_request());
  } else {
    std::printf("%-29s - (no shared request)\n", "shared_wavefronts_per_request");
  }
  std::printf("%-29s %.4f\n", "global_sector_use", m.global_sector_use());
  std::printf("%-29s %llu (%u CTAs of %llu)\n", "bytes_in_flight_per_sm",
              static_cast<unsigned long long>(m.bytes_in_flight_per_sm), m.ctas_per_sm,
              static_cast<unsigned long long>(m.bytes_in_flight_per_cta));
  std::printf("%-29s %.1f GB/s at %.0f ns\n", "bytes_in_flight_bandwidth",
              ratios["bytes_in_flight_bandwidth_gb_per_s"].get<double>(), kModelledLatencyNs);
  print_line("dram_bytes_modelled", m.dram_bytes());
  std::printf("%-29s %.4f\n", "dram_bytes_ratio", ratios["dram_bytes_ratio"].get<double>());
}

}  // namespace

std::string work_json(const std::vector<KernelWork>& work, const std::string& prefix,
                      WorkMinimum minimum, const DeviceInfo& device) {
  json kernels = json::array();
  for (const KernelWork& kernel : work) {
    if (kernel.kernel.rfind(prefix, 0) != 0) continue;
    kernels.push_back({{"kernel", kernel.kernel},
                       {"launches", kernel.launches},
                       {"counters", counters_json(kernel.work)}});
  }
  const WorkCounters sum = summed(work, prefix);
  const json report = {
      {"device",
       {{"arch", device.arch()}, {"sms", device.sm_count}, {"l2_bytes", device.l2_bytes}}},
      {"minimum", {{"tensor_flops", minimum.flops}, {"global_bytes", minimum.bytes}}},
      {"kernels", kernels},
      {"sum", counters_json(sum)},
      {"ratios", ratios_json(sum, minimum, device)}};
  return report.dump(2) + "\n";
}

void report_work(const RunContext& context, const Runtime& runtime, const std::string& prefix,
                 WorkMinimum minimum) {
  const RunBasics& basics = context.basics;
  if (!basics.counting()) return;
  const std::vector<KernelWork> work = runtime.emulated_work();
  if (!basics.counters_json.empty()) {
    std::ofstream out(basics.counters_json);
    out << work_json(work, prefix, minimum, runtime.device());
    if (!out) {
      throw Error(ErrorKind::io, "--counters-json: cannot write '" + basics.counters_json + "'");
    }
  }
  if (!basics.counters) return;
  const WorkCounters sum = summed(work, prefix);
  print_line("tensor_flops", sum.tensor_flops);
  print_line("shared_bytes_read", sum.shared_bytes_read);
  print_line("shared_bytes_written", sum.shared_bytes_written);
  print_line("global_bytes_read", sum.global_bytes_read);
  print_line("global_bytes_written", sum.global_bytes_written);
  print_line("barriers", sum.barriers);
  print_line("ctas", sum.ctas);
  print_line("ldmatrix_bytes", sum.ldmatrix_bytes);
  for (const auto& [name, ahead] : {std::pair{"kv_loads_ahead", sum.kv_loads_ahead},
                                    std::pair{"q_loads_ahead", sum.q_loads_ahead}}) {
    if (ahead >= 0) {
      print_line(name, static_cast<unsigned long long>(ahead));
    } else {
      std::printf("%-29s -\n", name);
    }
  }
  const json ratios = ratios_json(sum, minimum, runtime.device());
  if (ratios["tensor_flops_ratio"].is_null()) {
    std::printf("%-29s - (no tensor products)\n", "tensor_flops_ratio");
  } else {
    std::printf("%-29s %.4f\n", "tensor_flops_ratio", ratios["tensor_flops_ratio"].get<double>());
  }
  std::printf("%-29s %.4f\n", "global_bytes_ratio", ratios["global_bytes_ratio"].get<double>());
  std::printf("%-29s %.4f\n", "shared_bytes_per_tensor_flop",
              ratios["shared_bytes_per_tensor_flop"].get<double>());
  print_memory(sum, ratios);
}

}  // namespace flashjit::tools

// Sums of the emulator's work counters (include/flashjit/work_counters.hpp).
#include "flashjit/work_counters.hpp"

#include <algorithm>
#include <utility>

namespace flashjit {

WorkCounters& WorkCounters::operator+=(const WorkCounters& other) {
  tensor_flops += other.tensor_flops;
  shared_bytes_read += other.shared_bytes_read;
  shared_bytes_written += other.shared_bytes_written;
  global_bytes_read += other.global_bytes_read;
  global_bytes_written += other.global_bytes_written;
  barriers += other.barriers;
  ctas += other.ctas;
  ldmatrix_bytes += other.ldmatrix_bytes;
  memory += other.memory;
  if (other.kv_loads_ahead >= 0) {
    kv_loads_ahead = kv_loads_ahead < 0 ? other.kv_loads_ahead
                                        : std::min(kv_loads_ahead, other.kv_loads_ahead);
  }
  if (other.q_loads_ahead >= 0) {
    q_loads_ahead =
        q_loads_ahead < 0 ? other.q_loads_ahead : std::min(q_loads_ahead, other.q_loads_ahead);
  }
  return *this;
}

double MemorySite::wavefronts_per_request() const {
  return requests > 0 ? double(wavefronts) / double(requests) : 0.0;
}

double MemorySite::conflict_degree() const {
  return ideal_wavefronts > 0 ? double(wavefronts) / double(ideal_wavefronts) : 0.0;
}

double MemoryCounters::shared_wavefronts_per_request() const {
  return shared_requests > 0 ? double(shared_wavefronts) / double(shared_requests) : 0.0;
}

const MemorySite* MemoryCounters::worst_shared_site() const {
  const MemorySite* worst = nullptr;
  for (const MemorySite& site : sites) {
    if (site.kind == "global_load" || site.kind == "global_store") continue;
    const auto rank = [](const MemorySite& s) {
      return std::pair(s.conflict_degree(), s.wavefronts_per_request());
    };
    if (worst == nullptr || rank(site) > rank(*worst)) worst = &site;
  }
  return worst;
}

double MemoryCounters::worst_shared_wavefronts_per_request() const {
  const MemorySite* worst = worst_shared_site();
  return worst != nullptr ? worst->wavefronts_per_request() : 0.0;
}

double MemoryCounters::global_sector_use() const {
  return global_sector_bytes > 0 ? double(global_bytes) / double(global_sector_bytes) : 1.0;
}

MemoryCounters& MemoryCounters::operator+=(const MemoryCounters& other) {
  modelled = modelled || other.modelled;
  shared_requests += other.shared_requests;
  shared_wavefronts += other.shared_wavefronts;
  shared_ideal_wavefronts += other.shared_ideal_wavefronts;
  wgmma_core_matrices += other.wgmma_core_matrices;
  wgmma_wavefronts += other.wgmma_wavefronts;
  global_requests += other.global_requests;
  global_bytes += other.global_bytes;
  global_sector_bytes += other.global_sector_bytes;
  if (other.bytes_in_flight_per_sm >= bytes_in_flight_per_sm) {
    bytes_in_flight_per_sm = other.bytes_in_flight_per_sm;
    bytes_in_flight_per_cta = other.bytes_in_flight_per_cta;
    ctas_per_sm = other.ctas_per_sm;
  }
  dram_bytes_read += other.dram_bytes_read;
  dram_bytes_written += other.dram_bytes_written;
  for (const MemorySite& site : other.sites) {
    auto same = std::find_if(sites.begin(), sites.end(), [&](const MemorySite& s) {
      return s.site == site.site && s.instruction == site.instruction && s.kind == site.kind;
    });
    if (same == sites.end()) {
      sites.push_back(site);
      continue;
    }
    same->requests += site.requests;
    same->wavefronts += site.wavefronts;
    same->ideal_wavefronts += site.ideal_wavefronts;
    same->bytes += site.bytes;
    same->sector_bytes += site.sector_bytes;
  }
  return *this;
}

WorkCounters total_work(const std::vector<KernelWork>& kernels) {
  WorkCounters total;
  for (const KernelWork& kernel : kernels) total += kernel.work;
  return total;
}

}  // namespace flashjit

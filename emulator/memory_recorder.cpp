// The memory model's recorder (memory_recorder.hpp): lanes into requests, requests into the
// sites' counters, the CTAs' reads into the L2 model.
#include "emulator/memory_recorder.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_set>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr std::uint64_t kSectorBytes = 32;

// One launch at a time runs in this copy of the emulator.
struct LaunchMemory {
  bool on = false;
  ModelledGpu gpu;
  MemoryCounters counters;
  // A site's counters by its readable name, so one line reached from several copies of a
  // header (other string addresses) counts once; and by the Site's own pointers, which most
  // calls hit without building the name.
  std::map<std::tuple<std::string, unsigned, std::string, AccessKind>, std::size_t> site_index;
  std::map<std::tuple<const char*, unsigned, const char*, AccessKind>, std::size_t> seen;
  std::vector<std::vector<ByteRun>> cta_reads;  // by linear block index
  std::unordered_set<std::uint64_t> written_sectors;
};
LaunchMemory g_launch;

// "attention/fa2/forward_kernel.cuh" from any path: the path under the template root, which
// is what a reader looks for. Built-in instances compile from the source tree's ops/, host-
// compiled kernels from a temporary folder's templates/; any other path keeps its last two parts.
std::string short_site(const char* file, unsigned line) {
  std::string path = file != nullptr ? file : "?";
  std::size_t root = std::string::npos;
  for (const char* marker : {"/ops/", "/templates/"}) {
    const std::size_t at = path.rfind(marker);
    if (at != std::string::npos && (root == std::string::npos || at > root)) {
      root = at + std::char_traits<char>::length(marker);
    }
  }
  if (root != std::string::npos) {
    path = path.substr(root);
  } else if (const std::size_t last = path.rfind('/'); last != std::string::npos && last > 0) {
    const std::size_t folder = path.rfind('/', last - 1);
    path = path.substr(folder == std::string::npos ? 0 : folder + 1);
  }
  return path + ":" + std::to_string(line);
}

std::size_t counters_index(const Site& site) {
  const auto pointers = std::make_tuple(site.file, site.line, site.instruction, site.kind);
  if (const auto hit = g_launch.seen.find(pointers); hit != g_launch.seen.end()) {
    return hit->second;
  }
  auto key = std::make_tuple(short_site(site.file, site.line), site.line,
                             std::string(site.instruction), site.kind);
  auto [it, added] = g_launch.site_index.emplace(key, g_launch.counters.sites.size());
  if (added) {
    SiteCounters fresh;
    fresh.site = std::get<0>(key);
    fresh.instruction = site.instruction;
    fresh.kind = site.kind;
    g_launch.counters.sites.push_back(std::move(fresh));
  }
  g_launch.seen.emplace(pointers, it->second);
  return it->second;
}

void append_read(BlockMemory& block, std::uint64_t begin, std::uint64_t end) {
  if (!block.reads.empty() && block.reads.back().end == begin) {
    block.reads.back().end = end;
  } else {
    block.reads.push_back({begin, end});
  }
}

void note_in_flight(BlockMemory& block) {
  const std::int64_t now = block.async_in_flight + block.held_in_flight +
                           static_cast<std::int64_t>(block.plain_in_flight);
  if (now > 0) block.most_in_flight = std::max(block.most_in_flight, std::uint64_t(now));
}

// Prices one warp request of `site` and files it under its counters (counters_index).
void price(Machine& m, std::size_t warp, const Site& site, std::size_t counters_at,
           const WarpRequest& request) {
  SiteCounters& counters = g_launch.counters.sites[counters_at];
  ++counters.requests;
  MemoryCounters& total = g_launch.counters;
  if (site.kind != AccessKind::global_load && site.kind != AccessKind::global_store) {
    const SharedCost cost = shared_request_cost(request);
    counters.wavefronts += cost.wavefronts;
    counters.ideal_wavefronts += cost.ideal;
    if (site.kind == AccessKind::wgmma_operand) {  // not an LSU request: kept apart
      ++total.wgmma_core_matrices;
      total.wgmma_wavefronts += cost.wavefronts;
    } else {
      ++total.shared_requests;
      total.shared_wavefronts += cost.wavefronts;
      total.shared_ideal_wavefronts += cost.ideal;
    }
    return;
  }
  const SectorCost cost = global_request_cost(request);
  counters.bytes += cost.bytes;
  counters.sector_bytes += cost.sector_bytes;
  ++total.global_requests;
  total.global_bytes += cost.bytes;
  total.global_sector_bytes += cost.sector_bytes;
  if (site.kind == AccessKind::global_store) {
    g_launch.written_sectors.insert(cost.sectors.begin(), cost.sectors.end());
    return;
  }
  for (const std::uint64_t s : cost.sectors) {
    append_read(m.memory, s * kSectorBytes, (s + 1) * kSectorBytes);
  }
  // A plain load is in flight until the warp's next load (its value is used before then); a
  // held load ends the one before it too but counts until its own use (model_in_flight), as
  // cp.async counts until it lands.
  if (std::strcmp(site.instruction, "ld.global") == 0) {
    BlockMemory& block = m.memory;
    block.plain_in_flight -= block.warp_load_bytes[warp];
    block.warp_load_bytes[warp] = site.held ? 0 : cost.sector_bytes;
    block.plain_in_flight += block.warp_load_bytes[warp];
    note_in_flight(block);
  }
}

// Takes the next access of each lane of `lanes` that has one into a request, and prices it.
void gather(Machine& m, std::size_t warp, PendingSite& pending, std::uint32_t lanes) {
  WarpRequest request{};
  for (std::uint32_t rest = lanes & pending.waiting; rest != 0; rest &= rest - 1) {
    const int lane = std::countr_zero(rest);
    std::vector<LaneAccess>& queue = pending.lanes[lane];
    request[lane] = queue[pending.head[lane]++];
    if (pending.head[lane] == queue.size()) {
      queue.clear();
      pending.head[lane] = 0;
      pending.waiting &= ~(1u << lane);
    }
  }
  price(m, warp, pending.site, pending.counters, request);
}

void flush(Machine& m) {
  for (std::size_t warp = 0; warp < m.memory.warps.size(); ++warp) {
    for (PendingSite& pending : m.memory.warps[warp]) {
      while (pending.waiting != 0) gather(m, warp, pending, pending.waiting);
    }
  }
}

PendingSite& pending_of(std::vector<PendingSite>& sites, const Site& site) {
  for (auto it = sites.rbegin(); it != sites.rend(); ++it) {
    if (it->site.file == site.file && it->site.line == site.line &&
        it->site.instruction == site.instruction && it->site.kind == site.kind) {
      return *it;
    }
  }
  PendingSite& fresh = sites.emplace_back();
  fresh.site = site;
  fresh.counters = counters_index(site);
  return fresh;
}

}  // namespace

void model_launch_begin(const LaunchConfig& config) {
  g_launch = LaunchMemory{};
  if (!config.memory_model) return;
  g_launch.on = true;
  g_launch.gpu = *config.memory_model;
  g_launch.counters.modelled = true;
  g_launch.cta_reads.resize(static_cast<std::size_t>(config.grid.volume()));
}

MemoryCounters model_launch_end(const LaunchConfig& config) {
  if (!g_launch.on) return {};
  MemoryCounters counters = std::move(g_launch.counters);
  counters.ctas_per_sm = resident_ctas_per_sm(
      g_launch.gpu, static_cast<unsigned>(config.block.volume()), config.shared_bytes);
  counters.dram_bytes_read = modelled_dram_read_bytes(
      g_launch.cta_reads, g_launch.gpu.l2_bytes, g_launch.gpu.sms * counters.ctas_per_sm);
  counters.dram_bytes_written = g_launch.written_sectors.size() * kSectorBytes;
  if (g_launch.gpu.keep_traces) counters.cta_reads = std::move(g_launch.cta_reads);
  g_launch = LaunchMemory{};
  return counters;
}

void model_block_begin(Machine& m) {
  BlockMemory& block = m.memory;
  block.on = g_launch.on;
  if (!block.on) return;
  const std::size_t warps = m.warps.size();
  block.warps.assign(warps, {});
  block.warp_load_bytes.assign(warps, 0);
  block.plain_in_flight = 0;
  block.async_in_flight = 0;
  block.held_in_flight = 0;
  block.thread_held.assign(m.config->block.volume(), 0);
  block.thread_most_held.assign(m.config->block.volume(), 0);
  block.most_in_flight = 0;
  block.reads.clear();
}

void model_block_end(Machine& m) {
  BlockMemory& block = m.memory;
  if (!block.on) return;
  flush(m);
  std::int64_t held_peaks = 0;  // every thread at its most at once, as on the GPU
  for (const std::int64_t most : block.thread_most_held) held_peaks += most;
  g_launch.counters.bytes_in_flight_per_cta =
      std::max({g_launch.counters.bytes_in_flight_per_cta, block.most_in_flight,
                static_cast<std::uint64_t>(held_peaks)});
  const Dim3 grid = m.config->grid;
  const Dim3 b = m.block_index;
  const std::size_t linear = b.x + std::size_t{grid.x} * (b.y + std::size_t{grid.y} * b.z);
  if (linear < g_launch.cta_reads.size()) g_launch.cta_reads[linear] = std::move(block.reads);
  block.reads.clear();
  block.on = false;
}

void model_block_barrier(Machine& m) {
  if (m.memory.on) flush(m);
}

void model_access(Machine& m, int thread, const void* address, std::size_t bytes,
                  const Site& site) {
  BlockMemory& block = m.memory;
  if (!block.on || thread < 0) return;
  const auto warp = static_cast<std::size_t>(thread) / 32;
  const int lane = thread % 32;
  std::uint64_t at = reinterpret_cast<std::uintptr_t>(address);
  if (site.kind == AccessKind::shared_load || site.kind == AccessKind::shared_store) {
    at -= reinterpret_cast<std::uintptr_t>(m.shared_begin);
  }
  PendingSite& pending = pending_of(block.warps[warp], site);
  pending.lanes[lane].push_back({at, static_cast<std::uint32_t>(bytes)});
  pending.waiting |= 1u << lane;
  // Once every live lane has one, the next request is whole: lanes that exited since their
  // access join it with theirs.
  const std::uint32_t live = m.warp_live[warp];
  if ((pending.waiting & live) == live) gather(m, warp, pending, pending.waiting);
}

void model_core_matrix(Machine& m, const std::array<std::uint32_t, 8>& rows, const Site& site) {
  if (!m.memory.on) return;
  WarpRequest request{};  // a collective: its request is whole as it stands
  for (std::size_t i = 0; i < rows.size(); ++i) request[i] = {rows[i], 16};
  price(m, 0, site, counters_index(site), request);
}

void model_bulk_read(Machine& m, const void* address, std::size_t bytes) {
  if (!m.memory.on || bytes == 0) return;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  append_read(m.memory, at, at + bytes);
}

void model_bulk_write(Machine& m, const void* address, std::size_t bytes) {
  if (!m.memory.on || bytes == 0) return;
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  for (std::uint64_t s = at / kSectorBytes; s <= (at + bytes - 1) / kSectorBytes; ++s) {
    g_launch.written_sectors.insert(s);
  }
}

void model_in_flight(Machine& m, std::int64_t bytes) {
  if (!m.memory.on) return;
  m.memory.async_in_flight += bytes;
  note_in_flight(m.memory);
}

void model_held_load(Machine& m, int thread, std::int64_t bytes) {
  BlockMemory& block = m.memory;
  if (!block.on || thread < 0) return;
  const auto t = static_cast<std::size_t>(thread);
  block.held_in_flight += bytes;
  block.thread_held[t] += bytes;
  block.thread_most_held[t] = std::max(block.thread_most_held[t], block.thread_held[t]);
  note_in_flight(block);
}

}  // namespace flashjit::emulator::detail

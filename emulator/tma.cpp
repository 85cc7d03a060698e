// TMA bulk tensor copies on the emulator, from the PTX ISA section "cp.async.bulk.tensor" and
// the CUDA Driver API's tensor maps:
//  - the box at integer element coordinates (innermost first) is copied between global memory
//    and a dense box image in shared memory, 16-byte chunks permuted by the map's swizzle;
//    elements outside [0, globalDim) read as zero and are not stored;
//  - a load completes with complete_tx(box bytes) on its mbarrier, out-of-bounds fill included;
//  - a store reads its shared source in the async proxy and is tracked by bulk groups
//    (cp.async.bulk.commit_group / wait_group); its box may run past the tensor's end but not
//    start before it: a negative coordinate is undefined for a store (the CUDA programming
//    guide: "the top left corner cannot have any negative indices"), reported and skipped;
//  - element strides: dimension d >= 1 of the box visits coordinates c, c + s, c + 2s, ...
//    (tensor_map.cpp), in both directions.
// Modelling choices: a load's global bytes are read and its shared bytes written at issue, and
// those bytes are marked pending until the async proxy completes the load: when no thread can
// run (the scheduler calls complete_tma_loads), or at block end; exploring orderings, also at
// issue or between threads' steps (explore.cpp). Touching them before the
// mbarrier phase completes is reported (tma_load_pending); after completion they carry no
// writer, so readers that waited on the mbarrier need no __syncthreads. A store writes global
// memory at issue and guards its shared source until its bulk group is waited for.
// A multicast load (.multicast::cluster, ctaMask) reads global memory once and writes the same
// box at the same shared offset of every block of the cluster its mask names, each completing
// on its own mbarrier at the barrier's offset; each block's copy lands on its own.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr std::uint32_t kChunk = 16;

void report(Machine& m, int thread, FindingKind kind, std::uintptr_t address, long long offset,
            std::string text) {
  Finding finding;
  finding.kind = kind;
  finding.address = address;
  finding.offset = offset;
  finding.message = std::move(text);
  record(m, thread, std::move(finding));
}

// The operands every TMA copy needs: a valid map, a 128-byte aligned shared box inside the
// dynamic shared memory. Returns the box's shared offset, or false (reported).
bool valid_copy(Machine& m, int self, const TensorMap* map, const void* shared, const char* what,
                std::uint32_t& offset) {
  const auto at = reinterpret_cast<std::uintptr_t>(shared);
  const auto begin = reinterpret_cast<std::uintptr_t>(m.shared_begin);
  const long long off = static_cast<long long>(at - begin);
  if (map == nullptr) {
    report(m, self, FindingKind::tma_invalid, at, off, std::string(what) + ": no tensor map");
    return false;
  }
  if (const std::string problem = tensor_map_problem(*map); !problem.empty()) {
    report(m, self, FindingKind::tma_invalid, at, off,
           std::string(what) + ": the tensor map is invalid: " + problem + "; skipped");
    return false;
  }
  const auto bytes = static_cast<long long>(tensor_map_box_bytes(*map));
  if (off < 0 || off + bytes > static_cast<long long>(m.config->shared_bytes) || off % 128 != 0) {
    report(m, self, FindingKind::tma_invalid, at, off,
           std::string(what) + " with its shared box at shared offset " + std::to_string(off) +
               " (" + std::to_string(bytes) +
               " bytes): it must be 128-byte aligned and inside the dynamic shared memory (" +
               std::to_string(m.config->shared_bytes) + " bytes); skipped");
    return false;
  }
  offset = static_cast<std::uint32_t>(off);
  return true;
}

// One row of the box: the box's dimensions 1.. at `row` (row i of dimension d is global
// coordinate coords[d] + i * elementStrides[d]), in global coordinates; the in-bounds
// elements of dimension 0 are [lo, hi) of the box, at `global` for element lo.
struct Row {
  bool inside = false;
  std::uint32_t lo = 0, hi = 0;
  const std::byte* global = nullptr;
};

Row row_of(const TensorMap& map, const std::int32_t* coords, std::uint32_t row) {
  Row r;
  const auto* base = static_cast<const std::byte*>(map.global_address);
  std::int64_t offset = 0;
  for (int d = 1; d < map.rank; ++d) {
    const std::uint32_t extent = tensor_map_box_elements(map, d);
    const auto i = static_cast<std::int64_t>(row % extent);
    row /= extent;
    const std::int64_t g = coords[d] + i * map.element_strides[static_cast<std::size_t>(d)];
    if (g < 0 || g >= static_cast<std::int64_t>(map.dims[static_cast<std::size_t>(d)])) return r;
    offset += g * static_cast<std::int64_t>(map.strides[static_cast<std::size_t>(d)]);
  }
  const std::int64_t c0 = coords[0], dim0 = static_cast<std::int64_t>(map.dims[0]);
  const std::int64_t lo = std::max<std::int64_t>(0, -c0);
  const std::int64_t hi = std::min<std::int64_t>(map.box[0], dim0 - c0);
  if (lo >= hi) return r;
  r.inside = true;
  r.lo = static_cast<std::uint32_t>(lo);
  r.hi = static_cast<std::uint32_t>(hi);
  r.global = base + offset + (c0 + lo) * map.element_bytes;
  return r;
}

std::uint32_t rows_of(const TensorMap& map) {
  std::uint32_t rows = 1;
  for (int d = 1; d < map.rank; ++d) rows *= tensor_map_box_elements(map, d);
  return rows;
}

// Marks a chunk of `dest` a load by thread `self` of `issuer` wrote: pending, no generic
// writer. A write over bytes an in-flight wgmma or TMA store still reads, or whose previous
// load no reader can have had (tma_landing.cpp), is reported (to the issuer) once per load.
void mark_loaded(Machine& issuer, int self, Machine& dest, std::uint32_t chunk, bool& reported) {
  if (!reported) reported = !check_reloadable(issuer, self, dest, chunk);
  for (std::uint32_t b = chunk; b < chunk + kChunk; ++b) {
    ShadowByte& s = dest.shadow[b];
    if (!reported && (s.wgmma_reads != 0 || s.tma_reads != 0)) {
      reported = true;
      report(issuer, self,
             s.wgmma_reads != 0 ? FindingKind::wgmma_operand_in_flight
                                : FindingKind::tma_store_in_flight,
             reinterpret_cast<std::uintptr_t>(dest.shared_begin) + b, b,
             "cp.async.bulk.tensor load writes shared offset " + std::to_string(b) +
                 of_peer(issuer, dest) + ", which " +
                 (s.wgmma_reads != 0 ? "a wgmma.mma_async still reads (no wgmma.wait_group)"
                                     : "a TMA store still reads (no cp.async.bulk.wait_group)"));
    }
    s.writer = -1;
    s.readers = ShadowByte::Readers::none;
    s.write_time = dest.time;
    ++s.pending_tma;
  }
}

void land(Machine& m, const TmaLoad& load) {
  model_in_flight(m, -static_cast<std::int64_t>(load.bytes));
  for (const std::uint32_t chunk : load.chunks) {
    for (std::uint32_t b = chunk; b < chunk + kChunk; ++b) {
      if (m.shadow[b].pending_tma != 0) --m.shadow[b].pending_tma;
    }
  }
  if (Mbarrier* barrier = find_mbarrier(m, load.barrier)) {
    note_landing(m, load, barrier->phase);  // the phase its bytes count toward
    mbarrier_complete_tx(m, *barrier, load.bytes);
  }
}

// A store's coordinates are all non-negative, or false (reported).
bool store_origin_valid(Machine& m, int self, const TensorMap& map, const std::int32_t* coords,
                        const void* shared) {
  for (int d = 0; d < map.rank; ++d) {
    if (coords[d] >= 0) continue;
    const auto at = reinterpret_cast<std::uintptr_t>(shared);
    report(m, self, FindingKind::tma_invalid, at,
           static_cast<long long>(at - reinterpret_cast<std::uintptr_t>(m.shared_begin)),
           "cp.async.bulk.tensor store: coordinate " + std::to_string(d) + " is " +
               std::to_string(coords[d]) +
               "; a store's box may run past the tensor's end but not start before it "
               "(undefined); skipped");
    return false;
  }
  return true;
}

// Lands m.tma_loads[index] (removed first: landing may wake threads, never issue loads).
void land_at(Machine& m, std::size_t index) {
  const TmaLoad load = std::move(m.tma_loads[index]);
  m.tma_loads.erase(m.tma_loads.begin() + static_cast<std::ptrdiff_t>(index));
  land(m, load);
}

// fewest = the smaller of fewest and count, where -1 means none yet (and a count of -1 is none).
void keep_fewest(std::int64_t& fewest, std::int64_t count) {
  if (count >= 0) fewest = fewest < 0 ? count : std::min(fewest, count);
}

// The batch a load of `map` completing on `barrier` belongs to: the map's latest, or a new one
// when the load completes on another barrier or phase.
std::uint32_t load_batch(Machine& m, const void* map, const Mbarrier& barrier) {
  auto it = std::find_if(m.map_loads.begin(), m.map_loads.end(),
                         [map](const MapLoads& loads) { return loads.map == map; });
  if (it == m.map_loads.end()) {
    MapLoads first;
    first.map = map;
    it = m.map_loads.insert(m.map_loads.end(), first);
  }
  if (it->batches == 0 || it->barrier != barrier.offset || it->phase != barrier.phase) {
    ++it->batches;
    it->fewest_ahead.push_back(-1);
    it->most_ahead_as_a.push_back(-1);
    it->barrier = barrier.offset;
    it->phase = barrier.phase;
  }
  return it->batches - 1;
}

// The block is over: kv_loads_ahead takes the fewest of each map's batches but its first and
// last (after the last there was nothing left to load); q_loads_ahead the fewest of each map's
// batches read as an A operand but its last.
void fold_loads_ahead(Machine& m) {
  for (const MapLoads& loads : m.map_loads) {
    for (std::size_t batch = 1; batch + 1 < loads.fewest_ahead.size(); ++batch) {
      keep_fewest(m.report.work.kv_loads_ahead, loads.fewest_ahead[batch]);
    }
    for (std::size_t batch = 0; batch + 1 < loads.most_ahead_as_a.size(); ++batch) {
      keep_fewest(m.report.work.q_loads_ahead, loads.most_ahead_as_a[batch]);
    }
  }
}

// The shared offset of the mbarrier `bar` a copy completes on, or false (reported) when it
// lies outside the dynamic shared memory.
bool barrier_in_shared(Machine& m, int self, const void* bar, const char* what,
                       std::uint32_t& offset) {
  const auto at = reinterpret_cast<std::uintptr_t>(bar);
  const auto begin = reinterpret_cast<std::uintptr_t>(m.shared_begin);
  if (at >= begin && at + 8 <= begin + m.config->shared_bytes) {
    offset = static_cast<std::uint32_t>(at - begin);
    return true;
  }
  report(m, self, FindingKind::mbarrier_uninitialized, at, static_cast<long long>(at - begin),
         std::string(what) + " completing on an mbarrier at 0x" + hex(at) +
             ", outside the dynamic shared memory; skipped");
  return false;
}

void report_uninitialized(Machine& issuer, int self, const Machine& dest, std::uint32_t offset,
                          const char* what) {
  report(issuer, self, FindingKind::mbarrier_uninitialized,
         reinterpret_cast<std::uintptr_t>(dest.shared_begin) + offset, offset,
         std::string(what) + " completing on the mbarrier at shared offset " +
             std::to_string(offset) + of_peer(issuer, dest) +
             ", which no mbarrier.init has initialised; skipped");
}

// The box at `coords` as its dense image (rows of box[0] elements), read from global memory
// now (checked and counted for the issuer); out-of-bounds elements are zero.
std::vector<std::byte> read_box(Machine& m, int self, const TensorMap& map,
                                const std::int32_t* coords, const char* what) {
  const auto e = static_cast<std::uint32_t>(map.element_bytes);
  const std::uint32_t inner = map.box[0] * e, rows = rows_of(map);
  std::vector<std::byte> image(std::size_t{inner} * rows, std::byte{0});
  for (std::uint32_t r = 0; r < rows; ++r) {
    const Row row = row_of(map, coords, r);
    const std::size_t run = (row.hi - row.lo) * e;
    if (row.inside && check_global_access(m, self, row.global, run, false, what)) {
      std::memcpy(image.data() + std::size_t{r} * inner + row.lo * e, row.global, run);
      model_bulk_read(m, row.global, run);
    }
  }
  return image;
}

// Writes `image` into `dest`'s shared memory at box offset `box` in the map's swizzle, pending
// until the async proxy completes it on `barrier` (an mbarrier of `dest`).
void deliver(Machine& issuer, int self, Machine& dest, const TensorMap& map, std::uint32_t box,
             const std::vector<std::byte>& image, Mbarrier& barrier) {
  TmaLoad load;
  load.barrier = barrier.offset;
  load.bytes = tensor_map_box_bytes(map);
  load.thread = self;
  const std::uint32_t batch = load_batch(dest, &map, barrier);
  bool reported = false;
  for (std::uint32_t at_image = 0; at_image < image.size(); at_image += kChunk) {
    const std::uint32_t at = tma_swizzled_offset(map.swizzle, box, at_image);
    std::memcpy(dest.shared_begin + at, image.data() + at_image, kChunk);
    mark_loaded(issuer, self, dest, at, reported);
    dest.load_origins[at / kChunk] = {&map, batch};
    load.chunks.push_back(at);
  }
  dest.report.work.shared_bytes_written += load.bytes;
  model_in_flight(dest, load.bytes);
  dest.tma_loads.push_back(std::move(load));
  if (explore_chance(dest, kLandAtIssue)) {  // before the issuer's next step
    land_at(dest, dest.tma_loads.size() - 1);
    ++dest.report.schedule.early_landings;
  }
}

// A load by the running thread into its own block, or with `cta_mask` into each block of its
// cluster the mask names (the global bytes read once however many receive them).
void issue_load(const char* what, void* shared_dst, const TensorMap* map,
                const std::int32_t* coords, void* bar, std::optional<std::uint16_t> cta_mask) {
  Machine& m = launch_machine(what);
  const int self = m.current;
  std::uint32_t box = 0;
  if (!valid_copy(m, self, map, shared_dst, what, box)) return;
  std::uint32_t offset = 0;
  if (!barrier_in_shared(m, self, bar, what, offset)) return;
  const std::size_t size = m.cluster->ranks.size();
  const std::uint32_t mask = cta_mask.value_or(1u << m.rank);
  if (mask == 0 || (mask >> size) != 0) {
    report(m, self, FindingKind::invalid_operand, reinterpret_cast<std::uintptr_t>(bar), offset,
           std::string(what) + " with ctaMask " + std::to_string(mask) +
               ": it must name at least one CTA rank, all below the cluster's " +
               std::to_string(size) + "; skipped");
    return;
  }
  std::vector<std::byte> image;
  for (unsigned rank = 0; rank < size; ++rank) {
    if ((mask >> rank & 1u) == 0) continue;
    Machine& dest = *m.cluster->ranks[rank];
    if (!peer_alive(m, dest, what)) continue;
    Mbarrier* barrier = find_mbarrier(dest, offset);
    if (barrier == nullptr) {
      report_uninitialized(m, self, dest, offset, what);
      continue;
    }
    if (!peer_init_ordered(m, dest, *barrier, what)) continue;
    if (image.empty()) image = read_box(m, self, *map, coords, what);
    deliver(m, self, dest, *map, box, image, *barrier);
  }
}

}  // namespace

namespace {

// The TMA load batch that wrote the chunk at shared `offset` and its map's loads; nullptr where
// no TMA load did.
MapLoads* loads_of_origin(Machine& m, std::uint32_t offset, LoadOrigin& origin) {
  if (offset / kChunk >= m.load_origins.size()) return nullptr;
  origin = m.load_origins[offset / kChunk];
  if (origin.map == nullptr) return nullptr;
  const auto it = std::find_if(m.map_loads.begin(), m.map_loads.end(),
                               [&](const MapLoads& loads) { return loads.map == origin.map; });
  return it == m.map_loads.end() ? nullptr : &*it;
}

}  // namespace

void count_loads_ahead(Machine& m, std::uint32_t offset) {
  LoadOrigin origin;
  MapLoads* loads = loads_of_origin(m, offset, origin);
  if (loads == nullptr || origin.batch == 0) return;
  const std::int64_t ahead = std::int64_t(loads->batches) - 1 - origin.batch;
  keep_fewest(loads->fewest_ahead[origin.batch], ahead);
}

void count_a_loads_ahead(Machine& m, std::uint32_t offset) {
  LoadOrigin origin;
  MapLoads* loads = loads_of_origin(m, offset, origin);
  if (loads == nullptr) return;
  const std::int64_t ahead = std::int64_t(loads->batches) - 1 - origin.batch;
  std::int64_t& most = loads->most_ahead_as_a[origin.batch];
  most = std::max(most, ahead);  // (later reads see as many batches or more)
}

void reset_async_proxy(Machine& m, std::size_t threads) {
  m.load_origins.assign(m.shadow.size() / kChunk + 1, LoadOrigin{});
  m.landings.assign(m.shadow.size() / kChunk + 1, TmaLanding{});
  m.map_loads.clear();
  for (const TmaLoad& load : m.tma_loads) {  // an abandoned block's
    for (const std::uint32_t chunk : load.chunks) {
      for (std::uint32_t b = chunk; b < chunk + kChunk; ++b) m.shadow[b].pending_tma = 0;
    }
  }
  m.tma_loads.clear();
  const auto unguard = [&m](const TmaStore& source) {
    for (const std::uint32_t chunk : source.chunks) {
      for (std::uint32_t b = chunk; b < chunk + kChunk; ++b) m.shadow[b].tma_reads = 0;
    }
  };
  for (BulkQueue& queue : m.bulk_queues) {
    for (const TmaStore& store : queue.stores) unguard(store);
    for (const BulkReduce& reduce : queue.reductions) unguard(reduce.source);
  }
  m.bulk_queues.assign(threads, BulkQueue{});
  m.reductions_in_flight = 0;
  m.mbarriers.clear();
  m.named_barriers = {};
  m.proxy_fence_time.assign(threads, m.time);  // earlier blocks' writes count as fenced
}

bool complete_tma_loads(Machine& m) {
  if (m.tma_loads.empty()) return false;
  if (m.explorer.on) {
    land_at(m, explore_pick(m, m.tma_loads.size()));
    return true;
  }
  std::vector<TmaLoad> loads;
  loads.swap(m.tma_loads);
  for (const TmaLoad& load : loads) land(m, load);
  return true;
}

void land_tma_load_early(Machine& m) {
  if (m.tma_loads.empty() || !explore_chance(m, kLandBetweenSteps)) return;
  land_at(m, explore_pick(m, m.tma_loads.size()));
  ++m.report.schedule.early_landings;
}

void finish_async_proxy(Machine& m) {
  while (complete_tma_loads(m)) {
  }
  fold_loads_ahead(m);
  for (const Mbarrier& b : m.mbarriers) {
    if (!b.live || b.pending != 0 || b.tx == 0) continue;
    report(m, b.expect_thread, FindingKind::mbarrier_tx_mismatch,
           reinterpret_cast<std::uintptr_t>(m.shared_begin) + b.offset, b.offset,
           "mbarrier.expect_tx on the mbarrier at shared offset " + std::to_string(b.offset) +
               ": phase " + std::to_string(b.phase) + " received all " +
               std::to_string(b.expected) + " arrivals but " +
               (b.tx > 0 ? "still expects " + std::to_string(b.tx) +
                               " transaction bytes at block end (more expected than the copies "
                               "delivered)"
                         : "the copies delivered " + std::to_string(-b.tx) +
                               " transaction bytes more than expect_tx announced at block end"));
  }
  for (std::size_t t = 0; t < m.bulk_queues.size(); ++t) drain_tma_stores(m, static_cast<int>(t));
}

void guard_bulk_source(Machine& m, const TmaStore& source) {
  for (const std::uint32_t chunk : source.chunks) {
    for (std::uint32_t b = chunk; b < chunk + kChunk; ++b) ++m.shadow[b].tma_reads;
  }
}

void release_bulk_source(Machine& m, const TmaStore& source) {
  for (const std::uint32_t chunk : source.chunks) {
    for (std::uint32_t b = chunk; b < chunk + kChunk; ++b) {
      if (m.shadow[b].tma_reads != 0) --m.shadow[b].tma_reads;
    }
  }
}

void drain_tma_stores(Machine& m, int thread) {
  BulkQueue& queue = m.bulk_queues[static_cast<std::size_t>(thread)];
  for (const TmaStore& store : queue.stores) release_bulk_source(m, store);
  queue.stores.clear();
  complete_bulk_reductions(m, queue, queue.open_group, true);
}

const TmaLoad* tma_load_covering(const Machine& m, std::size_t offset) {
  for (const TmaLoad& load : m.tma_loads) {
    for (const std::uint32_t chunk : load.chunks) {
      if (offset >= chunk && offset < chunk + kChunk) return &load;
    }
  }
  return nullptr;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void tma_load(void* shared_dst, const TensorMap* map, const std::int32_t* coords, void* bar) {
  detail::issue_load("cp.async.bulk.tensor load", shared_dst, map, coords, bar, std::nullopt);
}

void tma_load_multicast(void* shared_dst, const TensorMap* map, const std::int32_t* coords,
                        void* bar, std::uint16_t cta_mask) {
  detail::issue_load("cp.async.bulk.tensor load .multicast::cluster", shared_dst, map, coords, bar,
                     cta_mask);
}

void tma_store(const TensorMap* map, const std::int32_t* coords, const void* shared_src) {
  const char* what = "cp.async.bulk.tensor store";
  detail::Machine& m = detail::launch_machine(what);
  const int self = m.current;
  std::uint32_t box = 0;
  if (!detail::valid_copy(m, self, map, shared_src, what, box)) return;
  if (!detail::store_origin_valid(m, self, *map, coords, shared_src)) return;
  detail::BulkQueue& queue = m.bulk_queues[static_cast<std::size_t>(self)];
  detail::TmaStore store;
  store.group = queue.open_group;
  const auto e = static_cast<std::uint32_t>(map->element_bytes);
  const std::uint32_t inner = map->box[0] * e, rows = detail::rows_of(*map);
  std::vector<std::byte> image(inner);
  bool fenced = true;
  for (std::uint32_t r = 0; r < rows; ++r) {
    for (std::uint32_t c = 0; c < inner; c += detail::kChunk) {
      const std::uint32_t at = tma_swizzled_offset(map->swizzle, box, r * inner + c);
      detail::check_shared_access(m, self, m.shared_begin + at, detail::kChunk, false, what);
      if (fenced) fenced = detail::check_proxy_fence(m, self, at, detail::kChunk, what);
      std::memcpy(image.data() + c, m.shared_begin + at, detail::kChunk);
      store.chunks.push_back(at);
    }
    const detail::Row row = detail::row_of(*map, coords, r);
    const std::size_t run = (row.hi - row.lo) * e;
    auto* global = const_cast<std::byte*>(row.global);  // the map's tensor is writable
    if (row.inside && detail::check_global_access(m, self, global, run, true, what)) {
      std::memcpy(global, image.data() + row.lo * e, run);
      detail::model_bulk_write(m, global, run);
    }
  }
  detail::guard_bulk_source(m, store);
  queue.stores.push_back(std::move(store));
}

void bulk_commit_group() {
  detail::Machine& m = detail::launch_machine("cp.async.bulk.commit_group");
  ++m.bulk_queues[static_cast<std::size_t>(m.current)].open_group;
}

namespace {

// cp.async.bulk.wait_group{.read} N: the groups but the newest `pending_groups` committed ones
// have read their sources; without .read (`read_only` false) they are complete.
void wait_bulk_groups(const char* what, int pending_groups, bool read_only) {
  detail::Machine& m = detail::launch_machine(what);
  detail::BulkQueue& queue = m.bulk_queues[static_cast<std::size_t>(m.current)];
  const std::uint32_t committed = queue.open_group - 1;
  const auto keep = static_cast<std::uint32_t>(std::max(pending_groups, 0));
  if (committed <= keep) return;
  const std::uint32_t last_complete = committed - keep;
  auto end = queue.stores.begin();
  for (; end != queue.stores.end() && end->group <= last_complete; ++end) {
    detail::release_bulk_source(m, *end);
  }
  queue.stores.erase(queue.stores.begin(), end);
  detail::complete_bulk_reductions(m, queue, last_complete, !read_only);
}

}  // namespace

void bulk_wait_group(int pending_groups) {
  wait_bulk_groups("cp.async.bulk.wait_group", pending_groups, false);
}

void bulk_wait_group_read(int pending_groups) {
  wait_bulk_groups("cp.async.bulk.wait_group.read", pending_groups, true);
}

}  // namespace flashjit::emulator

#pragma once
// The memory model's side of a launch (memory_model.hpp): the checks hand it each access of a
// thread, it gathers the lanes of a warp that executed one instruction site into a request,
// prices the request (banks, sectors), and at the launch's end runs the L2 model over the
// CTAs' reads. Off unless LaunchConfig::memory_model is set: the hooks return at once.
#include <array>
#include <cstdint>
#include <source_location>
#include <vector>

#include "emulator/memory_model.hpp"

namespace flashjit::emulator {
struct LaunchConfig;
}

namespace flashjit::emulator::detail {

struct Machine;

/// An instruction site: where the access was written and what it is.
struct Site {
  const char* file = nullptr;
  unsigned line = 0;
  const char* instruction = nullptr;  // a string literal ("ld.shared", ...)
  AccessKind kind = AccessKind::shared_load;
  /// A load whose value the thread waits for only where it uses it (check_global_held_load):
  /// in flight until then, not as its warp's latest load.
  bool held = false;
};

/// A site's accesses not yet gathered into requests: per lane, in the order the lane made them
/// (a lane's k-th access at a site joins the other lanes' k-th).
struct PendingSite {
  Site site;
  std::size_t counters = 0;  // its SiteCounters in the launch's list
  std::array<std::vector<LaneAccess>, 32> lanes;
  std::array<std::uint32_t, 32> head{};
  std::uint32_t waiting = 0;  // lanes with accesses not yet in a request
};

/// A block's part of the model (Machine::memory).
struct BlockMemory {
  bool on = false;
  std::vector<std::vector<PendingSite>> warps;  // per warp
  std::vector<std::uint64_t> warp_load_bytes;   // per warp: its latest plain load request
  std::uint64_t plain_in_flight = 0;            // their sum
  std::int64_t async_in_flight = 0;             // cp.async and TMA loads issued, not landed
  // Held loads (check_global_held_load) not yet used, the block's and each thread's, and the
  // most each thread had: the emulator runs a block's threads one after another between
  // barriers, where the GPU runs them together, so loads a thread uses before its next barrier
  // count in the block's sum only through the threads' own peaks.
  std::int64_t held_in_flight = 0;
  std::vector<std::int64_t> thread_held, thread_most_held;
  std::uint64_t most_in_flight = 0;
  std::vector<ByteRun> reads;  // the block's global reads, in order
};

/// Starts a launch's model (on when config.memory_model is set).
void model_launch_begin(const LaunchConfig& config);
/// The launch's counters (modelled false when off).
MemoryCounters model_launch_end(const LaunchConfig& config);
void model_block_begin(Machine& machine);
/// Gathers what the block's warps left pending and keeps its reads for the L2 model.
void model_block_end(Machine& machine);
/// Every thread of the block met (a __syncthreads): nothing before it joins a later request.
void model_block_barrier(Machine& machine);
/// `thread` accessed `bytes` at `address` at `site` (plain loads and stores, cp.async's two
/// sides, ldmatrix's rows).
void model_access(Machine& machine, int thread, const void* address, std::size_t bytes,
                  const Site& site);
/// A wgmma read the core matrix whose 8 rows of 16 bytes start at these shared offsets.
void model_core_matrix(Machine& machine, const std::array<std::uint32_t, 8>& rows,
                       const Site& site);
/// A TMA load read these global bytes (for the L2 model; the TMA unit has no lanes).
void model_bulk_read(Machine& machine, const void* address, std::size_t bytes);
/// A TMA store or bulk reduction wrote these global bytes.
void model_bulk_write(Machine& machine, const void* address, std::size_t bytes);
/// Bytes of cp.async or TMA loads issued (positive) or landed (negative) in `machine`'s block.
void model_in_flight(Machine& machine, std::int64_t bytes);
/// Bytes of `thread`'s held loads issued (positive) or used (negative).
void model_held_load(Machine& machine, int thread, std::int64_t bytes);

/// The site of a call made at `where`.
inline Site site_at(const std::source_location& where, const char* instruction, AccessKind kind) {
  return {where.file_name(), static_cast<unsigned>(where.line()), instruction, kind};
}

}  // namespace flashjit::emulator::detail

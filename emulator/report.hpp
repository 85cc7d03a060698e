#pragma once
// What the emulator's checks found during a launch, in the spirit of compute-sanitizer: each
// finding names the kernel, the block and thread, and the address with the buffer (or shared
// offset) it falls in or near, so a test can assert on it and a person can act on it.
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "emulator/dim3.hpp"
#include "emulator/memory_model.hpp"

namespace flashjit::emulator {

enum class FindingKind {
  global_out_of_bounds,     // a global access (load, store, cp.async source) outside every buffer
  shared_out_of_bounds,     // a shared access outside the launch's dynamic shared size
  shared_race,              // two threads touch one shared byte unordered, one writing: other
                            // warps between __syncthreads, or lanes of one warp between warp syncs
  async_copy_pending,       // a shared access to bytes a cp.async has not landed in yet
  wgmma_operand_in_flight,  // a write to shared bytes a wgmma still reads (not yet waited for)
  wgmma_fence_missing,      // a wgmma with no wgmma.fence after the registers it uses changed
  misaligned_access,        // an ldmatrix row or cp.async address off its required alignment
  invalid_operand,          // an operand the PTX ISA does not allow (cp.async size, ldmatrix count,
                            // wgmma descriptors that differ across the warpgroup or are rejected)
  divergent_barrier,        // __syncthreads reached by some threads while others exited
  warp_collective_mismatch,     // lanes of one warp meet in different collectives or masks
  deadlock,                     // no thread can run, yet not all have exited
  mbarrier_reinit,              // mbarrier.init on a barrier that is live (not invalidated)
  mbarrier_uninitialized,       // an mbarrier operation (or a TMA's barrier) before its init
  mbarrier_stale_phase,         // a parity wait two or more phases behind the barrier (ABA)
  mbarrier_tx_mismatch,         // a phase with every arrival in whose tx-count never returns
                                // to 0: bytes announced that never come, or more than announced
  mbarrier_arrival_overflow,    // an arrival on a phase whose arrivals are all in
  mbarrier_phase_unobserved,    // an arrival on a phase whose previous phase no wait has seen
                                // complete (PTX ISA "Phase of the mbarrier object")
  tma_load_pending,             // a shared access to bytes a TMA load wrote, phase still open
  tma_load_unobserved,          // a read of bytes a TMA load landed on a phase no wait has seen
                                // complete, or a TMA load over them (or over a load in flight)
  tma_store_in_flight,          // a shared write to bytes a TMA store or bulk reduction reads,
                                // not waited for
  bulk_reduce_in_flight,        // a generic access to global bytes a cp.reduce.async.bulk adds
                                // into, before a wait_group (without .read) completed it
  tma_invalid,                  // a TMA operand: tensor map, coordinates or shared alignment
  proxy_fence_missing,          // async proxy (TMA store, wgmma) reads a generic write unfenced
  named_barrier_mismatch,       // bar.sync/bar.arrive: bad id or count, or counts that differ
  setmaxnreg_invalid_count,     // a setmaxnreg count not a multiple of 8 in 24..256
  setmaxnreg_nonuniform,        // threads of one warpgroup in setmaxnreg with different counts,
                                // or some .inc and some .dec
  setmaxnreg_wrong_direction,   // .inc to fewer registers than the warpgroup holds, or .dec to
                                // more (undefined behaviour in the PTX ISA)
  wgmma_accumulator_in_flight,  // accumulators of an in-flight wgmma written by the thread, or
                                // their value stored to memory, before the wait_group
  cluster_peer_exited,      // a remote arrival or multicast into a cluster block that has exited
  mbarrier_init_unordered,  // another block's mbarrier used before a cluster barrier ordered its
                            // init (fence.mbarrier_init, barrier.cluster.arrive and wait)
  global_before_grid_wait,  // a global access before griddepcontrol.wait in a launch that may
                            // overlap the grid before it (programmatic dependent launch)
};

/// The kind's name as printed in reports ("global_out_of_bounds", ...).
std::string_view to_string(FindingKind kind);

struct Finding {
  FindingKind kind{};
  std::string kernel;          // the launch's kernel name, may be empty
  Dim3 block{0, 0, 0};         // blockIdx of the offending thread
  Dim3 thread{0, 0, 0};        // threadIdx of the offending thread
  std::uintptr_t address = 0;  // the accessed address (memory findings)
  std::size_t bytes = 0;       // the access size (memory findings)
  bool write = false;          // whether the access was a store
  std::string buffer;          // nearest registered buffer (global findings)
  long long offset = 0;        // from the buffer's start, or the shared offset
  int other_thread = -1;       // the other side (linear thread index; -2: several readers)
  std::string location;        // "file:line" the thread last set_source_location'd, or empty
  std::string message;         // the whole finding as one readable line
};

/// The work a launch did, as the hardware would do it (docs/emulator.md): how speed work is
/// judged without a GPU. Bytes are those the instructions move (a 16-byte cp.async whose source
/// is zero-filled reads none of it from global memory; it still writes 16 shared bytes).
struct WorkCounters {
  std::uint64_t tensor_flops = 0;          // 2·m·n·k per mma (m16n8k16: 4096, m64nNk16: 2048 N)
  std::uint64_t shared_bytes_read = 0;     // ldmatrix, wgmma operands and plain shared loads
  std::uint64_t shared_bytes_written = 0;  // plain shared stores and cp.async destinations
  std::uint64_t global_bytes_read = 0;     // plain global loads and cp.async sources
  std::uint64_t global_bytes_written = 0;  // plain global stores
  std::uint64_t barriers = 0;              // __syncthreads released, per CTA
  std::uint64_t ctas = 0;                  // blocks run
  std::uint64_t ldmatrix_bytes = 0;        // of shared_bytes_read, those ldmatrix read
  // The fewest load batches of a wgmma B operand's tensor map (K and V in attention) issued
  // ahead of the batch the wgmma reads, when it issues; a map's first and last batches in a
  // block are excepted. -1: nothing measured. Shows whether loads run ahead of the math.
  std::int64_t kv_loads_ahead = -1;
  // The fewest load batches of a wgmma A operand's tensor map (Q in attention) issued after the
  // batch a wgmma reads, at the last wgmma that reads it; a map's last batch in a block is
  // excepted. -1: nothing measured. Shows whether the next tile's Q is on its way before this
  // tile's last product.
  std::int64_t q_loads_ahead = -1;

  bool operator==(const WorkCounters&) const = default;
};

/// How a launch explored orderings (LaunchConfig::explore_seed): what it changed, so a test
/// can tell the exploration happened.
struct ScheduleCounters {
  bool explored = false;
  std::uint64_t seed = 0;
  std::uint64_t early_landings = 0;    // TMA loads landed while a thread could still run
  std::uint64_t failed_try_waits = 0;  // mbarrier.try_wait that returned false
};

/// The findings of one launch. Only the first kMaxFindings are kept: one bug usually fires
/// in every thread, and the first few say all there is to say.
struct Report {
  static constexpr std::size_t kMaxFindings = 64;
  std::vector<Finding> findings;
  std::size_t suppressed = 0;  // findings beyond kMaxFindings, counted only
  WorkCounters work;           // what the launch did, findings or not
  ScheduleCounters schedule;   // the orderings explored, if any
  MemoryCounters memory;       // what the memory model saw (LaunchConfig::memory_model)

  /// True when the launch ran without any finding.
  bool clean() const { return findings.empty(); }
  /// How many kept findings are of `kind`.
  std::size_t count(FindingKind kind) const;
  /// The first finding of `kind`, or nullptr.
  const Finding* first(FindingKind kind) const;
  /// One line per finding, then the number suppressed.
  std::string describe() const;
};

/// Writes `report.describe()` (for doctest's INFO / CHECK_MESSAGE).
std::ostream& operator<<(std::ostream& os, const Report& report);

}  // namespace flashjit::emulator

#pragma once
// What ncu's memory tables show, modelled on the emulator (docs/emulator.md, "Memory model"):
// shared-memory wavefronts per request under Hopper's (and Ampere's) banking, global sector use,
// the bytes a CTA has in flight, and the DRAM bytes an LRU model of L2 lets through. The pure
// functions here are the model; memory_recorder.cpp feeds them a launch's accesses.
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace flashjit::emulator {

/// The GPU whose memory system is modelled (LaunchConfig::memory_model).
struct ModelledGpu {
  unsigned sms = 132;                            // an H100 SXM (an A100: 108)
  std::uint64_t l2_bytes = 50ull * 1024 * 1024;  // (an A100: 40 MB)
  std::uint64_t shared_bytes_per_sm = 228 * 1024;  // (an A100: 164 KB)
  unsigned threads_per_sm = 2048;
  unsigned ctas_per_sm_limit = 32;
  /// Keep each CTA's global read trace in MemoryCounters::cta_reads (tests of the L2 model).
  bool keep_traces = false;
};

/// What an instruction site does; wavefronts count for the shared kinds, sectors for the
/// global ones.
/// wgmma_operand: a wgmma's shared operand, read a core matrix (8 rows of 16 bytes) at a time,
/// each one request (not an LSU instruction: ncu counts none of these).
enum class AccessKind : std::uint8_t {
  shared_load,
  shared_store,
  global_load,
  global_store,
  wgmma_operand
};

/// "shared_load", ...
const char* to_string(AccessKind kind);

/// One lane's part of a warp-wide request: `bytes` at `address` (a shared offset for shared
/// memory); bytes 0 for a lane that takes no part.
struct LaneAccess {
  std::uint64_t address = 0;
  std::uint32_t bytes = 0;
};
using WarpRequest = std::array<LaneAccess, 32>;

/// A shared request's cost: the wavefronts the banks take, and the fewest its bytes could take.
struct SharedCost {
  unsigned wavefronts = 0;
  unsigned ideal = 0;
};
/// 32 banks of 4 bytes. A request is served in phases of lanes (all 32 for accesses of up to 4
/// bytes, halves for 8, quarters for 16, as ldmatrix's 8 rows of a matrix); a phase takes as
/// many wavefronts as the most distinct 4-byte words any one bank holds (lanes reading the
/// same word share it).
SharedCost shared_request_cost(const WarpRequest& request);

/// A global request's use of the 32-byte sectors it touches.
struct SectorCost {
  std::uint64_t bytes = 0;              // distinct bytes the lanes ask for
  std::uint64_t sector_bytes = 0;       // 32 per distinct sector touched
  std::vector<std::uint64_t> sectors;   // those sectors (address / 32), ascending
};
SectorCost global_request_cost(const WarpRequest& request);

/// Bytes [begin, end) of global memory, read in that order.
struct ByteRun {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  bool operator==(const ByteRun&) const = default;
};

/// The DRAM bytes an L2 of `l2_bytes` (LRU over 128-byte lines, filled by 32-byte sectors) reads
/// for the CTAs' global reads, each CTA's in its order: the CTAs start in launch order,
/// `resident` at a time, each taking the next CTA's place when it ends, and the resident ones
/// read at one pace (a step of each in turn).
std::uint64_t modelled_dram_read_bytes(const std::vector<std::vector<ByteRun>>& cta_reads,
                                       std::uint64_t l2_bytes, unsigned resident);
/// The same over `ctas` CTAs whose reads `reads_of(cta, runs)` fills in when the CTA starts (a
/// launch too large to hold every trace at once: a trace made from another, say).
using CtaReads = std::function<void(std::size_t cta, std::vector<ByteRun>& runs)>;
std::uint64_t modelled_dram_read_bytes(std::size_t ctas, const CtaReads& reads_of,
                                       std::uint64_t l2_bytes, unsigned resident);

/// The CTAs of `threads` threads and `shared_bytes` of dynamic shared memory one SM holds at
/// once, at most gpu.ctas_per_sm_limit (the runtime lowers it to what the kernel's registers
/// allow where ptxas has counted them). CUDA reserves 1 KB of shared memory per CTA.
unsigned resident_ctas_per_sm(const ModelledGpu& gpu, unsigned threads,
                              std::uint64_t shared_bytes);

/// One instruction site's requests (a source line of the tile library or a kernel).
struct SiteCounters {
  std::string site;         // "tile/memory.cuh:130"
  std::string instruction;  // "ld.shared", "st.shared", "ldmatrix", "cp.async", ...
  AccessKind kind = AccessKind::shared_load;
  std::uint64_t requests = 0;
  std::uint64_t wavefronts = 0;        // shared kinds
  std::uint64_t ideal_wavefronts = 0;  // shared kinds
  std::uint64_t bytes = 0;             // global kinds: distinct bytes asked for
  std::uint64_t sector_bytes = 0;      // global kinds
};

/// A launch's memory behaviour as the model sees it (Report::memory).
struct MemoryCounters {
  bool modelled = false;  // LaunchConfig::memory_model was set
  std::uint64_t shared_requests = 0;
  std::uint64_t shared_wavefronts = 0;
  std::uint64_t shared_ideal_wavefronts = 0;
  std::uint64_t wgmma_core_matrices = 0;  // wgmma operand reads: not in the shared figures above
  std::uint64_t wgmma_wavefronts = 0;
  std::uint64_t global_requests = 0;
  std::uint64_t global_bytes = 0;          // distinct bytes per request, summed
  std::uint64_t global_sector_bytes = 0;   // 32 per sector per request, summed
  std::uint64_t bytes_in_flight_per_cta = 0;  // the most any CTA had outstanding
  unsigned ctas_per_sm = 0;                   // resident_ctas_per_sm of the launch
  std::uint64_t dram_bytes_read = 0;          // modelled_dram_read_bytes
  std::uint64_t dram_bytes_written = 0;       // each distinct sector written, once
  std::vector<SiteCounters> sites;            // by site, in first-seen order
  std::vector<std::vector<ByteRun>> cta_reads;  // ModelledGpu::keep_traces: per CTA, launch order
};

}  // namespace flashjit::emulator

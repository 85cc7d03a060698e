#pragma once
// The work the CPU emulator counts for each kernel it runs (docs/emulator.md): what the
// hardware would do, so that a change that makes a kernel do less work shows without a GPU.
#include <cstdint>
#include <string>
#include <vector>

namespace flashjit {

/// One instruction site's memory requests, as the emulator's memory model prices them
/// (RuntimeOptions::model_memory; docs/emulator.md).
struct MemorySite {
  std::string site;         ///< "attention/hopper/tma_backward_kernel.cuh:331": the access's line
  std::string instruction;  ///< "ld.shared", "st.shared", "ldmatrix", "cp.async", "ld.global", ...
  /// "shared_load", "shared_store", "global_load", "global_store", or "wgmma_operand" (a
  /// wgmma's shared operand, a request per core matrix of 8 rows of 16 bytes)
  std::string kind;
  std::uint64_t requests = 0;          ///< warp-wide requests
  std::uint64_t wavefronts = 0;        ///< shared kinds: bank wavefronts they took
  std::uint64_t ideal_wavefronts = 0;  ///< shared kinds: the fewest their bytes could take
  std::uint64_t bytes = 0;             ///< global kinds: distinct bytes asked for, per request
  std::uint64_t sector_bytes = 0;      ///< global kinds: 32 per sector touched, per request

  /// wavefronts / requests: ncu's "N-way bank conflict" of the site (4 for conflict-free
  /// 16-byte accesses, which a warp's 512 bytes take at least).
  double wavefronts_per_request() const;
  /// wavefronts / ideal_wavefronts: how many times the fewest its bytes could take (1.0: no
  /// bank conflict; 0 with no request).
  double conflict_degree() const;
  bool operator==(const MemorySite&) const = default;
};

/// What ncu's memory tables would show, modelled by the emulator (RuntimeOptions::model_memory):
/// shared-memory wavefronts (32 banks of 4 bytes), global sector use (32-byte sectors), the
/// bytes a CTA keeps in flight, and the DRAM bytes an LRU model of the GPU's L2 lets through.
struct MemoryCounters {
  bool modelled = false;  ///< false: the launches ran without the model
  std::uint64_t shared_requests = 0;
  std::uint64_t shared_wavefronts = 0;
  std::uint64_t shared_ideal_wavefronts = 0;
  /// wgmma's shared operands, which ncu does not count as shared requests: core matrices read
  /// and the wavefronts they took (one each, conflict-free).
  std::uint64_t wgmma_core_matrices = 0;
  std::uint64_t wgmma_wavefronts = 0;
  std::uint64_t global_requests = 0;      ///< plain loads and stores, cp.async sources
  std::uint64_t global_bytes = 0;         ///< distinct bytes asked for, per request, summed
  std::uint64_t global_sector_bytes = 0;  ///< 32 per sector touched, per request, summed
  /// The most bytes of cp.async and TMA loads (issued, not landed), loads held until their use
  /// (not yet used) and one plain load request per warp one CTA had outstanding at any moment,
  /// or its threads' held loads each at its most, if more; sums keep the largest.
  std::uint64_t bytes_in_flight_per_cta = 0;
  unsigned ctas_per_sm = 0;  ///< CTAs an SM holds at once (threads, shared memory, registers)
  std::uint64_t bytes_in_flight_per_sm = 0;  ///< per CTA times CTAs per SM; sums keep the largest
  std::uint64_t dram_bytes_read = 0;         ///< global reads the L2 model missed
  std::uint64_t dram_bytes_written = 0;      ///< distinct sectors written
  std::vector<MemorySite> sites;             ///< per instruction site, in first-seen order

  /// shared_wavefronts / shared_requests (0 with no request): ld/st.shared, ldmatrix and
  /// cp.async's shared side, as ncu's shared-memory tables count them.
  double shared_wavefronts_per_request() const;
  /// The shared site (wgmma operands included) with the highest conflict degree, the most
  /// wavefronts per request among equals; nullptr with none.
  const MemorySite* worst_shared_site() const;
  /// Its wavefronts per request (0 with none).
  double worst_shared_wavefronts_per_request() const;
  /// global_bytes / global_sector_bytes: 1.0 when every byte of every sector is used (1.0 with
  /// no request).
  double global_sector_use() const;
  std::uint64_t dram_bytes() const { return dram_bytes_read + dram_bytes_written; }

  MemoryCounters& operator+=(const MemoryCounters& other);
  bool operator==(const MemoryCounters&) const = default;
};

/// Work done by kernel launches. Bytes are those the instructions move: a cp.async of a row past
/// the end (zero-filled) reads nothing from global memory but still writes shared memory.
struct WorkCounters {
  std::uint64_t tensor_flops = 0;          ///< 2·m·n·k per warp-wide mma (m16n8k16: 4096)
  std::uint64_t shared_bytes_read = 0;     ///< ldmatrix and shared loads
  std::uint64_t shared_bytes_written = 0;  ///< shared stores and cp.async destinations
  std::uint64_t global_bytes_read = 0;     ///< global loads and cp.async sources
  std::uint64_t global_bytes_written = 0;  ///< global stores
  std::uint64_t barriers = 0;              ///< __syncthreads executed, counted once per CTA
  std::uint64_t ctas = 0;                  ///< thread blocks run
  /// Of shared_bytes_read, those ldmatrix read: mma.sync operands. The Hopper kernels' wgmma
  /// read theirs through descriptors instead, so theirs is 0.
  std::uint64_t ldmatrix_bytes = 0;
  /// Whether TMA loads run ahead of the math (the Hopper kernels): the fewest load batches of a
  /// wgmma B operand's tensor map (K or V, one block each) issued ahead of the batch the wgmma
  /// reads, at the moment it issues, over every launch; each block's first and last batch of a
  /// map are excepted (nothing precedes the first, nothing is left to load after the last).
  /// 0: some product waited on a load that started only after the previous block was freed;
  /// 1 or more: the next block was already on its way. -1: nothing measured. Sums keep the
  /// fewest.
  std::int64_t kv_loads_ahead = -1;
  /// Whether a persistent Hopper kernel's next tile's Q is on its way before this tile's last
  /// product: the fewest load batches of a wgmma A operand's tensor map (Q in S = Q Kᵀ, one
  /// tile each) issued after the batch a wgmma reads, at the last wgmma that reads it, over
  /// every launch; each block's last batch of a map is excepted (no tile follows it). 0: some
  /// tile's next Q was issued only after its last product; 1: it was under way. -1: nothing
  /// measured (a block of one tile). Sums keep the fewest.
  std::int64_t q_loads_ahead = -1;
  /// The memory model's counters (empty unless RuntimeOptions::model_memory was set).
  MemoryCounters memory;

  WorkCounters& operator+=(const WorkCounters& other);
  bool operator==(const WorkCounters&) const = default;
};

/// The work of one kernel over every launch of it.
struct KernelWork {
  std::string kernel;          ///< its readable name ("attention_forward.hdim64.bf16...")
  std::uint64_t launches = 0;  ///< how many launches are summed
  WorkCounters work;
};

/// The sum over kernels.
WorkCounters total_work(const std::vector<KernelWork>& kernels);

}  // namespace flashjit

#pragma once
// The work the CPU emulator counts for each kernel it runs (DESIGN.md section 5): what the
// hardware would do, so that a change that makes a kernel do less work shows without a GPU.
#include <cstdint>
#include <string>
#include <vector>

namespace flashjit {

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

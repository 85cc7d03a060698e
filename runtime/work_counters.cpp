// Sums of the emulator's work counters (include/flashjit/work_counters.hpp).
#include "flashjit/work_counters.hpp"

#include <algorithm>

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
  if (other.kv_loads_ahead >= 0) {
    kv_loads_ahead = kv_loads_ahead < 0 ? other.kv_loads_ahead
                                        : std::min(kv_loads_ahead, other.kv_loads_ahead);
  }
  return *this;
}

WorkCounters total_work(const std::vector<KernelWork>& kernels) {
  WorkCounters total;
  for (const KernelWork& kernel : kernels) total += kernel.work;
  return total;
}

}  // namespace flashjit

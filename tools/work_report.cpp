#include "work_report.hpp"

#include <cstdio>

namespace flashjit::tools {

double minimum_global_bytes(const Attention& a, DType dtype, bool backward) {
  const double element = static_cast<double>(dtype_size(dtype));
  const double rows_q = double(a.batch) * double(a.seqlen_q) * double(a.heads_q);
  const double rows_k = double(a.batch) * double(a.seqlen_k) * double(a.heads_kv);
  const double q = rows_q * double(a.head_dim), o = rows_q * double(a.value_head_dim());
  const double k = rows_k * double(a.head_dim), v = rows_k * double(a.value_head_dim());
  const double lse = double(a.batch) * double(a.heads_q) * double(a.seqlen_q) * 4;
  if (!backward) return (q + k + v + o) * element + lse;  // Q, K, V in; O, LSE out
  return (q + 2 * o + k + v) * element + lse              // Q, O, dO, K, V and LSE in
         + (q + k + v) * element;                         // dQ, dK, dV out
}

void print_work(const std::vector<KernelWork>& work, const std::string& prefix, double useful_flops,
                double minimum_bytes) {
  WorkCounters sum;
  for (const KernelWork& kernel : work) {
    if (kernel.kernel.rfind(prefix, 0) == 0) sum += kernel.work;
  }
  auto line = [](const char* name, unsigned long long value) {
    std::printf("%-29s %llu\n", name, value);
  };
  line("tensor_flops", sum.tensor_flops);
  line("shared_bytes_read", sum.shared_bytes_read);
  line("shared_bytes_written", sum.shared_bytes_written);
  line("global_bytes_read", sum.global_bytes_read);
  line("global_bytes_written", sum.global_bytes_written);
  line("barriers", sum.barriers);
  line("ctas", sum.ctas);
  line("ldmatrix_bytes", sum.ldmatrix_bytes);
  if (sum.kv_loads_ahead >= 0) {
    line("kv_loads_ahead", static_cast<unsigned long long>(sum.kv_loads_ahead));
  } else {
    std::printf("%-29s -\n", "kv_loads_ahead");
  }
  const double shared = double(sum.shared_bytes_read) + double(sum.shared_bytes_written);
  const double global = double(sum.global_bytes_read) + double(sum.global_bytes_written);
  std::printf("%-29s %.4f\n", "tensor_flops_ratio", double(sum.tensor_flops) / useful_flops);
  std::printf("%-29s %.4f\n", "global_bytes_ratio", global / minimum_bytes);
  std::printf("%-29s %.4f\n", "shared_bytes_per_tensor_flop",
              sum.tensor_flops > 0 ? shared / double(sum.tensor_flops) : 0.0);
}

}  // namespace flashjit::tools

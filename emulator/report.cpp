#include "emulator/report.hpp"

#include <ostream>

namespace flashjit::emulator {

std::string_view to_string(FindingKind kind) {
  switch (kind) {
    case FindingKind::global_out_of_bounds:
      return "global_out_of_bounds";
    case FindingKind::shared_out_of_bounds:
      return "shared_out_of_bounds";
    case FindingKind::shared_race:
      return "shared_race";
    case FindingKind::async_copy_pending:
      return "async_copy_pending";
    case FindingKind::wgmma_operand_in_flight:
      return "wgmma_operand_in_flight";
    case FindingKind::wgmma_fence_missing:
      return "wgmma_fence_missing";
    case FindingKind::misaligned_access:
      return "misaligned_access";
    case FindingKind::invalid_operand:
      return "invalid_operand";
    case FindingKind::divergent_barrier:
      return "divergent_barrier";
    case FindingKind::warp_collective_mismatch:
      return "warp_collective_mismatch";
    case FindingKind::deadlock:
      return "deadlock";
    case FindingKind::mbarrier_reinit:
      return "mbarrier_reinit";
    case FindingKind::mbarrier_uninitialized:
      return "mbarrier_uninitialized";
    case FindingKind::mbarrier_stale_phase:
      return "mbarrier_stale_phase";
    case FindingKind::mbarrier_tx_mismatch:
      return "mbarrier_tx_mismatch";
    case FindingKind::mbarrier_arrival_overflow:
      return "mbarrier_arrival_overflow";
    case FindingKind::mbarrier_phase_unobserved:
      return "mbarrier_phase_unobserved";
    case FindingKind::tma_load_pending:
      return "tma_load_pending";
    case FindingKind::tma_load_unobserved:
      return "tma_load_unobserved";
    case FindingKind::tma_store_in_flight:
      return "tma_store_in_flight";
    case FindingKind::bulk_reduce_in_flight:
      return "bulk_reduce_in_flight";
    case FindingKind::tma_invalid:
      return "tma_invalid";
    case FindingKind::proxy_fence_missing:
      return "proxy_fence_missing";
    case FindingKind::named_barrier_mismatch:
      return "named_barrier_mismatch";
    case FindingKind::setmaxnreg_invalid_count:
      return "setmaxnreg_invalid_count";
    case FindingKind::setmaxnreg_nonuniform:
      return "setmaxnreg_nonuniform";
    case FindingKind::setmaxnreg_wrong_direction:
      return "setmaxnreg_wrong_direction";
    case FindingKind::wgmma_accumulator_in_flight:
      return "wgmma_accumulator_in_flight";
    case FindingKind::cluster_peer_exited:
      return "cluster_peer_exited";
    case FindingKind::mbarrier_init_unordered:
      return "mbarrier_init_unordered";
    case FindingKind::global_before_grid_wait:
      return "global_before_grid_wait";
  }
  return "unknown";
}

std::size_t Report::count(FindingKind kind) const {
  std::size_t n = 0;
  for (const Finding& finding : findings) n += finding.kind == kind ? 1 : 0;
  return n;
}

const Finding* Report::first(FindingKind kind) const {
  for (const Finding& finding : findings) {
    if (finding.kind == kind) return &finding;
  }
  return nullptr;
}

std::string Report::describe() const {
  if (clean()) return "no findings";
  std::string text;
  for (const Finding& finding : findings) text += finding.message + "\n";
  if (suppressed > 0) {
    // Appended piece by piece: "(" + std::to_string(...) trips GCC 12's false -Wrestrict
    // warning (GCC bug 105329) at -O2 and above.
    text += "(";
    text += std::to_string(suppressed);
    text += " more findings suppressed)\n";
  }
  return text;
}

std::ostream& operator<<(std::ostream& os, const Report& report) { return os << report.describe(); }

}  // namespace flashjit::emulator

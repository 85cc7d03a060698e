// The register operand of wgmma's RS form (A from registers), from the PTX ISA:
//  - wgmma.fence must come "between a register access by a thread in the warpgroup and any
//    wgmma.mma_async instruction that accesses the same registers, either as accumulator or
//    input register containing fragments of matrix A" (wgmma.fence);
//  - accessing "the input register containing fragments of matrix A" of an in-flight
//    wgmma.mma_async before a wgmma.wait_group completes it is undefined (wgmma.mma_async).
// The emulator sees register writes only as changed contents, so it compares:
//  - at issue: the A registers of an earlier RS wgmma of the warpgroup (the same registers:
//    a fragment kept in one place across a loop) against their contents at the last
//    wgmma.fence, or at that earlier wgmma when no fence came between; a difference is a write
//    with no fence after it. A fragment the warpgroup never used before cannot be checked: its
//    contents at the last fence are unknown (the warpgroup's first wgmma is still checked for a
//    fence by check_wgmma_fence);
//  - at the wait_group that lands the operation: the A registers against their contents at
//    issue; a difference is a write in flight.
// Reads cannot be seen. The registers are where the kernel keeps its fragment (the tile
// library's host twin passes them, not a copy), live until the wait in the tile library's
// products (warpgroup_ab_async and its callers).
#include <algorithm>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr int kRegisters = 4;          // per thread: the m16n8k16 A fragment
constexpr std::size_t kSeenKept = 16;  // fragments remembered: a main loop's k steps

// A remembered fragment's registers may belong to a variable whose scope has ended (a loop
// iteration's fragment, redeclared in the same place by the next): reading them there is the
// point (a change is a write), and the fiber's stack stays mapped, so AddressSanitizer's
// use-after-scope check is off for these reads (element by element: its memcpy would check).
[[gnu::no_sanitize_address]] void take(RegisterA& a) {
  a.words.resize(kWarpgroupThreads * kRegisters);
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    const std::uint32_t* registers = a.at[static_cast<std::size_t>(t)];
    for (int r = 0; r < kRegisters; ++r) {
      a.words[static_cast<std::size_t>(t * kRegisters + r)] = registers[r];
    }
  }
}

// The first thread and register whose contents differ from `before`'s, or false.
[[gnu::no_sanitize_address]] bool first_change(const RegisterA& before, int& thread, int& reg) {
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    const std::uint32_t* now = before.at[static_cast<std::size_t>(t)];
    for (int r = 0; r < kRegisters; ++r) {
      if (now[r] == before.words[static_cast<std::size_t>(t * kRegisters + r)]) continue;
      thread = t;
      reg = r;
      return true;
    }
  }
  return false;
}

void report(Machine& m, int thread, FindingKind kind, std::string text) {
  Finding finding;
  finding.kind = kind;
  finding.message = std::move(text);
  record(m, m.current - m.current % kWarpgroupThreads + thread, std::move(finding));
}

}  // namespace

void check_register_a_fence(Machine& m, WgmmaQueue& queue, WgmmaOp& op) {
  take(op.a);
  auto seen = std::find_if(queue.a_seen.begin(), queue.a_seen.end(),
                           [&](const RegisterA& a) { return a.at == op.a.at; });
  int thread = 0, reg = 0;
  if (seen != queue.a_seen.end() && first_change(*seen, thread, reg)) {
    report(m, thread, FindingKind::wgmma_fence_missing,
           std::string(op.name) + ": this thread wrote register " + std::to_string(reg) +
               " of the registers of A after the last wgmma.fence (or after an earlier wgmma "
               "read them) and before this wgmma read them; the PTX ISA requires a wgmma.fence "
               "between register accesses and a wgmma using the same registers");
  }
  if (seen == queue.a_seen.end()) {
    if (queue.a_seen.size() == kSeenKept) queue.a_seen.erase(queue.a_seen.begin());
    queue.a_seen.push_back(op.a);
  } else {
    seen->words = op.a.words;  // reported once: from here on, compared with this read
  }
}

void fence_register_a(WgmmaQueue& queue) {
  for (RegisterA& a : queue.a_seen) take(a);
}

void check_register_a_untouched(Machine& m, const WgmmaOp& op) {
  int thread = 0, reg = 0;
  if (op.a.at[0] == nullptr || !first_change(op.a, thread, reg)) return;
  report(m, thread, FindingKind::wgmma_operand_in_flight,
         std::string(op.name) + ": this thread wrote register " + std::to_string(reg) +
             " of A while the operation was in flight; the PTX ISA allows accessing them only "
             "after the wgmma.wait_group that completes it");
}

}  // namespace flashjit::emulator::detail

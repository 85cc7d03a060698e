// mbarrier on the emulator, from the PTX ISA section "Parallel Synchronization and
// Communication Instructions: mbarrier":
//  - a 64-bit object in shared memory; init(count) sets the expected arrival count
//    (1 to 2^20 - 1) and starts phase 0; init on a live barrier is undefined (inval first);
//  - arrive: pending arrivals - 1; expect_tx(bytes): tx-count + bytes; arrive.expect_tx both;
//    the async proxy's complete_tx(bytes) (TMA) lowers the tx-count, which may go negative
//    (its range is -(2^20 - 1) to 2^20 - 1): a copy may complete before its expect_tx;
//  - a phase completes when pending arrivals and tx-count are both 0: the phase parity flips
//    and pending reloads with the expected count;
//  - try_wait.parity P: true once the phase with parity P has completed (the current phase
//    when its parity is P, else the one before it); it may suspend the thread up to a
//    system-dependent time limit.
// Modelling choices: the state lives beside the block, keyed by the object's shared offset
// (the 8 bytes themselves are not touched). The emulator's try_wait time limit lasts until
// the phase completes, so it suspends the fiber (ThreadState::at_mbarrier) and returns true
// (exploring orderings, it sometimes lets the others run and returns false: explore.cpp);
// a phase that can never complete is the scheduler's deadlock finding, naming the barrier and
// phase. The parity cannot tell phase k from k + 2, so each thread's last observed phase is
// kept and a wait two or more phases behind the barrier is reported (mbarrier_stale_phase).
// "For each phase ..., at least one test_wait or try_wait operation must be performed which
// returns True ... before an arrive-on operation in the subsequent phase" (PTX ISA "Phase of
// the mbarrier object"): the latest phase any thread's wait saw complete is kept, and an
// arrival (arrive, arrive.expect_tx) in phase k + 1 before a wait saw phase k complete is
// reported (mbarrier_phase_unobserved, once per phase). expect_tx alone and a copy's
// complete_tx are not arrive-on operations. A producer/consumer ring keeps the rule: each side
// arrives on a barrier's next phase only after waiting on the other barrier, which the other
// side arrives on only after its own wait saw this barrier's phase complete.
// For the race checker an mbarrier orders the TMA bytes it covers and, as the PTX memory model
// has it (arrive is a release, a wait that returns true an acquire, both .cta by default), a
// thread's accesses before its arrival with those after a wait that saw the phase complete: a
// producer that writes shared memory and then arrives hands the data over. The order is kept
// per (arriving thread, waiting warp), so a waiting thread orders its whole warp, which holds
// for the kernels' waits (every lane of a warp waits) and errs towards silence otherwise.
// Arrivals from a cluster peer order nothing here (another block's clock).
#include <algorithm>
#include <cstdio>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr std::uint32_t kMaxCount = (1u << 20) - 1;

std::string where(std::uint32_t offset) {
  return "the mbarrier at shared offset " + std::to_string(offset);
}

void report(Machine& m, int thread, FindingKind kind, std::uint32_t offset, std::string text) {
  Finding finding;
  finding.kind = kind;
  finding.address = reinterpret_cast<std::uintptr_t>(m.shared_begin) + offset;
  finding.bytes = 8;
  finding.offset = offset;
  finding.message = std::move(text);
  record(m, thread, std::move(finding));
}

// The shared offset of the barrier at `bar`, or false (reported) when it is not an 8-byte
// aligned object inside the dynamic shared memory.
bool barrier_offset(Machine& m, int self, const void* bar, const char* what,
                    std::uint32_t& offset) {
  const auto at = reinterpret_cast<std::uintptr_t>(bar);
  const auto begin = reinterpret_cast<std::uintptr_t>(m.shared_begin);
  if (at < begin || at + 8 > begin + m.config->shared_bytes || at % 8 != 0) {
    Finding finding;
    finding.kind = at % 8 != 0 ? FindingKind::misaligned_access : FindingKind::shared_out_of_bounds;
    finding.address = at;
    finding.bytes = 8;
    finding.offset = static_cast<long long>(at - begin);
    finding.message = std::string(what) + " on an mbarrier at 0x" + hex(at) +
                      ": not an 8-byte aligned object in dynamic shared memory";
    record(m, self, std::move(finding));
    return false;
  }
  offset = static_cast<std::uint32_t>(at - begin);
  return true;
}

// The live barrier `what` uses, or nullptr (reported: used before its init).
Mbarrier* live_barrier(Machine& m, int self, const void* bar, const char* what) {
  std::uint32_t offset = 0;
  if (!barrier_offset(m, self, bar, what, offset)) return nullptr;
  if (Mbarrier* b = find_mbarrier(m, offset)) return b;
  report(m, self, FindingKind::mbarrier_uninitialized, offset,
         std::string(what) + " on " + where(offset) +
             ", which no mbarrier.init has initialised (or inval ended); ignored");
  return nullptr;
}

// Completes the current phase if its arrivals and bytes are all in, waking its waiters.
void try_complete(Machine& m, Mbarrier& b) {
  if (b.pending != 0 || b.tx != 0) return;
  ++b.phase;
  b.pending = b.expected;
  b.completed_arrivals.swap(b.arrivals);
  b.arrivals.clear();
  for (ThreadSlot& t : m.threads) {
    if (t.state == ThreadState::at_mbarrier && t.wait_barrier == b.offset &&
        t.wait_phase < b.phase) {
      t.state = ThreadState::runnable;
    }
  }
}

// An arrival in phase k >= 1 with no wait yet returning true for phase k - 1 is reported.
void check_previous_phase_seen(Machine& m, Mbarrier& b, int self, const char* what) {
  if (b.phase == 0 || b.observed >= b.phase - 1 || b.unobserved_reported == b.phase) return;
  b.unobserved_reported = b.phase;
  report(m, self, FindingKind::mbarrier_phase_unobserved, b.offset,
         std::string(what) + " on " + where(b.offset) + " in phase " + std::to_string(b.phase) +
             " before any test_wait or try_wait returned true for phase " +
             std::to_string(b.phase - 1) +
             ": the PTX ISA requires one to see each phase complete before an arrival in the "
             "next (undefined behaviour)");
}

void arrive(Machine& m, const void* bar, const char* what, std::uint32_t tx_bytes) {
  Mbarrier* b = live_barrier(m, m.current, bar, what);
  if (b != nullptr) mbarrier_arrive_on(m, *b, m, m.current, what, tx_bytes);
}

int parity_of(std::int64_t phase) { return static_cast<int>(phase & 1); }

// Whether the phase with `parity` has completed for `self`; reports a stale wait. `seen` is
// the phase the thread's previous query named (-1 at first: the producer convention's
// parity-1 wait names the phase before phase 0), so the phase it means now is the first one
// from there with this parity; when the barrier has completed that one and the next, the
// parity names a later phase than the thread means.
bool test_parity(Machine& m, Mbarrier& b, int self, std::uint32_t parity, const char* what) {
  if (b.seen.size() < m.threads.size()) b.seen.resize(m.threads.size(), -1);
  std::int64_t& seen = b.seen[static_cast<std::size_t>(self)];
  const std::int64_t target = parity_of(seen) == static_cast<int>(parity) ? seen : seen + 1;
  if (b.phase >= target + 2) {
    report(m, self, FindingKind::mbarrier_stale_phase, b.offset,
           std::string(what) + " " + std::to_string(parity) + " on " + where(b.offset) +
               " for phase " + std::to_string(target) + ", but the barrier has completed " +
               std::to_string(b.phase) +
               " phases: the parity now names a later phase (two or more phases stale)");
  }
  // The phase the parity names now: the current one (open) or the one before (complete).
  const bool open = parity_of(b.phase) == static_cast<int>(parity);
  seen = open ? b.phase : b.phase - 1;
  if (open) return false;
  b.observed = std::max(b.observed, b.phase - 1);
  // The acquire: the arrivals of the phase it saw complete are ordered before this warp.
  const std::size_t warps = m.warp_sync.size(), warp = static_cast<std::size_t>(self / 32);
  for (const auto& [thread, stamp] : b.completed_arrivals) {
    std::uint32_t& sync = m.handoff_sync[static_cast<std::size_t>(thread) * warps + warp];
    sync = std::max(sync, stamp);
  }
  return true;
}

}  // namespace

// Findings go to the issuer, naming the barrier by its CTA-relative offset (and the owner's
// rank when it is another block's).
void mbarrier_arrive_on(Machine& owner, Mbarrier& b, Machine& issuer, int self, const char* what,
                        std::uint32_t tx_bytes) {
  check_previous_phase_seen(issuer, b, self, what);
  b.tx += tx_bytes;
  if (tx_bytes != 0 && &owner == &issuer) b.expect_thread = self;
  if (b.pending == 0) {
    report(issuer, self, FindingKind::mbarrier_arrival_overflow, b.offset,
           std::string(what) + " on " + where(b.offset) + of_peer(issuer, owner) + " in phase " +
               std::to_string(b.phase) + ", which already has all " + std::to_string(b.expected) +
               " arrivals of its init count (waiting for bytes); the arrival is ignored");
    return;
  }
  --b.pending;
  if (&owner == &issuer) b.arrivals.emplace_back(self, ++issuer.time);  // the release
  try_complete(owner, b);
}

Mbarrier* find_mbarrier(Machine& m, std::uint32_t offset) {
  for (Mbarrier& b : m.mbarriers) {
    if (b.offset == offset && b.live) return &b;
  }
  return nullptr;
}

// A negative tx-count is not a finding: the copy came first and its expect_tx is still to
// come. Bytes that never get announced leave the phase open, reported where it is waited for
// (describe_mbarrier_wait) or at block end (finish_async_proxy).
void mbarrier_complete_tx(Machine& m, Mbarrier& b, std::uint32_t bytes) {
  b.tx -= bytes;
  try_complete(m, b);
}

std::string describe_mbarrier_wait(const Machine& m, int thread, FindingKind& kind) {
  const ThreadSlot& t = m.threads[static_cast<std::size_t>(thread)];
  std::int64_t pending = -1, tx = 0, expected = 0;
  for (const Mbarrier& b : m.mbarriers) {
    if (b.offset != t.wait_barrier || !b.live) continue;
    pending = b.pending;
    tx = b.tx;
    expected = b.expected;
  }
  std::string text = "waits in mbarrier.try_wait.parity " +
                     std::to_string(parity_of(t.wait_phase)) + " on " + where(t.wait_barrier) +
                     " for phase " + std::to_string(t.wait_phase) + "; it has " +
                     std::to_string(pending) + " of " + std::to_string(expected) +
                     " arrivals pending and " + std::to_string(tx) + " transaction bytes expected";
  if (pending == 0 && tx > 0) {
    kind = FindingKind::mbarrier_tx_mismatch;
    text += ": every arrival is in but expect_tx announced bytes no copy delivers";
  } else if (pending == 0 && tx < 0) {
    kind = FindingKind::mbarrier_tx_mismatch;
    text += ": every arrival is in but the copies delivered " + std::to_string(-tx) +
            " bytes more than expect_tx announced";
  }
  return text;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void mbarrier_init(void* bar, std::uint32_t count) {
  detail::Machine& m = detail::launch_machine("mbarrier.init");
  const int self = m.current;
  std::uint32_t offset = 0;
  if (!detail::barrier_offset(m, self, bar, "mbarrier.init", offset)) return;
  if (count < 1 || count > detail::kMaxCount) {
    detail::report(m, self, FindingKind::invalid_operand, offset,
                   "mbarrier.init on " + detail::where(offset) + " with count " +
                       std::to_string(count) + ": the count must be 1 to 2^20 - 1; ignored");
    return;
  }
  if (detail::find_mbarrier(m, offset) != nullptr) {
    detail::report(m, self, FindingKind::mbarrier_reinit, offset,
                   "mbarrier.init on " + detail::where(offset) +
                       ", which is live (initialised, not invalidated): mbarrier.inval first; "
                       "the barrier is re-initialised");
    detail::find_mbarrier(m, offset)->live = false;
  }
  detail::Mbarrier b;
  b.offset = offset;
  b.live = true;
  b.expected = count;
  b.pending = count;
  b.init_epoch = m.cluster->barrier_phase;
  m.mbarriers.push_back(std::move(b));
}

void mbarrier_inval(void* bar) {
  detail::Machine& m = detail::launch_machine("mbarrier.inval");
  if (detail::Mbarrier* b = detail::live_barrier(m, m.current, bar, "mbarrier.inval")) {
    b->live = false;
  }
}

void mbarrier_arrive(void* bar) {
  detail::Machine& m = detail::launch_machine("mbarrier.arrive");
  detail::arrive(m, bar, "mbarrier.arrive", 0);
}

void mbarrier_arrive_expect_tx(void* bar, std::uint32_t bytes) {
  detail::Machine& m = detail::launch_machine("mbarrier.arrive.expect_tx");
  detail::arrive(m, bar, "mbarrier.arrive.expect_tx", bytes);
}

void mbarrier_expect_tx(void* bar, std::uint32_t bytes) {
  detail::Machine& m = detail::launch_machine("mbarrier.expect_tx");
  if (detail::Mbarrier* b = detail::live_barrier(m, m.current, bar, "mbarrier.expect_tx")) {
    b->tx += bytes;
    b->expect_thread = m.current;
  }
}

bool mbarrier_test_wait_parity(void* bar, std::uint32_t parity) {
  detail::Machine& m = detail::launch_machine("mbarrier.test_wait.parity");
  const char* what = "mbarrier.test_wait.parity";
  detail::Mbarrier* b = detail::live_barrier(m, m.current, bar, what);
  return b == nullptr || detail::test_parity(m, *b, m.current, parity & 1u, what);
}

bool mbarrier_try_wait_parity(void* bar, std::uint32_t parity) {
  detail::Machine& m = detail::launch_machine("mbarrier.try_wait.parity");
  const char* what = "mbarrier.try_wait.parity";
  const int self = m.current;
  detail::Mbarrier* b = detail::live_barrier(m, self, bar, what);
  if (b == nullptr) return true;
  if (detail::test_parity(m, *b, self, parity & 1u, what)) return true;
  if (detail::explore_chance(m, detail::kTryWaitFails)) {  // the time limit runs out
    ++m.report.schedule.failed_try_waits;
    detail::yield_to_scheduler(m);  // still runnable: the others move meanwhile
    return false;
  }
  detail::ThreadSlot& slot = m.threads[static_cast<std::size_t>(self)];
  slot.state = detail::ThreadState::at_mbarrier;
  slot.wait_barrier = b->offset;
  slot.wait_phase = b->phase;
  const std::uint32_t offset = b->offset;
  detail::yield_to_scheduler(m);  // resumed once the phase completed
  b = detail::find_mbarrier(m, offset);
  return b == nullptr || detail::test_parity(m, *b, self, parity & 1u, what);
}

void mbarrier_arrive_cluster(void* bar, unsigned rank) {
  const char* what = "mbarrier.arrive.shared::cluster";
  detail::Machine& m = detail::launch_machine(what);
  const int self = m.current;
  std::uint32_t offset = 0;
  if (!detail::barrier_offset(m, self, bar, what, offset)) return;
  detail::Machine* peer = detail::cluster_peer(m, rank, what);
  if (peer == nullptr || !detail::peer_alive(m, *peer, what)) return;
  detail::Mbarrier* b = detail::find_mbarrier(*peer, offset);
  if (b == nullptr) {
    detail::report(m, self, FindingKind::mbarrier_uninitialized, offset,
                   std::string(what) + " on " + detail::where(offset) + detail::of_peer(m, *peer) +
                       ", which no mbarrier.init has initialised; ignored");
    return;
  }
  if (detail::peer_init_ordered(m, *peer, *b, what)) {
    detail::mbarrier_arrive_on(*peer, *b, m, self, what, 0);
  }
}

void mbarrier_wait_parity(void* bar, std::uint32_t parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

}  // namespace flashjit::emulator

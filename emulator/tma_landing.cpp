// Whether the TMA bytes a block reads were handed to it: the PTX ISA makes a load's data
// visible through its mbarrier, "once a wait observes the phase complete". Bytes that have
// landed (the copy done, nothing pending) but counted toward a phase no wait has seen complete
// are not the reader's yet: in a ring, that is a slot refilled for the next round before this
// round's readers were done (a producer that acquired a slot too early, or a peer in a cluster
// multicasting into a slot its consumers had not released). The bytes' current contents are
// then the next round's, which no race shows, since nothing is in flight any more.
//
// So each 16-byte chunk keeps where its last TMA load landed (the mbarrier and the phase its
// bytes counted toward). A read of the chunk, and another TMA load over it, is reported while
// no wait of the block has seen that phase complete (tma_load_unobserved). Any wait of the block
// counts, as threads that waited usually hand over to the others by a barrier; a generic write
// makes the chunk the writer's, ordered by the race checker from then on.
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

constexpr std::uint32_t kChunk = 16;

// Whether `landing`'s phase has been seen complete by a wait (or cannot be told any more: the
// barrier was invalidated).
bool seen(Machine& m, const TmaLanding& landing) {
  if (landing.phase < 0) return true;
  const Mbarrier* barrier = find_mbarrier(m, landing.barrier);
  return barrier == nullptr || barrier->observed >= landing.phase;
}

std::string landed(const TmaLanding& landing) {
  return "a cp.async.bulk.tensor load landed on phase " + std::to_string(landing.phase) +
         " of the mbarrier at shared offset " + std::to_string(landing.barrier) +
         ", which no wait has seen complete";
}

}  // namespace

void note_landing(Machine& m, const TmaLoad& load, std::int64_t phase) {
  for (const std::uint32_t chunk : load.chunks) m.landings[chunk / kChunk] = {load.barrier, phase};
}

void forget_landings(Machine& m, std::size_t offset, std::size_t bytes) {
  for (std::size_t chunk = offset / kChunk; chunk * kChunk < offset + bytes; ++chunk) {
    m.landings[chunk].phase = -1;
  }
}

bool check_landing_seen(Machine& m, int thread, std::size_t offset, std::size_t bytes,
                        const char* what) {
  for (std::size_t chunk = offset / kChunk; chunk * kChunk < offset + bytes; ++chunk) {
    const TmaLanding landing = m.landings[chunk];
    if (seen(m, landing)) continue;
    Finding finding;
    finding.kind = FindingKind::tma_load_unobserved;
    finding.address = reinterpret_cast<std::uintptr_t>(m.shared_begin) + offset;
    finding.bytes = bytes;
    finding.offset = static_cast<long long>(offset);
    finding.message = std::string(*what != '\0' ? what : "shared load") + " of " +
                      std::to_string(bytes) + " bytes at shared offset " + std::to_string(offset) +
                      ": chunk " + std::to_string(chunk * kChunk) + " holds what " +
                      landed(landing) + " (wait on that phase before reading)";
    record(m, thread, std::move(finding));
    return false;
  }
  return true;
}

bool check_reloadable(Machine& issuer, int self, Machine& dest, std::uint32_t chunk) {
  const TmaLanding landing = dest.landings[chunk / kChunk];
  const bool in_flight = dest.shadow[chunk].pending_tma != 0;
  if (!in_flight && seen(dest, landing)) return true;
  Finding finding;
  finding.kind = FindingKind::tma_load_unobserved;
  finding.address = reinterpret_cast<std::uintptr_t>(dest.shared_begin) + chunk;
  finding.bytes = kChunk;
  finding.offset = chunk;
  finding.write = true;
  finding.message = "cp.async.bulk.tensor load writes shared offset " + std::to_string(chunk) +
                    of_peer(issuer, dest) + ", which " +
                    (in_flight ? std::string("an earlier load still in flight writes")
                               : "holds what " + landed(landing)) +
                    ": its readers cannot have had it (refill a slot only after its readers "
                    "released it)";
  record(issuer, self, std::move(finding));
  return false;
}

}  // namespace flashjit::emulator::detail

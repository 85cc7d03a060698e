// Clusters on the emulator (PTX ISA "Cluster of Cooperative Thread Arrays", "barrier.cluster",
// "mapa", "mbarrier.arrive" with .shared::cluster, and cp.async.bulk.tensor's .multicast::cluster
// in tma.cpp):
//  - a cluster's blocks are resident together, so they may wait on each other: the scheduler
//    runs them together (scheduler.cpp), each block a Machine of its own, by rank
//    (%cluster_ctarank: x fastest within the cluster's shape);
//  - a block reaches another's shared memory at the same CTA-relative offset (mapa): an
//    mbarrier arrival there, or a multicast TMA load writing there and completing on the
//    mbarrier at the same offset;
//  - barrier.cluster.arrive / wait: a wait returns once every non-exited thread of the cluster
//    arrived in that phase (an exiting thread releases a phase that only it held up);
//  - a block's shared memory is only guaranteed while it runs: reaching a block whose threads
//    have all exited is reported (cluster_peer_exited); the usual cure is a cluster barrier
//    before exit;
//  - an mbarrier another block initialised may be used only after a cluster barrier completed
//    past its init (fence.mbarrier_init.release.cluster then barrier.cluster.arrive.release /
//    wait.acquire): earlier it is reported (mbarrier_init_unordered).
// Modelling choices: a completed cluster barrier orders every shared access made before it
// in each block before every later one (as __syncthreads does), arrive to wait included; the
// race checker does not otherwise compare accesses across blocks. Stores to another block's
// shared memory (st.shared::cluster) are not modelled; loads (ld.shared::cluster,
// load_shared_cluster) read the peer's bytes unchecked for races, ordered by the cluster
// barriers around them.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

void report(Machine& m, int thread, FindingKind kind, std::string text) {
  Finding finding;
  finding.kind = kind;
  finding.message = std::move(text);
  record(m, thread, std::move(finding));
}

// The live threads of the cluster, and how many of them arrived in the open phase.
struct Arrivals {
  std::size_t live = 0;
  std::size_t arrived = 0;
};
Arrivals count_arrivals(const Cluster& cluster) {
  Arrivals a;
  for (const Machine* m : cluster.ranks) {
    if (m->finished) continue;
    for (const ThreadSlot& t : m->threads) {
      if (t.state == ThreadState::exited) continue;
      ++a.live;
      if (t.cluster_arrived == cluster.barrier_phase) ++a.arrived;
    }
  }
  return a;
}

// Completes the open phase once every live thread of the cluster arrived: its waiters wake,
// and each block's accesses before it are ordered before everything after.
void try_complete(Cluster& cluster) {
  const Arrivals a = count_arrivals(cluster);
  if (a.arrived == 0 || a.arrived < a.live) return;
  ++cluster.barrier_phase;
  for (Machine* m : cluster.ranks) {
    if (m->finished) continue;
    for (ThreadSlot& t : m->threads) {
      if (t.state == ThreadState::at_cluster_barrier && t.wait_phase < cluster.barrier_phase) {
        t.state = ThreadState::runnable;
      }
    }
    m->barrier_time = ++m->time;
  }
}

std::string rank_text(unsigned rank) { return "CTA rank " + std::to_string(rank); }

}  // namespace

std::string of_peer(const Machine& issuer, const Machine& owner) {
  return &owner == &issuer ? "" : " of " + rank_text(owner.rank);
}

void check_cluster_shape(const LaunchConfig& config) {
  const Dim3 c = config.cluster, g = config.grid;
  if (c.x == 0 || c.y == 0 || c.z == 0 || c.volume() > kMaxClusterBlocks) {
    throw std::invalid_argument("emulator launch: a cluster holds 1 to " +
                                std::to_string(kMaxClusterBlocks) + " blocks, not " +
                                format(config.cluster));
  }
  if (g.x % c.x != 0 || g.y % c.y != 0 || g.z % c.z != 0) {
    throw std::invalid_argument("emulator launch: the cluster shape " + format(c) +
                                " must divide the grid " + format(g) + " in every dimension");
  }
}

void merge_report(Report& into, const Report& part) {
  for (const Finding& finding : part.findings) {
    if (into.findings.size() < Report::kMaxFindings) {
      into.findings.push_back(finding);
    } else {
      ++into.suppressed;
    }
  }
  into.suppressed += part.suppressed;
  WorkCounters& w = into.work;
  const WorkCounters& p = part.work;
  w.tensor_flops += p.tensor_flops;
  w.shared_bytes_read += p.shared_bytes_read;
  w.shared_bytes_written += p.shared_bytes_written;
  w.global_bytes_read += p.global_bytes_read;
  w.global_bytes_written += p.global_bytes_written;
  w.barriers += p.barriers;
  w.ctas += p.ctas;
  w.ldmatrix_bytes += p.ldmatrix_bytes;
  if (p.kv_loads_ahead >= 0) {
    w.kv_loads_ahead =
        w.kv_loads_ahead < 0 ? p.kv_loads_ahead : std::min(w.kv_loads_ahead, p.kv_loads_ahead);
  }
  if (p.q_loads_ahead >= 0) {
    w.q_loads_ahead =
        w.q_loads_ahead < 0 ? p.q_loads_ahead : std::min(w.q_loads_ahead, p.q_loads_ahead);
  }
  into.schedule.early_landings += part.schedule.early_landings;
  into.schedule.failed_try_waits += part.schedule.failed_try_waits;
}

Machine* cluster_peer(Machine& self, unsigned rank, const char* what) {
  const std::size_t size = self.cluster->ranks.size();
  if (rank < size) return self.cluster->ranks[rank];
  report(self, self.current, FindingKind::invalid_operand,
         std::string(what) + " names " + rank_text(rank) + ", but the cluster holds " +
             std::to_string(size) + (size == 1 ? " block" : " blocks") + "; skipped");
  return nullptr;
}

bool peer_alive(Machine& self, const Machine& peer, const char* what) {
  const bool running =
      std::any_of(peer.threads.begin(), peer.threads.end(),
                  [](const ThreadSlot& t) { return t.state != ThreadState::exited; });
  if (running) return true;
  report(self, self.current, FindingKind::cluster_peer_exited,
         std::string(what) + " reaches the shared memory of " + rank_text(peer.rank) + " (block " +
             format(peer.block_index) +
             "), whose threads have all exited: its shared memory may belong to another block "
             "by now (a cluster barrier before exit keeps it); skipped");
  return false;
}

bool peer_init_ordered(Machine& self, const Machine& peer, const Mbarrier& barrier,
                       const char* what) {
  if (&self == &peer || barrier.init_epoch < self.cluster->barrier_phase) return true;
  report(self, self.current, FindingKind::mbarrier_init_unordered,
         std::string(what) + " on the mbarrier at shared offset " + std::to_string(barrier.offset) +
             of_peer(self, peer) +
             ", whose init no cluster barrier has ordered before it "
             "(fence.mbarrier_init.release.cluster, then barrier.cluster.arrive and wait)");
  return false;
}

void cluster_thread_exited(Machine& machine) {
  if (machine.cluster != nullptr) try_complete(*machine.cluster);
}

std::string describe_cluster_wait(const Machine& machine, int thread) {
  const ThreadSlot& t = machine.threads[static_cast<std::size_t>(thread)];
  const Arrivals a = count_arrivals(*machine.cluster);
  return "waits in barrier.cluster.wait for phase " + std::to_string(t.wait_phase) + ": " +
         std::to_string(a.arrived) + " of the cluster's " + std::to_string(a.live) +
         " live threads arrived";
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

unsigned cluster_ctarank() { return detail::launch_machine("%cluster_ctarank").rank; }

unsigned cluster_nctarank() {
  return static_cast<unsigned>(detail::launch_machine("%cluster_nctarank").cluster->ranks.size());
}

void cluster_arrive() {
  detail::Machine& m = detail::launch_machine("barrier.cluster.arrive");
  detail::Cluster& cluster = *m.cluster;
  detail::ThreadSlot& slot = m.threads[static_cast<std::size_t>(m.current)];
  if (slot.cluster_arrived == cluster.barrier_phase) {
    detail::report(m, m.current, FindingKind::invalid_operand,
                   "barrier.cluster.arrive twice in phase " +
                       std::to_string(cluster.barrier_phase) +
                       " of the cluster barrier, with no barrier.cluster.wait between "
                       "(undefined); ignored");
    return;
  }
  slot.cluster_arrived = cluster.barrier_phase;
  detail::try_complete(cluster);
}

void cluster_wait() {
  detail::Machine& m = detail::launch_machine("barrier.cluster.wait");
  detail::Cluster& cluster = *m.cluster;
  detail::ThreadSlot& slot = m.threads[static_cast<std::size_t>(m.current)];
  if (slot.cluster_arrived < 0) {
    detail::report(m, m.current, FindingKind::invalid_operand,
                   "barrier.cluster.wait with no barrier.cluster.arrive before it; ignored");
    return;
  }
  if (slot.cluster_arrived == cluster.barrier_phase) {
    slot.state = detail::ThreadState::at_cluster_barrier;
    slot.wait_phase = cluster.barrier_phase;
    detail::yield_to_scheduler(m);  // resumed once the phase completed
  }
  slot.cluster_arrived = -1;
}

}  // namespace flashjit::emulator

namespace flashjit::emulator {

bool load_shared_cluster(const void* local, unsigned rank, void* out, std::size_t bytes) {
  const char* what = "ld.shared::cluster";
  detail::Machine& m = detail::launch_machine(what);
  const auto at = reinterpret_cast<std::uintptr_t>(local);
  const auto begin = reinterpret_cast<std::uintptr_t>(m.shared_begin);
  if (at < begin || at + bytes > begin + m.config->shared_bytes || at % bytes != 0) {
    Finding finding;
    finding.kind =
        at % bytes != 0 ? FindingKind::misaligned_access : FindingKind::shared_out_of_bounds;
    finding.address = at;
    finding.bytes = bytes;
    finding.offset = static_cast<long long>(at - begin);
    finding.message = std::string(what) + " of " + std::to_string(bytes) + " bytes at 0x" +
                      detail::hex(at) + ": not an aligned object in dynamic shared memory";
    detail::record(m, m.current, std::move(finding));
    return false;
  }
  detail::Machine* peer = m.cluster != nullptr ? detail::cluster_peer(m, rank, what) : &m;
  if (peer == nullptr || !detail::peer_alive(m, *peer, what)) return false;
  std::memcpy(out, peer->shared_begin + (at - begin), bytes);
  return true;
}

}  // namespace flashjit::emulator

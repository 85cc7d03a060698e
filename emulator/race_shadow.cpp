// The shared-memory race rule, one byte at a time: two accesses to a byte, at least one a
// write, race unless a synchronization orders them. __syncthreads orders every thread of the
// block, and a named barrier (bar.sync) the threads of the warps it holds whole. Within a warp
// (Volta+ threads are scheduled independently, so lanes race too) a
// __syncwarp or any other collective of the lanes - shuffles, votes, ldmatrix and mma.sync
// included, since every lane must have reached it before any continues - orders the lanes it
// holds. A thread is always ordered with itself. An mbarrier orders a thread's accesses before
// its arrival with those of a warp one of whose threads then saw the phase complete
// (mbarrier.cpp).
//
// Per byte the shadow keeps the last writer and a summary of the readers since, each stamped
// with the clock (Machine::time) at the access; a stamp older than a synchronization of both
// sides is ordered before it. Readers of several warps are kept as a set of warps with the
// latest read's stamp: a write is ordered after them when each of those warps synchronized
// with the writer's after that stamp (a named barrier holding both, say).
#include <algorithm>
#include <bit>
#include <cstring>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

using Readers = ShadowByte::Readers;

int warp_of(int thread) { return thread / 32; }

// Whether an access by `other` at `time` is ordered before one by `self` now.
bool ordered(const Machine& m, std::uint32_t time, int other, int self) {
  if (time < m.barrier_time || other == self) return true;
  const int warp = warp_of(self);
  const std::size_t warps = m.warp_sync.size();
  if (time < m.warps_sync[static_cast<std::size_t>(warp_of(other)) * warps +
                          static_cast<std::size_t>(warp)] ||
      time < m.handoff_sync[static_cast<std::size_t>(other) * warps +
                            static_cast<std::size_t>(warp)]) {
    return true;
  }
  if (warp_of(other) != warp) return false;
  if (time < m.warp_sync[static_cast<std::size_t>(warp)]) return true;
  const auto pair = static_cast<std::size_t>(warp * 1024 + (other % 32) * 32 + self % 32);
  return time < m.pair_sync[pair];
}

// The readers since the barrier that a write by `self` now races with.
Conflict write_after_read(const Machine& m, const ShadowByte& s, int self) {
  switch (s.readers) {
    case Readers::none:
      return {};
    case Readers::one:
      if (ordered(m, s.read_time, s.reader, self)) return {};
      return {s.reader, "write after read", warp_of(s.reader) == warp_of(self)};
    case Readers::lanes: {  // several lanes of `reader`'s warp; pairwise order is not kept
      const bool same_warp = warp_of(s.reader) == warp_of(self);
      if (same_warp && s.read_time < m.warp_sync[static_cast<std::size_t>(warp_of(self))]) {
        return {};
      }
      return {s.reader != self ? s.reader : kManyReaders, "write after read", same_warp};
    }
    case Readers::warps: {  // each reader warp ordered before the write, at the latest read
      const int warp = warp_of(self);
      const std::size_t warps = m.warp_sync.size();
      for (std::uint32_t set = s.reader_warps; set != 0; set &= set - 1) {
        const int reader = std::countr_zero(set);
        std::uint32_t sync =
            m.warps_sync[static_cast<std::size_t>(reader) * warps + static_cast<std::size_t>(warp)];
        if (reader == warp) sync = std::max(sync, m.warp_sync[static_cast<std::size_t>(warp)]);
        if (s.read_time >= sync) return {kManyReaders, "write after read", false};
      }
      return {};
    }
  }
  return {};
}

// Adds a read by `self` to the summary; `fresh` when the summary is of this barrier interval.
void add_reader(const Machine& m, ShadowByte& s, int self, bool fresh) {
  const std::uint32_t bit = 1u << warp_of(self);
  if (!fresh) {
    s.readers = Readers::one;
    s.reader = static_cast<std::int16_t>(self);
    s.reader_warps = bit;
  } else if (s.readers == Readers::warps) {
    s.reader_warps |= bit;
  } else {
    const int warp = warp_of(self);
    if (warp_of(s.reader) != warp) {
      s.readers = Readers::warps;
      s.reader_warps |= bit;
    } else if (s.readers == Readers::one
                   ? ordered(m, s.read_time, s.reader, self)
                   : s.read_time < m.warp_sync[static_cast<std::size_t>(warp)]) {
      s.readers = Readers::one;  // the earlier reads are ordered before this one
      s.reader = static_cast<std::int16_t>(self);
    } else if (s.reader != self) {
      s.readers = Readers::lanes;
    }
  }
  s.read_time = m.time;
}

// Updates the shadow of one byte for an access by `self` now; returns what it conflicts with.
Conflict touch(const Machine& m, ShadowByte& s, int self, bool write) {
  Conflict conflict;
  if (s.writer >= 0 && !ordered(m, s.write_time, s.writer, self)) {
    conflict = {s.writer, write ? "write after write" : "read after write",
                warp_of(s.writer) == warp_of(self)};
  }
  const bool fresh_reads = s.readers != Readers::none && s.read_time >= m.barrier_time;
  if (!write) {
    add_reader(m, s, self, fresh_reads);
    return conflict;
  }
  if (conflict.what == nullptr && fresh_reads) conflict = write_after_read(m, s, self);
  // The reads so far were ordered before this write, or their race was just reported: an access
  // ordered after the write is ordered after them too (happens-before is transitive), and one
  // that is not races with the write itself. So only reads after it are kept.
  s.readers = Readers::none;
  s.reader_warps = 0;
  s.writer = static_cast<std::int16_t>(self);
  s.write_time = m.time;
  return conflict;
}

}  // namespace

RangeCheck touch_range(const Machine& m, ShadowByte* shadow, std::size_t count, int self,
                       bool write) {
  RangeCheck result;
  for (std::size_t i = 0; i < count;) {
    const ShadowByte before = shadow[i];
    const Conflict conflict = touch(m, shadow[i], self, write);
    const bool wgmma = write && before.wgmma_reads != 0;    // reads by a wgmma do not conflict
    const bool tma_store = write && before.tma_reads != 0;  // nor do a TMA store's
    const bool tma = before.pending_tma != 0;
    if (!result.found &&
        (before.pending_copies != 0 || wgmma || tma || tma_store || conflict.what != nullptr)) {
      result = {true, i, before.pending_copies != 0, wgmma, tma, tma_store, conflict};
    }
    // The bytes of one access were usually last touched together. touch depends only on the
    // shadow, so a byte equal to this one gets the same update and conflict (noted already).
    const ShadowByte after = shadow[i];
    for (++i; i < count && std::memcmp(&shadow[i], &before, sizeof before) == 0; ++i) {
      shadow[i] = after;
    }
  }
  return result;
}

}  // namespace flashjit::emulator::detail

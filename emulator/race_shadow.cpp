// The shared-memory race rule, one byte at a time: two accesses to a byte, at least one a
// write, race unless a synchronization orders them. __syncthreads orders every thread of the
// block, and a named barrier (bar.sync) the threads of the warps it holds whole. Within a warp
// (Volta+ threads are scheduled independently, so lanes race too) a
// __syncwarp or any other collective of the lanes - shuffles, votes, ldmatrix and mma.sync
// included, since every lane must have reached it before any continues - orders the lanes it
// holds. A thread is always ordered with itself. An mbarrier orders a thread's accesses before
// its arrival with those of a warp one of whose threads then saw the phase complete
// (mbarrier.cpp); a warp all of whose threads arrived so orders the reads the shadow keeps
// per warp.
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

// Whether every thread of warp `reader` arrived on an mbarrier after `time` and a thread of
// `warp` has since seen that phase complete: then whatever that warp's lanes accessed at `time`
// or before is ordered before `warp` (a warpgroup's wgmma reads of a ring slot, then each
// thread's release, then a producer thread's writes into the slot).
bool warp_handed_off(const Machine& m, int reader, int warp, std::uint32_t time) {
  const std::size_t warps = m.warp_sync.size(), threads = m.handoff_sync.size() / warps;
  const auto first = static_cast<std::size_t>(reader) * 32;
  for (std::size_t t = first; t < std::min(threads, first + 32); ++t) {
    if (time >= m.handoff_sync[t * warps + static_cast<std::size_t>(warp)]) return false;
  }
  return true;
}

// The readers since the barrier that a write by `self` now races with; `chunk` is the byte's
// in Machine::warp_reads.
Conflict write_after_read(const Machine& m, const ShadowByte& s, int self, std::size_t chunk) {
  switch (s.readers) {
    case Readers::none:
      return {};
    case Readers::one:
      if (ordered(m, s.read_time, s.reader, self)) return {};
      return {s.reader, "write after read", warp_of(s.reader) == warp_of(self)};
    case Readers::lanes: {  // several lanes of `reader`'s warp; pairwise order is not kept
      if (warp_handed_off(m, warp_of(s.reader), warp_of(self), s.read_time)) return {};
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
        const std::uint32_t latest = m.warp_reads[chunk * warps + static_cast<std::size_t>(reader)];
        if (s.read_time >= sync && !warp_handed_off(m, reader, warp, latest)) {
          return {kManyReaders, "write after read", false};
        }
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
Conflict touch(const Machine& m, ShadowByte& s, int self, bool write, std::size_t chunk) {
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
  if (conflict.what == nullptr && fresh_reads) conflict = write_after_read(m, s, self, chunk);
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

RangeCheck touch_range(Machine& m, ShadowByte* shadow, std::size_t count, int self, bool write) {
  RangeCheck result;
  const auto first = static_cast<std::size_t>(shadow - m.shadow.data());
  for (std::size_t i = 0; i < count;) {
    const ShadowByte before = shadow[i];
    const std::size_t chunk = (first + i) / kShadowChunk;
    const Conflict conflict = touch(m, shadow[i], self, write, chunk);
    const bool wgmma = write && before.wgmma_reads != 0;    // reads by a wgmma do not conflict
    const bool tma_store = write && before.tma_reads != 0;  // nor do a TMA store's
    const bool tma = before.pending_tma != 0;
    if (!result.found &&
        (before.pending_copies != 0 || wgmma || tma || tma_store || conflict.what != nullptr)) {
      result = {true, i, before.pending_copies != 0, wgmma, tma, tma_store, conflict};
    }
    // The bytes of one access were usually last touched together. touch depends only on the
    // shadow and the chunk, so a byte of the chunk equal to this one gets the same update and
    // conflict (noted already).
    const ShadowByte after = shadow[i];
    for (++i; i < count && (first + i) / kShadowChunk == chunk &&
              std::memcmp(&shadow[i], &before, sizeof before) == 0;
         ++i) {
      shadow[i] = after;
    }
  }
  if (!write && count > 0) {  // this warp's latest read of each chunk the access touched
    const std::size_t warps = m.warp_sync.size(), warp = static_cast<std::size_t>(self / 32);
    for (std::size_t c = first / kShadowChunk; c <= (first + count - 1) / kShadowChunk; ++c) {
      m.warp_reads[c * warps + warp] = m.time;
    }
  }
  return result;
}

}  // namespace flashjit::emulator::detail

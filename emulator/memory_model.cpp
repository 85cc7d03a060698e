// The memory model's arithmetic (memory_model.hpp): banks, sectors, occupancy and an LRU L2.
#include "emulator/memory_model.hpp"

#include <algorithm>
#include <bit>
#include <unordered_map>

namespace flashjit::emulator {
namespace {

constexpr unsigned kBanks = 32;
constexpr std::uint64_t kBankBytes = 4;
constexpr std::uint64_t kSectorBytes = 32;
constexpr std::uint64_t kLineSectors = 4;  // 128-byte lines
constexpr unsigned kReservedSharedPerCta = 1024;

// The lanes served together: the bytes one wavefront moves (128) over the access width.
unsigned lanes_per_phase(const WarpRequest& request) {
  std::uint32_t width = 0;
  for (const LaneAccess& lane : request) width = std::max(width, lane.bytes);
  return width <= 4 ? 32 : width <= 8 ? 16 : 8;
}

SharedCost phase_cost(const WarpRequest& request, unsigned first, unsigned count) {
  std::array<std::vector<std::uint64_t>, kBanks> words;  // per bank: distinct words
  std::uint64_t distinct = 0;
  for (unsigned lane = first; lane < first + count; ++lane) {
    const LaneAccess& access = request[lane];
    if (access.bytes == 0) continue;
    const std::uint64_t last = (access.address + access.bytes - 1) / kBankBytes;
    for (std::uint64_t word = access.address / kBankBytes; word <= last; ++word) {
      std::vector<std::uint64_t>& bank = words[word % kBanks];
      if (std::find(bank.begin(), bank.end(), word) != bank.end()) continue;
      bank.push_back(word);
      ++distinct;
    }
  }
  if (distinct == 0) return {};
  SharedCost cost;
  for (const std::vector<std::uint64_t>& bank : words) {
    cost.wavefronts = std::max(cost.wavefronts, static_cast<unsigned>(bank.size()));
  }
  cost.ideal = static_cast<unsigned>((distinct + kBanks - 1) / kBanks);
  return cost;
}

// An LRU set of 128-byte lines, each with the sectors it holds: an intrusive list over a pool.
class LruL2 {
 public:
  explicit LruL2(std::uint64_t lines) : capacity_(std::max<std::uint64_t>(lines, 1)) {}

  // Reads the sectors of `line` in the mask `wanted`; returns how many DRAM had to supply.
  unsigned read(std::uint64_t line, std::uint8_t wanted) {
    auto found = index_.find(line);
    if (found != index_.end()) {
      Node& node = nodes_[found->second];
      if (head_ != found->second) {
        unlink(found->second);
        push_front(found->second);
      }
      const auto missing = static_cast<std::uint8_t>(wanted & ~node.sectors);
      node.sectors |= wanted;
      return static_cast<unsigned>(std::popcount(missing));
    }
    std::uint32_t slot;
    if (index_.size() < capacity_) {
      slot = static_cast<std::uint32_t>(nodes_.size());
      nodes_.push_back({});
    } else {
      slot = tail_;
      unlink(slot);
      index_.erase(nodes_[slot].line);
    }
    nodes_[slot].line = line;
    nodes_[slot].sectors = wanted;
    index_.emplace(line, slot);
    push_front(slot);
    return static_cast<unsigned>(std::popcount(wanted));
  }

 private:
  static constexpr std::uint32_t kNone = 0xffffffffu;
  struct Node {
    std::uint64_t line = 0;
    std::uint32_t prev = kNone, next = kNone;
    std::uint8_t sectors = 0;
  };
  void unlink(std::uint32_t slot) {
    Node& node = nodes_[slot];
    (node.prev == kNone ? head_ : nodes_[node.prev].next) = node.next;
    (node.next == kNone ? tail_ : nodes_[node.next].prev) = node.prev;
    node.prev = node.next = kNone;
  }
  void push_front(std::uint32_t slot) {
    nodes_[slot].next = head_;
    if (head_ != kNone) nodes_[head_].prev = slot;
    head_ = slot;
    if (tail_ == kNone) tail_ = slot;
  }

  std::uint64_t capacity_;
  std::vector<Node> nodes_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;
  std::uint32_t head_ = kNone, tail_ = kNone;
};

// Where one resident CTA is in its trace.
struct Cursor {
  std::vector<ByteRun> runs;
  std::size_t run = 0;
  std::uint64_t at = 0;  // the next byte of that run
};

}  // namespace

const char* to_string(AccessKind kind) {
  switch (kind) {
    case AccessKind::shared_load: return "shared_load";
    case AccessKind::shared_store: return "shared_store";
    case AccessKind::global_load: return "global_load";
    case AccessKind::global_store: return "global_store";
    case AccessKind::wgmma_operand: return "wgmma_operand";
  }
  return "?";
}

SharedCost shared_request_cost(const WarpRequest& request) {
  const unsigned per_phase = lanes_per_phase(request);
  SharedCost total;
  for (unsigned first = 0; first < 32; first += per_phase) {
    const SharedCost phase = phase_cost(request, first, per_phase);
    total.wavefronts += phase.wavefronts;
    total.ideal += phase.ideal;
  }
  return total;
}

SectorCost global_request_cost(const WarpRequest& request) {
  SectorCost cost;
  std::vector<std::uint64_t>& sectors = cost.sectors;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const LaneAccess& access : request) {
    if (access.bytes == 0) continue;
    ranges.emplace_back(access.address, access.address + access.bytes);
    for (std::uint64_t s = access.address / kSectorBytes;
         s <= (access.address + access.bytes - 1) / kSectorBytes; ++s) {
      sectors.push_back(s);
    }
  }
  std::sort(sectors.begin(), sectors.end());
  sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t covered = 0;  // the end of the bytes counted so far
  for (const auto& [begin, end] : ranges) {
    const std::uint64_t from = std::max(begin, covered);
    if (end > from) cost.bytes += end - from;
    covered = std::max(covered, end);
  }
  cost.sector_bytes = sectors.size() * kSectorBytes;
  return cost;
}

std::uint64_t modelled_dram_read_bytes(const std::vector<std::vector<ByteRun>>& cta_reads,
                                       std::uint64_t l2_bytes, unsigned resident) {
  return modelled_dram_read_bytes(
      cta_reads.size(), [&](std::size_t cta, std::vector<ByteRun>& runs) { runs = cta_reads[cta]; },
      l2_bytes, resident);
}

std::uint64_t modelled_dram_read_bytes(std::size_t ctas, const CtaReads& reads_of,
                                       std::uint64_t l2_bytes, unsigned resident) {
  // A step: each resident CTA reads this much before the next one's turn. Small against a
  // tile, so CTAs streaming the same keys stay within a tile of each other.
  constexpr std::uint64_t kStepBytes = 1024;
  constexpr std::uint64_t kLineBytes = kSectorBytes * kLineSectors;
  LruL2 l2(l2_bytes / kLineBytes);
  std::uint64_t dram = 0;
  std::vector<Cursor> active;
  std::size_t next = 0;
  auto admit = [&] {
    while (active.size() < std::max(resident, 1u) && next < ctas) {
      Cursor& c = active.emplace_back();
      reads_of(next++, c.runs);
    }
  };
  admit();
  while (!active.empty()) {
    for (Cursor& c : active) {
      std::uint64_t budget = kStepBytes;
      while (budget > 0 && c.run < c.runs.size()) {
        const ByteRun& run = c.runs[c.run];
        if (c.at < run.begin) c.at = run.begin;
        const std::uint64_t end = std::min(run.end, c.at + budget);
        // Line by line, the sectors [c.at, end) touches in each.
        for (std::uint64_t from = c.at; from < end;) {
          const std::uint64_t line = from / kLineBytes;
          const std::uint64_t to = std::min(end, (line + 1) * kLineBytes);
          const unsigned first = static_cast<unsigned>(from % kLineBytes / kSectorBytes);
          const unsigned last = static_cast<unsigned>((to - 1) % kLineBytes / kSectorBytes);
          const unsigned below_last = (1u << (last + 1)) - 1, below_first = (1u << first) - 1;
          const auto mask = static_cast<std::uint8_t>(below_last & ~below_first);
          dram += kSectorBytes * l2.read(line, mask);
          from = to;
        }
        budget -= end - c.at;
        c.at = end;
        if (c.at >= run.end) ++c.run, c.at = 0;
      }
    }
    std::erase_if(active, [](const Cursor& c) { return c.run >= c.runs.size(); });
    admit();
  }
  return dram;
}

unsigned resident_ctas_per_sm(const ModelledGpu& gpu, unsigned threads,
                              std::uint64_t shared_bytes) {
  unsigned ctas = gpu.ctas_per_sm_limit;
  if (threads > 0) ctas = std::min(ctas, gpu.threads_per_sm / threads);
  const std::uint64_t per_cta = shared_bytes + kReservedSharedPerCta;
  ctas = std::min<unsigned>(ctas, static_cast<unsigned>(gpu.shared_bytes_per_sm / per_cta));
  return std::max(ctas, 1u);
}

}  // namespace flashjit::emulator

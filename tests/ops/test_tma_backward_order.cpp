// The Hopper backward's order (attention/hopper/tma_backward_order.cuh): in the deterministic
// mode every query block's dQ sums take the turns 0, 1, … exactly once each, a turn waits only
// for a CTA the GPU starts earlier, and with a causal mask the turns cost little against the
// atomic mode. The cost is a model, not a timing: CTAs handed out in grid order to whichever of
// 132 SMs frees first (one CTA an SM, as the backward runs), each (query block) step of a CTA
// one unit after its previous step and, in the deterministic mode, after the step whose turn
// comes before its own (the writer's wait, charged to the whole CTA: an upper bound), plus one
// unit a CTA for loading K and V and writing dK and dV.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

#include "attention/hopper/tma_backward_order.cuh"

namespace flashjit::testing {
namespace {

constexpr int kNone = AttentionForwardParams::kNoWindow;

/// The kernel's blocks: Br query rows a step, Bc keys a CTA.
struct Tiles {
  int block_m;
  int block_n;
};

struct Shape {
  int batch_heads;  // (batch, key/value head) pairs, one query head each
  int seqlen;       // seqlen_q = seqlen_k
  Tiles tiles;      // the default's at the head dim
};

using Window = KeyWindow<MaskKind::window>;
/// The turn of key block n's sum into the query block whose first row is row0.
using TurnRule = std::function<int(const Window&, int n, int row0, int seqlen_q, Tiles)>;

int turn_last_first(const Window& window, int n, int row0, int seqlen_q, Tiles tiles) {
  return tma_backward_dq_turn(window, n, std::min(row0 + tiles.block_m, seqlen_q) - 1,
                              tiles.block_n);
}

/// The order before FlashAttention-3's: from the first key block that sees the query block up.
int turn_first_first(const Window& window, int n, int row0, int, Tiles tiles) {
  return n - window.lo(row0) / tiles.block_n;
}

/// Key blocks of `window` over (seqlen_q, seqlen_k) and, for each, the query blocks it visits.
std::vector<BlockRange> visits(const Window& window, int seqlen_q, int seqlen_k, Tiles tiles) {
  std::vector<BlockRange> blocks;
  for (int key0 = 0; key0 < seqlen_k; key0 += tiles.block_n) {
    const int last_key = std::min(key0 + tiles.block_n, seqlen_k) - 1;
    blocks.push_back(window.query_blocks(key0, last_key, tiles.block_m, seqlen_q));
  }
  return blocks;
}

/// Units of the model's time for the whole launch (the header's model).
double launch_time(const Shape& s, const Window& window, bool deterministic, const TurnRule& turn,
                   bool last_first_dispatch) {
  constexpr int kSms = 132;
  const std::vector<BlockRange> blocks = visits(window, s.seqlen, s.seqlen, s.tiles);
  const int key_blocks = int(blocks.size());
  const int query_blocks = ceil_div(s.seqlen, s.tiles.block_m);
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int sm = 0; sm < kSms; ++sm) free_at.push(0.0);
  std::vector<double> done(std::size_t(query_blocks) * key_blocks);  // one head's, reused
  double end = 0.0;
  for (int head = 0; head < s.batch_heads; ++head) {
    for (int cta = 0; cta < key_blocks; ++cta) {
      const int n = tma_backward_key_block(cta, key_blocks, last_first_dispatch);
      double t = free_at.top() + 1.0;
      free_at.pop();
      for (int m = blocks[std::size_t(n)].begin; m < blocks[std::size_t(n)].end; ++m) {
        const int order = turn(window, n, m * s.tiles.block_m, s.seqlen, s.tiles);
        if (deterministic && order > 0) {  // after the key block whose turn comes before
          for (int k = 0; k < key_blocks; ++k) {
            const BlockRange& b = blocks[std::size_t(k)];
            if (m >= b.begin && m < b.end &&
                turn(window, k, m * s.tiles.block_m, s.seqlen, s.tiles) == order - 1) {
              t = std::max(t, done[std::size_t(m) * key_blocks + k]);
            }
          }
        }
        t += 1.0;
        done[std::size_t(m) * key_blocks + n] = t;
      }
      free_at.push(t);
      end = std::max(end, t);
    }
  }
  return end;
}

Window window_of(int seqlen_q, int seqlen_k, int left, int right) {
  return Window(seqlen_k, seqlen_k - seqlen_q, left, right);
}

/// Every key block taken by one CTA of a grid of `grid_blocks` (more than the sequence's in a
/// packed batch), and every query block's turns 0, 1, … taken once each, in the order the CTAs
/// start.
void check_turns(const Window& window, int seqlen_q, int seqlen_k, Tiles tiles, int grid_blocks) {
  const std::vector<BlockRange> blocks = visits(window, seqlen_q, seqlen_k, tiles);
  const int key_blocks = int(blocks.size());
  std::vector<int> cta_of(std::size_t(key_blocks), -1);
  for (int cta = 0; cta < grid_blocks; ++cta) {
    const int n = tma_backward_key_block(cta, grid_blocks, true);
    REQUIRE(n >= 0);
    REQUIRE(n < grid_blocks);
    if (n >= key_blocks) continue;  // past the sequence's keys: returns at once
    CHECK(cta_of[std::size_t(n)] == -1);
    cta_of[std::size_t(n)] = cta;
  }
  for (const int cta : cta_of) CHECK(cta >= 0);
  for (int m = 0; m * tiles.block_m < seqlen_q; ++m) {
    std::vector<int> turn_owner;  // turn -> the CTA whose sum takes it
    for (int n = 0; n < key_blocks; ++n) {
      if (m < blocks[std::size_t(n)].begin || m >= blocks[std::size_t(n)].end) continue;
      const int turn = turn_last_first(window, n, m * tiles.block_m, seqlen_q, tiles);
      REQUIRE(turn >= 0);
      if (std::size_t(turn) >= turn_owner.size()) turn_owner.resize(std::size_t(turn) + 1, -1);
      CHECK(turn_owner[std::size_t(turn)] == -1);  // no two sums on one turn
      turn_owner[std::size_t(turn)] = cta_of[std::size_t(n)];
    }
    for (std::size_t turn = 0; turn < turn_owner.size(); ++turn) {
      CHECK(turn_owner[turn] >= 0);  // no turn nobody takes: the next would wait forever
      if (turn > 0) CHECK(turn_owner[turn - 1] < turn_owner[turn]);  // started before
    }
  }
}

TEST_CASE("TMA backward order: each query block's dQ turns 0, 1, ... once, none before its CTA") {
  struct Mask {
    int left, right;
  };
  for (const Mask mask : {Mask{kNone, kNone}, Mask{kNone, 0}, Mask{40, 10}, Mask{300, 0},
                          Mask{kNone, 77}, Mask{0, 0}}) {
    for (const int seqlen_q : {1, 63, 64, 129, 300, 1000}) {
      for (const int seqlen_k : {1, 64, 65, 200, 1000}) {
        for (const Tiles tiles : {Tiles{64, 64}, Tiles{64, 128}, Tiles{128, 64}, Tiles{128, 128}}) {
          CAPTURE(mask.left);
          CAPTURE(mask.right);
          CAPTURE(seqlen_q);
          CAPTURE(seqlen_k);
          CAPTURE(tiles.block_m);
          CAPTURE(tiles.block_n);
          const Window window = window_of(seqlen_q, seqlen_k, mask.left, mask.right);
          const int key_blocks = ceil_div(seqlen_k, tiles.block_n);
          check_turns(window, seqlen_q, seqlen_k, tiles, key_blocks);
          check_turns(window, seqlen_q, seqlen_k, tiles, key_blocks + 3);  // packed
        }
      }
    }
  }
}

TEST_CASE("TMA backward order: deterministic causal within 0.85 of the atomic mode (a model)") {
  // bench/attention.py's shapes (16384 tokens a call, model width 2048) with each head dim's
  // default tiles: 64 (32 heads, Br 128, Bc 128), 128 (16 heads, Br 64, Bc 128), 256 (8 heads,
  // Br 64, Bc 64).
  for (const Shape s : {Shape{16 * 32, 1024, {128, 128}}, Shape{4 * 32, 4096, {128, 128}},
                        Shape{1 * 32, 16384, {128, 128}}, Shape{16 * 16, 1024, {64, 128}},
                        Shape{4 * 16, 4096, {64, 128}}, Shape{1 * 16, 16384, {64, 128}},
                        Shape{4 * 8, 4096, {64, 64}}, Shape{1 * 8, 16384, {64, 64}}}) {
    CAPTURE(s.batch_heads);
    CAPTURE(s.seqlen);
    CAPTURE(s.tiles.block_m);
    CAPTURE(s.tiles.block_n);
    const Window causal = window_of(s.seqlen, s.seqlen, kNone, 0);
    const double atomic = launch_time(s, causal, false, turn_last_first, false);
    const double turns = launch_time(s, causal, true, turn_last_first, true);
    const double before = launch_time(s, causal, true, turn_first_first, false);
    MESSAGE("atomic / deterministic: " << atomic / turns
                                       << " (first key block first: " << atomic / before << ")");
    CHECK(atomic / turns >= 0.85);
    CHECK(atomic / before < 0.85);  // what the model sees in the order it replaced
  }
}

}  // namespace
}  // namespace flashjit::testing

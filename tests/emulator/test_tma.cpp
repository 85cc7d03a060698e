// TMA on the emulator: loads against a scalar model of the box (every swizzle, ranks 2 and 3,
// 2- and 4-byte elements, boxes over every edge), stores, the tensor-map rules one by one, and
// planted bugs in TMA and proxy-fence code.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "emulator/launch.hpp"
#include "tile/memory.cuh"
#include "tile/tma.cuh"
#include "tile/wgmma.cuh"

namespace {

namespace em = flashjit::emulator;
using flashjit::mbarrier_t;

constexpr int kBar = 8, kBox = 1024, kOut = 4096;  // shared offsets: barrier, box, store source
constexpr std::size_t kShared = 8192;

mbarrier_t* barrier() {
  return reinterpret_cast<mbarrier_t*>(flashjit::dynamic_shared<unsigned char>() + kBar);
}
unsigned char* shared_at(int offset) { return flashjit::dynamic_shared<unsigned char>() + offset; }

struct Coords {
  int c[3];
};

// Thread 0 loads the box at `at`; every thread waits, then copies the box bytes out.
template <int Rank>
__global__ void load_box(flashjit::tma_descriptor map, Coords at, std::uint32_t bytes,
                         unsigned char* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) flashjit::mbarrier_init(barrier(), 1);
  __syncthreads();
  if (t == 0) {
    flashjit::mbarrier_arrive_expect_tx(barrier(), bytes);
    const int(&coords)[Rank] = *reinterpret_cast<const int(*)[Rank]>(at.c);
    flashjit::tma_load(shared_at(kBox), map, coords, barrier());
  }
  flashjit::mbarrier_wait_parity(barrier(), 0);
  for (int i = t; i < static_cast<int>(bytes); i += static_cast<int>(blockDim.x)) {
    flashjit::store_global_raw(out + i, flashjit::load_shared(shared_at(kBox), i));
  }
}

std::uint32_t swizzle_span(em::TmaSwizzle s) {
  return s == em::TmaSwizzle::b32    ? 32
         : s == em::TmaSwizzle::b64  ? 64
         : s == em::TmaSwizzle::b128 ? 128
                                     : 0;
}

// The scalar model: element (i0, i1, i2) of the box is global element (c0 + i0, c1 + s1 i1,
// c2 + s2 i2) or zero (s: the element strides; dimension 1 and 2 hold ceil(box / s) elements,
// and dimension 0's stride is ignored), at byte (i0 + b0 (i1 + b1 i2)) e of the dense image
// (b1 counting loaded elements), its 16-byte chunk index XORed with address bits 7.. under the
// swizzle.
std::vector<unsigned char> model(const em::TensorMap& map, const Coords& at) {
  const auto e = static_cast<std::uint32_t>(map.element_bytes);
  const std::uint32_t s1 = map.element_strides[1], s2 = map.rank == 3 ? map.element_strides[2] : 1;
  const std::uint32_t b0 = map.box[0], b1 = (map.box[1] + s1 - 1) / s1,
                      b2 = map.rank == 3 ? (map.box[2] + s2 - 1) / s2 : 1;
  std::vector<unsigned char> image(b0 * b1 * b2 * e, 0);
  const auto* global = static_cast<const unsigned char*>(map.global_address);
  const std::uint32_t span = swizzle_span(map.swizzle);
  for (std::uint32_t i2 = 0; i2 < b2; ++i2) {
    for (std::uint32_t i1 = 0; i1 < b1; ++i1) {
      for (std::uint32_t i0 = 0; i0 < b0; ++i0) {
        const long long g0 = at.c[0] + i0, g1 = at.c[1] + s1 * i1,
                        g2 = map.rank == 3 ? at.c[2] + s2 * i2 : 0;
        const bool inside = g0 >= 0 && g0 < static_cast<long long>(map.dims[0]) && g1 >= 0 &&
                            g1 < static_cast<long long>(map.dims[1]) && g2 >= 0 &&
                            (map.rank == 2 || g2 < static_cast<long long>(map.dims[2]));
        for (std::uint32_t j = 0; j < e; ++j) {
          std::uint32_t address = kBox + ((i2 * b1 + i1) * b0 + i0) * e + j;
          if (span != 0) {
            const std::uint32_t chunk = (address >> 4) & (span / 16 - 1);
            const std::uint32_t row = (address >> 7) & (span / 16 - 1);
            address = (address & ~((span / 16 - 1) << 4)) | ((chunk ^ row) << 4);
          }
          image[address - kBox] = inside ? global[static_cast<std::size_t>(g0) * e +
                                                  static_cast<std::size_t>(g1) * map.strides[1] +
                                                  static_cast<std::size_t>(g2) * map.strides[2] + j]
                                         : 0;
        }
      }
    }
  }
  return image;
}

// A (dims[2] x 20 x 72 or 36) tensor with rows padded to 160 bytes, filled with non-zero bytes.
struct Tensor {
  std::vector<unsigned char> bytes;
  em::TensorMap map;
  Tensor(int element_bytes, int rank, em::TmaSwizzle swizzle) {
    map.element_bytes = element_bytes;
    map.rank = rank;
    map.dims = {static_cast<std::uint64_t>(144 / element_bytes), 20, 3, 1, 1};
    map.strides = {0, 160, 160 * 20, 0, 0};
    const std::uint32_t span = swizzle_span(swizzle);
    map.box = {(span != 0 ? span : 32) / static_cast<std::uint32_t>(element_bytes), 8, 2, 1, 1};
    map.swizzle = swizzle;
    bytes.resize(160 * 20 * 3 + 16);
    for (std::size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<unsigned char>(i % 251 + 1);
    const auto raw = reinterpret_cast<std::uintptr_t>(bytes.data());
    map.global_address = bytes.data() + (16 - raw % 16) % 16;  // 16-byte aligned
  }
};

template <int Rank>
em::Report load(const em::TensorMap& map, const Tensor& tensor, Coords at,
                std::vector<unsigned char>& out) {
  const std::uint32_t bytes = em::tensor_map_box_bytes(map);
  out.assign(bytes, 0xAB);
  em::LaunchConfig config{
      .kernel_name = "tma_load",
      .grid = {1},
      .block = {64},
      .shared_bytes = kShared,
      .buffers = {em::buffer_of(tensor.bytes.data(), tensor.bytes.size(), "tensor"),
                  em::buffer_of(out.data(), out.size(), "out")}};
  return em::launch(load_box<Rank>, config, flashjit::tma_descriptor{&map}, at, bytes, out.data());
}

bool mentions(const em::Finding& finding, const std::string& text) {
  return finding.message.find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("TMA loads match the scalar model: every swizzle, ranks 2 and 3, every edge") {
  for (const int element_bytes : {2, 4}) {
    for (const em::TmaSwizzle swizzle :
         {em::TmaSwizzle::none, em::TmaSwizzle::b32, em::TmaSwizzle::b64, em::TmaSwizzle::b128}) {
      for (const int rank : {2, 3}) {
        const Tensor tensor(element_bytes, rank, swizzle);
        REQUIRE(em::tensor_map_problem(tensor.map).empty());
        const int dim0 = static_cast<int>(tensor.map.dims[0]);
        const int box0 = static_cast<int>(tensor.map.box[0]);
        for (const Coords at : {Coords{{0, 0, 0}}, Coords{{5, 7, 1}}, Coords{{-3, -2, -1}},
                                Coords{{dim0 - box0 / 2, 15, 2}}, Coords{{dim0 + 4, 30, 0}},
                                Coords{{-box0 - 1, 0, 0}}}) {
          CAPTURE(element_bytes);
          CAPTURE(static_cast<int>(swizzle));
          CAPTURE(rank);
          CAPTURE(at.c[0]);
          CAPTURE(at.c[1]);
          CAPTURE(at.c[2]);
          std::vector<unsigned char> out;
          const em::Report report = rank == 2 ? load<2>(tensor.map, tensor, at, out)
                                              : load<3>(tensor.map, tensor, at, out);
          CHECK_MESSAGE(report.clean(), report);
          CHECK(out == model(tensor.map, at));
        }
      }
    }
  }
}

TEST_CASE("TMA loads honour elementStrides: every s-th row loaded, dimension 0's ignored") {
  struct Strides {
    std::uint32_t s0, s1, s2;
  };
  for (const int rank : {2, 3}) {
    for (const Strides s :
         {Strides{4, 1, 1}, Strides{1, 2, 1}, Strides{1, 3, 2}, Strides{8, 8, 8}}) {
      Tensor tensor(2, rank, em::TmaSwizzle::b64);
      tensor.map.element_strides = {s.s0, s.s1, s.s2, 1, 1};
      CAPTURE(rank);
      CAPTURE(s.s0);
      CAPTURE(s.s1);
      CAPTURE(s.s2);
      const std::string problem = em::tensor_map_problem(tensor.map);
      REQUIRE_MESSAGE(problem.empty(), problem);
      // Dimension 1 holds ceil(8 / s1) rows, dimension 2 ceil(2 / s2) planes, all of 64 bytes.
      const std::uint32_t rows = (8 + s.s1 - 1) / s.s1,
                          planes = rank == 3 ? (2 + s.s2 - 1) / s.s2 : 1;
      CHECK(em::tensor_map_box_bytes(tensor.map) == 64 * rows * planes);
      for (const Coords at : {Coords{{0, 0, 0}}, Coords{{3, 13, 1}}, Coords{{-5, -4, -1}}}) {
        CAPTURE(at.c[1]);
        std::vector<unsigned char> out;
        const em::Report report =
            rank == 2 ? load<2>(tensor.map, tensor, at, out) : load<3>(tensor.map, tensor, at, out);
        CHECK_MESSAGE(report.clean(), report);
        CHECK(out == model(tensor.map, at));
      }
    }
  }
}

TEST_CASE("a TMA load counts its box as shared bytes written and its in-bounds rows as read") {
  const Tensor tensor(2, 2, em::TmaSwizzle::b128);
  std::vector<unsigned char> out;
  const em::Report report = load<2>(tensor.map, tensor, Coords{{0, 16, 0}}, out);  // 4 of 8 rows
  CHECK_MESSAGE(report.clean(), report);
  CHECK(report.work.global_bytes_read == 4 * 128);
  CHECK(report.work.shared_bytes_written >= 8 * 128);
}

TEST_CASE("tensor maps break the driver's rules one field at a time") {
  const Tensor tensor(2, 2, em::TmaSwizzle::b128);
  struct Rule {
    const char* field;
    void (*mutate)(em::TensorMap&);
  };
  const Rule rules[] = {
      {"tensorDataType", [](em::TensorMap& m) { m.element_bytes = 3; }},
      {"tensorRank", [](em::TensorMap& m) { m.rank = 6; }},
      {"globalAddress",
       [](em::TensorMap& m) { m.global_address = static_cast<const char*>(m.global_address) + 8; }},
      {"globalDim[1]", [](em::TensorMap& m) { m.dims[1] = 0; }},
      {"globalStrides[0]", [](em::TensorMap& m) { m.strides[1] = 152; }},
      {"globalStrides[0]", [](em::TensorMap& m) { m.strides[1] = std::uint64_t{1} << 40; }},
      {"boxDim[1]", [](em::TensorMap& m) { m.box[1] = 257; }},
      {"boxDim[0]", [](em::TensorMap& m) { m.box[0] = 12; }},  // 24 bytes
      {"elementStrides[1]", [](em::TensorMap& m) { m.element_strides[1] = 9; }},
      {"elementStrides[0]", [](em::TensorMap& m) { m.element_strides[0] = 0; }},
      {"swizzle", [](em::TensorMap& m) { m.box[0] = 128; }},  // 256 bytes over 128B
  };
  for (const Rule& rule : rules) {
    em::TensorMap map = tensor.map;
    rule.mutate(map);
    const std::string problem = em::tensor_map_problem(map);
    CAPTURE(problem);
    CHECK(problem.rfind(rule.field, 0) == 0);
  }
}

namespace {

// Thread 0 loads a box, waits, then stores it at `to` through another map.
__global__ void load_then_store(flashjit::tma_descriptor from, flashjit::tma_descriptor to,
                                Coords at) {
  if (threadIdx.x != 0) return;
  flashjit::mbarrier_init(barrier(), 1);
  const int zero[2] = {0, 0};
  flashjit::mbarrier_arrive_expect_tx(barrier(), em::tensor_map_box_bytes(*from.map));
  flashjit::tma_load(shared_at(kBox), from, zero, barrier());
  flashjit::mbarrier_wait_parity(barrier(), 0);
  const int coords[2] = {at.c[0], at.c[1]};
  flashjit::tma_store(to, coords, shared_at(kBox));
  flashjit::bulk_commit_group();
  flashjit::bulk_wait_group<0>();
}

// Loads box (0, 0) of `source` and stores it at `at` through `target`'s map (both fp32, rows
// of 160 bytes), `target` zeroed first.
em::Report store_box(const Tensor& source, Tensor& target, Coords at) {
  std::fill(target.bytes.begin(), target.bytes.end(), 0);
  const em::LaunchConfig config{
      .kernel_name = "tma_store",
      .grid = {1},
      .block = {32},
      .shared_bytes = kShared,
      .buffers = {em::buffer_of(source.bytes.data(), source.bytes.size(), "source"),
                  em::buffer_of(target.bytes.data(), target.bytes.size(), "target")}};
  return em::launch(load_then_store, config, flashjit::tma_descriptor{&source.map},
                    flashjit::tma_descriptor{&target.map}, at);
}

}  // namespace

TEST_CASE("a TMA store writes the box's in-bounds elements only, unswizzling it") {
  for (const em::TmaSwizzle swizzle : {em::TmaSwizzle::none, em::TmaSwizzle::b64}) {
    for (const std::uint32_t stride : {1u, 3u}) {  // elementStrides[1] of the target's map
      CAPTURE(static_cast<int>(swizzle));
      CAPTURE(stride);
      const Tensor source(4, 2, swizzle);
      Tensor target(4, 2, swizzle);
      target.map.element_strides[1] = stride;
      target.map.box[1] = 8 * stride;  // still 8 rows of the box in shared memory
      REQUIRE(em::tensor_map_problem(target.map).empty());
      const Coords at{{30, 6, 0}};  // columns 30..45 of 36, rows 6, 6 + stride, ... of 20
      const em::Report report = store_box(source, target, at);
      CHECK_MESSAGE(report.clean(), report);
      const auto* src = static_cast<const unsigned char*>(source.map.global_address);
      const auto* dst = static_cast<const unsigned char*>(target.map.global_address);
      for (int row = 0; row < 20; ++row) {
        for (int col = 0; col < 36; ++col) {
          const int r = (row - at.c[1]) / static_cast<int>(stride), c = col - at.c[0];
          const bool in_box = row >= at.c[1] && (row - at.c[1]) % static_cast<int>(stride) == 0 &&
                              r < 8 && c >= 0 && c < static_cast<int>(source.map.box[0]);
          for (int j = 0; j < 4; ++j) {
            const unsigned char want = in_box ? src[r * 160 + c * 4 + j] : 0;
            CHECK(dst[row * 160 + col * 4 + j] == want);
          }
        }
      }
    }
  }
}

TEST_CASE("a TMA store whose box starts at a negative coordinate is reported, not run") {
  // Loads may start left of or above the tensor (zero fill); a store may not: the CUDA guide
  // says the box's top left corner cannot have a negative index, PTX leaves it undefined.
  const Tensor source(4, 2, em::TmaSwizzle::none);
  Tensor target(4, 2, em::TmaSwizzle::none);
  const em::Report report = store_box(source, target, Coords{{30, -3, 0}});
  INFO(report);
  REQUIRE(report.count(em::FindingKind::tma_invalid) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::tma_invalid);
  CHECK(finding.thread.x == 0);
  CHECK(mentions(finding, "cp.async.bulk.tensor store"));
  CHECK(mentions(finding, "coordinate 1 is -3"));
  CHECK(report.findings.size() == 1);
  CHECK(std::all_of(target.bytes.begin(), target.bytes.end(),
                    [](unsigned char b) { return b == 0; }));
}

namespace {

// The planted TMA kernels: a 2-D fp32 tensor map of (8, 32) boxes.
template <bool Wait>
__global__ void read_before_wait(flashjit::tma_descriptor map, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) flashjit::mbarrier_init(barrier(), 1);
  __syncthreads();
  if (t == 0) {
    flashjit::mbarrier_arrive_expect_tx(barrier(), em::tensor_map_box_bytes(*map.map));
    const int coords[2] = {0, 0};
    flashjit::tma_load(shared_at(kBox), map, coords, barrier());
  }
  if (Wait) flashjit::mbarrier_wait_parity(barrier(), 0);  // the bug is leaving it out
  if (t == 33) {
    flashjit::store_global(out, 0,
                           flashjit::load_shared(reinterpret_cast<float*>(shared_at(kBox)), 5));
  }
}

// Thread 0 loads the box on barrier `slot`, which expects a second arrival that only comes
// in Fixed (so in the bug its phase stays open), and a second box on `other`, whose wait
// lets both copies land; then everyone meets at a __syncthreads and thread 33 reads the first
// box: landed, nothing in flight, but its phase not seen complete (in Fixed, thread 33 waits
// for it first).
template <bool Fixed>
__global__ void read_landed_unseen(flashjit::tma_descriptor map, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  auto* slot = barrier();
  auto* other = reinterpret_cast<mbarrier_t*>(shared_at(kBar + 8));
  if (t == 0) {
    flashjit::mbarrier_init(slot, 2);
    flashjit::mbarrier_init(other, 1);
  }
  __syncthreads();
  const std::uint32_t bytes = em::tensor_map_box_bytes(*map.map);
  if (t == 0) {
    const int rows0[2] = {0, 0}, rows8[2] = {0, 8};
    flashjit::mbarrier_arrive_expect_tx(slot, bytes);
    flashjit::tma_load(shared_at(kBox), map, rows0, slot);
    flashjit::mbarrier_arrive_expect_tx(other, bytes);
    flashjit::tma_load(shared_at(kBox + 2048), map, rows8, other);
    flashjit::mbarrier_wait_parity(other, 0);
  }
  if (Fixed && t == 32) flashjit::mbarrier_arrive(slot);
  __syncthreads();
  if (Fixed && t == 33) flashjit::mbarrier_wait_parity(slot, 0);
  if (t == 33) {
    flashjit::store_global(out, 0,
                           flashjit::load_shared(reinterpret_cast<float*>(shared_at(kBox)), 5));
  }
}

template <std::uint32_t Expected>
__global__ void expect_wrong_bytes(flashjit::tma_descriptor map, float*) {
  const int t = static_cast<int>(threadIdx.x);
  if (t == 0) {
    flashjit::mbarrier_init(barrier(), 1);
    flashjit::mbarrier_arrive_expect_tx(barrier(), Expected);  // bug: the box is 1024 bytes
    const int coords[2] = {0, 0};
    flashjit::tma_load(shared_at(kBox), map, coords, barrier());
  }
  if (t >= 32) flashjit::mbarrier_wait_parity(barrier(), 0);
}

// The CUDA guide's order: the copy first, its bytes announced after. Thread 0 makes the copy
// on barrier `late` land before its expect_tx: it waits on barrier `first`, whose own copy
// lands in the same step, so both land while every thread waits. Warp 1 waits on `late`.
__global__ void copy_before_expect_tx(flashjit::tma_descriptor map, float* out) {
  const int t = static_cast<int>(threadIdx.x);
  auto* late = barrier();
  auto* first = reinterpret_cast<mbarrier_t*>(shared_at(kBar + 8));
  if (t == 0) {
    flashjit::mbarrier_init(late, 1);
    flashjit::mbarrier_init(first, 1);
  }
  __syncthreads();
  const std::uint32_t bytes = em::tensor_map_box_bytes(*map.map);
  if (t == 0) {
    const int rows0[2] = {0, 0}, rows8[2] = {0, 8};
    flashjit::mbarrier_arrive_expect_tx(first, bytes);
    flashjit::tma_load(shared_at(kBox + 2048), map, rows8, first);
    flashjit::tma_load(shared_at(kBox), map, rows0, late);  // announced below
    flashjit::mbarrier_wait_parity(first, 0);
    flashjit::mbarrier_arrive_expect_tx(late, bytes);  // the tx-count was -bytes until here
  }
  if (t >= 32) {
    flashjit::mbarrier_wait_parity(late, 0);
    const auto* box = reinterpret_cast<const float*>(shared_at(kBox));
    if (t == 33) flashjit::store_global(out, 0, flashjit::load_shared(box, 5));
  }
}

template <int Phase>
__global__ void store_shared_then(flashjit::tma_descriptor map, float*) {
  const int t = static_cast<int>(threadIdx.x);
  auto* src = reinterpret_cast<float*>(shared_at(kOut));
  for (int i = t; i < 256; i += static_cast<int>(blockDim.x)) flashjit::store_shared(src, i, 1.0f);
  if (Phase != 0) flashjit::fence_proxy_async();  // Phase 0: the bug is leaving it out
  __syncthreads();
  if (t == 0) {
    const int coords[2] = {0, 0};
    flashjit::tma_store(map, coords, src);
    flashjit::bulk_commit_group();
    if (Phase == 1) flashjit::store_shared(src, 3, 2.0f);  // bug: before the wait
    flashjit::bulk_wait_group<0>();
    if (Phase == 2) flashjit::store_shared(src, 3, 2.0f);
  }
}

std::vector<float> g_tensor(32 * 16);

em::Report run_planted(void (*kernel)(flashjit::tma_descriptor, float*), std::vector<float>& out,
                       int threads = 64) {
  static em::TensorMap map;
  map.element_bytes = 4;
  map.rank = 2;
  map.global_address = g_tensor.data();
  map.dims = {32, 16, 1, 1, 1};
  map.strides = {0, 128, 0, 0, 0};
  map.box = {32, 8, 1, 1, 1};
  map.swizzle = em::TmaSwizzle::b128;
  for (std::size_t i = 0; i < g_tensor.size(); ++i) g_tensor[i] = static_cast<float>(i);
  out.assign(16, -1.0f);
  em::LaunchConfig config{.kernel_name = "planted_tma",
                          .grid = {1},
                          .block = {static_cast<unsigned>(threads)},
                          .shared_bytes = kShared,
                          .buffers = {em::buffer_of(g_tensor.data(), g_tensor.size(), "tensor"),
                                      em::buffer_of(out.data(), out.size(), "out")}};
  return em::launch(kernel, config, flashjit::tma_descriptor{&map}, out.data());
}

}  // namespace

TEST_CASE("reading TMA-loaded bytes before their mbarrier phase completes is reported") {
  std::vector<float> out;
  const em::Report report = run_planted(read_before_wait<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::tma_load_pending) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::tma_load_pending);
  CHECK(finding.thread.x == 33);
  CHECK(finding.other_thread == 0);
  CHECK_FALSE(finding.write);
  CHECK(finding.offset == kBox + 5 * 4);  // row 0 of the swizzle atom: chunks stay put
  CHECK(mentions(finding, "cp.async.bulk.tensor load"));
  CHECK(mentions(finding, "thread (33,0,0)"));
  CHECK(mentions(finding, "mbarrier (shared offset 8)"));
  CHECK(report.findings.size() == 1);

  const em::Report fixed = run_planted(read_before_wait<true>, out);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[0] == 5.0f);
}

TEST_CASE("reading landed TMA bytes whose mbarrier phase no wait has seen complete is reported") {
  std::vector<float> out;
  const em::Report report = run_planted(read_landed_unseen<false>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::tma_load_unobserved) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::tma_load_unobserved);
  CHECK(finding.thread.x == 33);
  CHECK_FALSE(finding.write);
  CHECK(mentions(finding, "landed on phase 0 of the mbarrier at shared offset 8"));
  CHECK(report.count(em::FindingKind::tma_load_pending) == 0);  // nothing was in flight

  const em::Report fixed = run_planted(read_landed_unseen<true>, out);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[0] == 5.0f);
}

TEST_CASE("a TMA load may complete before its expect_tx: the tx-count goes negative") {
  std::vector<float> out;
  const em::Report report = run_planted(copy_before_expect_tx, out);
  CHECK_MESSAGE(report.clean(), report);
  CHECK(out[0] == 5.0f);
}

TEST_CASE("more TMA bytes than expect_tx announced is an expect_tx mismatch") {
  std::vector<float> out;
  SUBCASE("consumers wait: the deadlock is reported as the mismatch") {
    const em::Report report = run_planted(expect_wrong_bytes<512>, out);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::mbarrier_tx_mismatch) == 1);
    const em::Finding& finding = *report.first(em::FindingKind::mbarrier_tx_mismatch);
    CHECK(finding.thread.x == 32);
    CHECK(mentions(finding, "mbarrier.try_wait.parity 0"));
    CHECK(mentions(finding, "shared offset 8"));
    CHECK(mentions(finding, "delivered 512 bytes more than expect_tx announced"));
    CHECK(report.count(em::FindingKind::deadlock) == 0);
    CHECK(report.findings.size() == 1);
  }
  SUBCASE("nobody waits: reported at block end") {
    const em::Report report = run_planted(expect_wrong_bytes<512>, out, 32);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::mbarrier_tx_mismatch) == 1);
    const em::Finding& finding = *report.first(em::FindingKind::mbarrier_tx_mismatch);
    CHECK(finding.thread.x == 0);
    CHECK(finding.offset == kBar);
    CHECK(mentions(finding, "512 transaction bytes more than expect_tx announced at block end"));
  }
}

TEST_CASE("expect_tx announcing bytes no copy delivers is a mismatch, not just a hang") {
  std::vector<float> out;
  SUBCASE("consumers wait: the deadlock is reported as the mismatch") {
    const em::Report report = run_planted(expect_wrong_bytes<2048>, out);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::mbarrier_tx_mismatch) == 1);
    const em::Finding& finding = *report.first(em::FindingKind::mbarrier_tx_mismatch);
    CHECK(finding.thread.x == 32);
    CHECK(mentions(finding, "mbarrier.try_wait.parity 0"));
    CHECK(mentions(finding, "shared offset 8"));
    CHECK(mentions(finding, "1024 transaction bytes expected"));
    CHECK(report.count(em::FindingKind::deadlock) == 0);
  }
  SUBCASE("nobody waits: reported at block end") {
    const em::Report report = run_planted(expect_wrong_bytes<2048>, out, 32);
    INFO(report);
    REQUIRE(report.count(em::FindingKind::mbarrier_tx_mismatch) == 1);
    const em::Finding& finding = *report.first(em::FindingKind::mbarrier_tx_mismatch);
    CHECK(finding.thread.x == 0);
    CHECK(mentions(finding, "mbarrier.expect_tx"));
    CHECK(mentions(finding, "shared offset 8"));
    CHECK(mentions(finding, "still expects 1024 transaction bytes at block end"));
  }
}

TEST_CASE("a TMA store reading generic writes with no fence.proxy.async is reported") {
  std::vector<float> out;
  const em::Report report = run_planted(store_shared_then<0>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::proxy_fence_missing) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::proxy_fence_missing);
  CHECK(finding.thread.x == 0);
  CHECK(finding.offset == kOut);
  CHECK(mentions(finding, "cp.async.bulk.tensor store"));
  CHECK(mentions(finding, "thread (0,0,0)"));
  CHECK(mentions(finding, "shared offset 4096"));
  CHECK(report.findings.size() == 1);

  const em::Report fixed = run_planted(store_shared_then<2>, out);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(g_tensor[77] == 1.0f);
}

TEST_CASE("writing a TMA store's source before its bulk group is waited for is reported") {
  std::vector<float> out;
  const em::Report report = run_planted(store_shared_then<1>, out);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::tma_store_in_flight) == 1);
  const em::Finding& finding = *report.first(em::FindingKind::tma_store_in_flight);
  CHECK(finding.thread.x == 0);
  CHECK(finding.write);
  CHECK(mentions(finding, "cp.async.bulk.tensor store"));
  CHECK(mentions(finding, "thread (0,0,0)"));
  CHECK(mentions(finding, "shared offset"));
  CHECK(report.findings.size() == 1);
}

namespace {

// Generic writes of A and B (f16 ones) read by a wgmma with or without the proxy fence.
template <bool Fenced>
__global__ void wgmma_after_generic_writes(flashjit::tma_descriptor, float* out) {
  auto* shared = flashjit::dynamic_shared<std::uint16_t>();
  for (int i = static_cast<int>(threadIdx.x); i < 2048; i += 128) {
    flashjit::store_shared(shared, i, std::uint16_t{0x3C00});
  }
  if (Fenced) flashjit::fence_proxy_async();  // the bug is leaving it out
  __syncthreads();
  float acc[4] = {};
  const std::uint64_t a =
      flashjit::wgmma_descriptor_bits(0, 128, 256, flashjit::WgmmaLayout::interleave);
  const std::uint64_t b =
      flashjit::wgmma_descriptor_bits(2048, 128, 256, flashjit::WgmmaLayout::interleave);
  em::wgmma_fence();
  em::wgmma_ss(em::MmaInput::f16, 8, acc, a, b, false, 1, 1, false, false);
  em::wgmma_commit_group();
  em::wgmma_wait_group(0);
  if (threadIdx.x == 0) flashjit::store_global(out, 0, acc[0]);
}

}  // namespace

TEST_CASE("a wgmma reading generic writes with no fence.proxy.async is reported") {
  std::vector<float> out;
  const em::Report report = run_planted(wgmma_after_generic_writes<false>, out, 128);
  INFO(report);
  REQUIRE(report.count(em::FindingKind::proxy_fence_missing) == 2);  // one per operand
  const em::Finding& finding = *report.first(em::FindingKind::proxy_fence_missing);
  CHECK(finding.thread.x == 0);
  CHECK(finding.offset == 0);
  CHECK(finding.other_thread == 0);
  CHECK(mentions(finding, "wgmma.mma_async"));
  CHECK(mentions(finding, "thread (0,0,0)"));
  CHECK(mentions(finding, "shared offset 0"));

  const em::Report fixed = run_planted(wgmma_after_generic_writes<true>, out, 128);
  CHECK_MESSAGE(fixed.clean(), fixed);
  CHECK(out[0] == 16.0f);
}

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}, and m64nNk32.f32.e4m3.e4m3 (K-major
// operands: each 16-bit element of the 16-bit form's layouts holds two consecutive k, the low
// byte first; the RS form's A likewise), on the emulator (its fence and
// commit/wait groups: wgmma_groups.cpp), from the PTX ISA chapter "Asynchronous Warpgroup Level
// Matrix Multiply-Accumulate Instructions":
//  - a warpgroup collective (.sync.aligned): the 128 threads of warps 4k..4k+3 execute the
//    same instruction; "the contents of a matrix descriptor must be same across all the warps
//    in the warpgroup" (the emulator requires the same operands in every thread, else reports
//    the first thread that differs and skips the instruction);
//  - D = A·B + D, or A·B when scale-d is false; imm-scale-a/b in {-1, 1} negate A or B;
//  - accumulators (PTX ISA's wgmma D fragment; CUTLASS's CLayout_64xN): thread t, warp
//    w = t/32, lane l, register i: row 16w + l/4 + 8·((i>>1)&1), column 8·(i>>2) + 2·(l%4)
//    + (i&1);
//  - the RS form's A: warp w holds rows 16w..16w+15 as mma.sync m16n8k16's A fragment;
//  - results may be accessed only after wgmma.wait_group completes the operation's group.
// Modelling choices: the operation is computed at issue (shared operands read and checked
// then: bounds, races, pending cp.async or TMA, generic writes with no fence.proxy.async since),
// and its results land in the accumulator registers only at the wait_group that completes it.
// Until then the registers hold a tagged NaN (accumulator_poison.cpp), so a thread writing
// them is reported at the wait and a value read from them is reported when stored. Meanwhile the
// shared bytes it read are marked in the shadow, and a generic-proxy write to one is reported
// (wgmma_operand_in_flight). wgmma.fence is checked where the emulator can see its need
// (check_wgmma_fence: the first wgmma, accumulators changed after their wait; for the RS form's
// A registers, wgmma_register_a.cpp, which also reports them written in flight). An operation
// reading accumulators that an in-flight one of the same shape writes takes that one's result: the
// PTX ISA orders accumulator accesses across wgmma of the same shape without a fence. The shared
// reads are recorded as reads by lane 0 of the warp owning the A rows (all of B: the warpgroup's
// first thread), since the race checker knows threads, not warpgroups; so a write by another warp
// after the wait still needs a __syncthreads.
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <source_location>
#include <string>
#include <vector>

#include "emulator/machine.hpp"
#include "tile/numeric.cuh"

namespace flashjit::emulator {
namespace {

using detail::kWarpgroupThreads;
using detail::Machine;
using detail::WgmmaOp;
using detail::WgmmaQueue;

constexpr int kM = 64, kK = 16;  // kK: 16-bit elements (e4m3: pairs of codes) along k a step

/// Values of k in one 16-bit element of `input`'s operands: two e4m3 codes, one f16 or bf16.
constexpr int values_per_element(MmaInput input) { return input == MmaInput::e4m3 ? 2 : 1; }

/// One thread's operands, on its suspended stack while the last thread computes.
struct WgmmaThread {
  float* d;
  const std::uint32_t* a;  // the RS form's 4 registers; nullptr for SS
  std::uint64_t a_descriptor, b_descriptor;
  int n, scale_a, scale_b;
  bool scale_d, trans_a, trans_b;
  std::source_location site;  // for the memory model's report
};

const WgmmaThread& at(void* const* threads, int t) {
  return *static_cast<const WgmmaThread*>(threads[t]);
}

int warpgroup_base(const Machine& m) { return m.current - m.current % kWarpgroupThreads; }

void report(Machine& m, int thread, int other, const char* name, const std::string& text) {
  Finding finding;
  finding.kind = FindingKind::invalid_operand;
  finding.other_thread = other;
  finding.message = std::string(name) + ": " + text + "; the instruction is skipped";
  detail::record(m, thread, std::move(finding));
}

std::string hex64(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%016" PRIx64, value);
  return text;
}

// Every thread's operands equal thread 0's; else the first difference is reported.
bool uniform(Machine& m, void* const* threads, const char* name) {
  const WgmmaThread& lead = at(threads, 0);
  const int base = warpgroup_base(m);
  for (int t = 1; t < kWarpgroupThreads; ++t) {
    const WgmmaThread& x = at(threads, t);
    const char* field = x.a_descriptor != lead.a_descriptor   ? "a-desc"
                        : x.b_descriptor != lead.b_descriptor ? "b-desc"
                        : x.n != lead.n || x.scale_d != lead.scale_d || x.scale_a != lead.scale_a ||
                                x.scale_b != lead.scale_b || x.trans_a != lead.trans_a ||
                                x.trans_b != lead.trans_b
                            ? "shape, scale or transpose operand"
                            : nullptr;
    if (field == nullptr) continue;
    const bool a_desc = field[0] == 'a';
    std::string text = std::string(field) + " of this thread";
    if (field[1] == '-') {
      text += " (" + hex64(a_desc ? x.a_descriptor : x.b_descriptor) + ") differs from thread " +
              detail::format(m.threads[static_cast<std::size_t>(base)].index) + "'s (" +
              hex64(a_desc ? lead.a_descriptor : lead.b_descriptor) +
              "): a matrix descriptor must be the same across the warpgroup";
    } else {
      text += " differs from thread " +
              detail::format(m.threads[static_cast<std::size_t>(base)].index) +
              "'s: .aligned needs the same instruction across the warpgroup";
    }
    report(m, base + t, base, name, text);
    return false;
  }
  return true;
}

bool valid_immediates(Machine& m, const WgmmaThread& lead, const char* name) {
  const bool n_ok = lead.n >= 8 && lead.n <= 256 && lead.n % 8 == 0;
  const bool scales_ok =
      (lead.scale_a == 1 || lead.scale_a == -1) && (lead.scale_b == 1 || lead.scale_b == -1);
  if (n_ok && scales_ok) return true;
  report(m, warpgroup_base(m), -1, name,
         "N = " + std::to_string(lead.n) + ", imm-scale-a " + std::to_string(lead.scale_a) +
             ", imm-scale-b " + std::to_string(lead.scale_b) +
             ": N must be a multiple of 8 in 8..256 and the scales -1 or 1");
  return false;
}

/// Value v (0, or 1 for e4m3's high byte) of a 16-bit element of `input`.
float element(MmaInput input, std::uint16_t bits, int v) {
  if (input == MmaInput::e4m3) return float_from_e4m3(bits >> (8 * v) & 0xFFu);
  return input == MmaInput::f16 ? to_float(half_t{bits}) : to_float(bfloat16_t{bits});
}

/// Reads a 16-bit operand of `rows` x 16 (row = m for A, n for B) through its descriptor into
/// `out` (rows, 16 · values_per_element), scaled by `scale`. Each 16-byte chunk (8 elements along
/// the contiguous axis) is one checked shared read by `reader(row)`; a rejected chunk reads as
/// zeros. Each core matrix (8 chunks: 8 rows of a K-major operand, 8 k of an MN-major one) is one
/// request to the memory model, at `site`.
template <class Reader>
bool read_shared_operand(Machine& m, const char* name, MmaInput input, std::uint64_t bits,
                         bool mn_major, int rows, float scale, Reader reader, float* out,
                         WgmmaOp& op, const detail::Site& site) {
  const WgmmaDescriptor d = decode_wgmma_descriptor(bits);
  if (const char* problem = wgmma_descriptor_problem(d, mn_major)) {
    report(m, warpgroup_base(m), -1, name, "descriptor " + hex64(bits) + ": " + problem);
    return false;
  }
  const int outer = mn_major ? rows / 8 : rows, inner = mn_major ? kK : 2;
  bool fenced = true;  // one proxy fence finding per operand
  // The core matrices being read (K-major: one per k half), their chunks' offsets.
  std::array<std::array<std::uint32_t, 8>, 2> cores{};
  for (int o = 0; o < outer; ++o) {
    for (int i = 0; i < inner; ++i) {
      const int row0 = mn_major ? 8 * o : o, k0 = mn_major ? i : 8 * i;
      const std::uint32_t chunk = wgmma_operand_offset(d, mn_major, row0, k0);
      const auto* address = reinterpret_cast<const std::byte*>(
          reinterpret_cast<std::uintptr_t>(m.shared_begin) + chunk);
      const bool readable = detail::check_shared_access(m, reader(row0), address, 16, false, name);
      if (readable) op.chunks.push_back(chunk);
      // K-major: rows o of a core matrix, 8 apart in o; MN-major: its k, consecutive in i.
      const int slot = mn_major ? i % 8 : o % 8;
      std::array<std::uint32_t, 8>& core = cores[mn_major ? 0 : static_cast<std::size_t>(i)];
      core[static_cast<std::size_t>(slot)] = chunk;
      if (slot == 7) detail::model_core_matrix(m, core, site);
      if (readable && fenced) fenced = detail::check_proxy_fence(m, reader(row0), chunk, 16, name);
      for (int j = 0; j < 8; ++j) {
        const int row = mn_major ? row0 + j : row0, k = mn_major ? k0 : k0 + j;
        std::uint16_t value = 0;
        if (readable) {
          std::memcpy(&value, m.shared_begin + wgmma_operand_offset(d, mn_major, row, k), 2);
        }
        const int per = values_per_element(input);
        for (int v = 0; v < per; ++v) {
          out[(row * kK + k) * per + v] = scale * element(input, value, v);
        }
      }
    }
  }
  return true;
}

/// The RS form's A (64 x 16 elements) from each warp's m16n8k16 A fragments: element e of lane
/// l is in register e / 2 (low half first) at row l/4 (+8 for e in {2,3,6,7}), column
/// 2(l%4) + (e&1) (+8 for e >= 4), within its warp's 16 rows.
void read_register_operand(void* const* threads, MmaInput input, float scale, float* out) {
  const int per = values_per_element(input);
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    const int warp = t / 32, lane = t % 32;
    const std::uint32_t* a = at(threads, t).a;
    for (int e = 0; e < 8; ++e) {
      const int row = 16 * warp + lane / 4 + ((e >> 1 & 1) != 0 ? 8 : 0);
      const int col = 2 * (lane % 4) + (e & 1) + (e >= 4 ? 8 : 0);
      const auto bits = static_cast<std::uint16_t>(a[e / 2] >> (16 * (e % 2)));
      for (int v = 0; v < per; ++v)
        out[(row * kK + col) * per + v] = scale * element(input, bits, v);
    }
  }
}

struct Spot {
  int row, col;
};
Spot accumulator_spot(int thread, int i) {
  const int warp = thread / 32, lane = thread % 32;
  return {16 * warp + lane / 4 + 8 * (i >> 1 & 1), 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)};
}

// The newest in-flight operation of the same shape into thread t's registers `d`, or nullptr.
const WgmmaOp* in_flight_writer(const WgmmaQueue& queue, const float* d, int t, int registers) {
  for (auto op = queue.ops.rbegin(); op != queue.ops.rend(); ++op) {
    if (op->d[static_cast<std::size_t>(t)] == d && op->registers == registers) return &*op;
  }
  return nullptr;
}

// Thread t's accumulator input: the newest in-flight result of the same shape into the same
// registers (ordered without a fence), else the registers themselves.
const float* accumulator_source(const WgmmaQueue& queue, float* d, int t, int registers) {
  const WgmmaOp* writer = in_flight_writer(queue, d, t, registers);
  return writer != nullptr ? writer->result.data() + static_cast<std::size_t>(t * registers) : d;
}

// Registers an in-flight operation of the same shape still owns must hold its poison when the
// next one takes them over (a thread writing them in between is reported, the first only).
void check_taken_over(Machine& m, const WgmmaQueue& queue, const WgmmaOp& op) {
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    const WgmmaOp* writer =
        in_flight_writer(queue, op.d[static_cast<std::size_t>(t)], t, op.registers);
    if (writer != nullptr && !detail::check_accumulators_untouched(m, *writer, t)) return;
  }
}

template <MmaInput Input, bool RegisterA>
void compute(void* const* threads);

constexpr WarpgroupExchange kSsF16{"wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16",
                                   &compute<MmaInput::f16, false>};
constexpr WarpgroupExchange kSsBf16{"wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16",
                                    &compute<MmaInput::bf16, false>};
constexpr WarpgroupExchange kRsF16{
    "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 (A in registers)",
    &compute<MmaInput::f16, true>};
constexpr WarpgroupExchange kRsBf16{
    "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (A in registers)",
    &compute<MmaInput::bf16, true>};
constexpr WarpgroupExchange kSsE4m3{"wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3",
                                    &compute<MmaInput::e4m3, false>};
constexpr WarpgroupExchange kRsE4m3{
    "wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3 (A in registers)",
    &compute<MmaInput::e4m3, true>};

/// The exchange of (input, form).
const WarpgroupExchange& exchange(MmaInput input, bool register_a) {
  switch (input) {
    case MmaInput::f16:
      return register_a ? kRsF16 : kSsF16;
    case MmaInput::bf16:
      return register_a ? kRsBf16 : kSsBf16;
    case MmaInput::e4m3:
      break;
  }
  return register_a ? kRsE4m3 : kSsE4m3;
}

template <MmaInput Input, bool RegisterA>
void compute(void* const* threads) {
  const char* name = exchange(Input, RegisterA).name;
  Machine& m = *detail::active();
  const WgmmaThread& lead = at(threads, 0);
  if (!uniform(m, threads, name) || !valid_immediates(m, lead, name)) return;
  if (Input == MmaInput::e4m3 && (lead.trans_a || lead.trans_b)) {
    report(m, warpgroup_base(m), -1, name, "fp8 operands are K-major only (no transpose)");
    return;
  }
  constexpr int kDepth = kK * values_per_element(Input);  // k of one instruction
  const int base = warpgroup_base(m), n = lead.n, registers = n / 2;
  WgmmaQueue& queue = m.wgmma_queues[static_cast<std::size_t>(base / kWarpgroupThreads)];
  WgmmaOp op;
  op.name = name;
  for (int t = 0; t < kWarpgroupThreads; ++t) op.d[static_cast<std::size_t>(t)] = at(threads, t).d;
  detail::check_wgmma_fence(m, queue, op.d, registers, name);
  if constexpr (RegisterA) {
    for (int t = 0; t < kWarpgroupThreads; ++t)
      op.a.at[static_cast<std::size_t>(t)] = at(threads, t).a;
    detail::check_register_a_fence(m, queue, op);
  }
  std::vector<float> a(kM * kDepth), b(static_cast<std::size_t>(n * kDepth));  // (64, k), (n, k)
  const auto scale_a = static_cast<float>(lead.scale_a);
  if constexpr (RegisterA) {
    read_register_operand(threads, Input, scale_a, a.data());
  } else if (!read_shared_operand(
                 m, name, Input, lead.a_descriptor, lead.trans_a, kM, scale_a,
                 [base](int row) { return base + 32 * (row / 16); }, a.data(), op,
                 detail::site_at(lead.site, "wgmma (A)", AccessKind::wgmma_operand))) {
    return;
  }
  if (!read_shared_operand(
          m, name, Input, lead.b_descriptor, lead.trans_b, n, static_cast<float>(lead.scale_b),
          [base](int) { return base; }, b.data(), op,
          detail::site_at(lead.site, "wgmma (B)", AccessKind::wgmma_operand))) {
    return;
  }
  detail::count_loads_ahead(
      m, wgmma_operand_offset(decode_wgmma_descriptor(lead.b_descriptor), lead.trans_b, 0, 0));
  if constexpr (!RegisterA) {
    detail::count_a_loads_ahead(
        m, wgmma_operand_offset(decode_wgmma_descriptor(lead.a_descriptor), lead.trans_a, 0, 0));
  }
  // D = A B (+ C), k in order: each product of 16-bit (or 8-bit) values is exact in fp32.
  std::vector<float> acc(static_cast<std::size_t>(kM * n), 0.0f);  // (64, n)
  for (int t = 0; t < kWarpgroupThreads && lead.scale_d; ++t) {
    const float* c = accumulator_source(queue, op.d[static_cast<std::size_t>(t)], t, registers);
    for (int i = 0; i < registers; ++i) {
      const Spot s = accumulator_spot(t, i);
      acc[static_cast<std::size_t>(s.row * n + s.col)] = c[i];
    }
  }
  for (int row = 0; row < kM; ++row) {
    for (int k = 0; k < kDepth; ++k) {
      const float x = a[static_cast<std::size_t>(row * kDepth + k)];
      for (int col = 0; col < n; ++col) {
        acc[static_cast<std::size_t>(row * n + col)] +=
            x * b[static_cast<std::size_t>(col * kDepth + k)];
      }
    }
  }
  op.group = queue.open_group;
  op.registers = registers;
  op.result.resize(static_cast<std::size_t>(kWarpgroupThreads * registers));
  for (int t = 0; t < kWarpgroupThreads; ++t) {
    for (int i = 0; i < registers; ++i) {
      const Spot s = accumulator_spot(t, i);
      op.result[static_cast<std::size_t>(t * registers + i)] =
          acc[static_cast<std::size_t>(s.row * n + s.col)];
    }
  }
  for (const std::uint32_t chunk : op.chunks) {
    for (std::uint32_t byte = chunk; byte < chunk + 16; ++byte) ++m.shadow[byte].wgmma_reads;
  }
  m.report.work.tensor_flops += 2ull * kM * static_cast<std::uint64_t>(n) * kDepth;
  check_taken_over(m, queue, op);
  op.poison = detail::accumulator_poison(++m.wgmma_issued);
  detail::poison_accumulators(op);  // until the wait_group that delivers the result
  queue.ops.push_back(std::move(op));
}

}  // namespace

void wgmma_ss(MmaInput input, int n, float* d, std::uint64_t a_descriptor,
              std::uint64_t b_descriptor, bool scale_d, int scale_a, int scale_b, bool trans_a,
              bool trans_b, std::source_location site) {
  WgmmaThread thread{d,       nullptr, a_descriptor, b_descriptor, n,   scale_a,
                     scale_b, scale_d, trans_a,      trans_b,      site};
  warpgroup_exchange(&thread, exchange(input, false));
}

void wgmma_rs(MmaInput input, int n, float* d, const std::uint32_t (&a)[4],
              std::uint64_t b_descriptor, bool scale_d, int scale_a, int scale_b, bool trans_b,
              std::source_location site) {
  WgmmaThread thread{d, a, 0, b_descriptor, n, scale_a, scale_b, scale_d, false, trans_b, site};
  warpgroup_exchange(&thread, exchange(input, true));
}

}  // namespace flashjit::emulator

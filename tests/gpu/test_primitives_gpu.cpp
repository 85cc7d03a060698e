// Emulator versus hardware, one tile-library primitive at a time (docs/emulator.md): the probe
// kernels of tests/templates/testing/primitives.cuh run on the GPU and on the emulator on the same
// random inputs (gpu/probe_runner.hpp). ldmatrix, cp.async, pack2 and the shuffles must agree bit
// for bit; mma.sync within a bound (the tensor cores sum in another order), the exp2/log2/tanh
// approximations within their documented error (the emulator computes the exact functions).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

#include "gpu/probe_runner.hpp"

namespace flashjit::testing {
namespace {

constexpr std::size_t kThreads = kProbeThreads;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

template <class T>
constexpr bool kIsHalf = std::is_same_v<T, half_t>;

// --- mma.sync ------------------------------------------------------------------------------------

template <class T>
Probe mma_probe_of() {
  return {kIsHalf<T> ? "mma_probe<flashjit::half_t>" : "mma_probe<flashjit::bfloat16_t>",
          kIsHalf<T> ? "testing.mma.fp16" : "testing.mma.bf16", &mma_probe<T>, kMmaInWords,
          kMmaOutWords};
}

/// Fragments of normal(0, 1) values times 2^[-spread, spread]: A and B rounded to T, C in fp32.
template <class T>
Words mma_inputs(unsigned seed, int spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-spread, spread);
  auto value = [&] { return std::ldexp(normal(rng), exponent(rng)); };
  auto element = [&] { return unsigned{from_float<T>(value()).bits}; };
  Words in;
  for (std::size_t t = 0; t < kThreads; ++t) {
    for (int r = 0; r < 6; ++r) {  // a.regs[4], b.regs[2]: two elements each, low one first
      const unsigned low = element();
      in.push_back(low | element() << 16);
    }
    for (int r = 0; r < 4; ++r) in.push_back(word_of(value()));
  }
  return in;
}

/// The inputs with every sign cleared: their mma is M = Σ|a·b| + |c| for each output element,
/// the scale of its rounding errors.
Words magnitudes(Words in) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    in[i] &= i % kMmaInWords < 6 ? 0x7fff7fffu : 0x7fffffffu;  // A, B pairs; C
  }
  return in;
}

/// |gpu - emulator| <= kMmaTolerance · M per element. Products of 16-bit inputs are exact in
/// fp32; the emulator adds them to c one at a time in k order, rounding each sum (at most
/// 16 · 2^-24 · M in all), while the tensor cores add aligned groups of products and truncate
/// (a few 2^-23 · M; Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021). 2^-16
/// leaves room for both; a wrong element, lane or register is off by about M. The test prints
/// the largest error it saw, to tighten the bound from.
constexpr double kMmaTolerance = 0x1p-16;

template <class T>
void check_mma(unsigned seed, int spread) {
  const Probe probe = mma_probe_of<T>();
  const Words in = mma_inputs<T>(seed, spread);
  const Words gpu_out = run_on_gpu(probe, in), emulator_out = run_on_emulator(probe, in);
  const Words scale = run_on_emulator(probe, magnitudes(in));
  double worst = 0;
  check_words(probe, gpu_out, emulator_out, [&](std::size_t i) {
    const double error = std::fabs(double{float_of(gpu_out[i])} - float_of(emulator_out[i]));
    const double m = float_of(scale[i]);
    worst = std::max(worst, m > 0 ? error / m : error);
    return error <= kMmaTolerance * m;  // false for NaN
  });
  MESSAGE(probe.readable_name << ", exponent spread " << spread << ": largest error " << worst
                              << " M (bound " << kMmaTolerance << " M)");
}

TEST_CASE("mma.sync m16n8k16 on the GPU matches the emulator within the summation-order bound") {
  check_mma<half_t>(1, 0);
  check_mma<half_t>(2, 6);  // fp16 range: some inputs subnormal, none overflowing
  check_mma<bfloat16_t>(3, 0);
  check_mma<bfloat16_t>(4, 30);
}

// --- ldmatrix, cp.async, shuffles: bit for bit ---------------------------------------------------

template <bool Transpose>
void check_ldmatrix(unsigned seed) {
  const Probe probe{Transpose ? "ldmatrix_probe<true>" : "ldmatrix_probe<false>",
                    Transpose ? "testing.ldmatrix_x4_trans" : "testing.ldmatrix_x4",
                    &ldmatrix_probe<Transpose>,
                    kLdmatrixInWords,
                    kLdmatrixOutWords,
                    kLdmatrixSharedBytes};
  std::mt19937 rng(seed);  // the pool's bits, and each lane's row (the word mod 64)
  check_bit_exact(probe, random_words(rng, kThreads * kLdmatrixInWords));
}

TEST_CASE("ldmatrix x4 and x4.trans on the GPU match the emulator bit for bit") {
  check_ldmatrix<false>(5);
  check_ldmatrix<true>(6);
}

template <int Chunks>
void check_cp_async(unsigned seed) {
  const std::string name = "cp_async_probe<" + std::to_string(Chunks) + ">";
  const Probe probe{name,
                    "testing.cp_async.chunks" + std::to_string(Chunks),
                    &cp_async_probe<Chunks>,
                    copy_in_words(Chunks),
                    copy_out_words(Chunks),
                    copy_shared_bytes(Chunks)};
  std::mt19937 rng(seed);  // the flags word's low bits pick the valid chunks at random
  check_bit_exact(probe, random_words(rng, kThreads * copy_in_words(Chunks)));
}

TEST_CASE("cp.async, valid and zero-filled, in two commit groups, matches the emulator") {
  check_cp_async<2>(7);
  check_cp_async<4>(8);
}

template <int Width>
void check_shuffles(unsigned seed) {
  const Probe probe{"shuffle_probe<" + std::to_string(Width) + ">",
                    "testing.shuffle.width" + std::to_string(Width), &shuffle_probe<Width>,
                    kShuffleInWords, kShuffleOutWords};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  Words in = random_words(rng, kThreads * kShuffleInWords);
  // The reductions' operand must be finite: a NaN's payload is not part of the contract.
  for (std::size_t t = 0; t < kThreads; ++t) in[t * kShuffleInWords + 1] = word_of(normal(rng));
  check_bit_exact(probe, in);
}

TEST_CASE("warp shuffles and warp_allreduce on the GPU match the emulator bit for bit") {
  check_shuffles<32>(9);
  check_shuffles<16>(10);
  check_shuffles<8>(11);
}

// --- pack2 ---------------------------------------------------------------------------------------

/// Zeros, infinities, NaN, the fp16 overflow edge (65520 rounds to infinity), fp16 subnormals and
/// ties among them, an fp32 subnormal, fp32's range.
constexpr float kPackSpecials[] = {0.0f,       -0.0f,    kInf,      -kInf,     kNaN,     65504.0f,
                                   65519.0f,   65520.0f, -65520.0f, 3.0e38f,   0x1p-24f, 0x1p-25f,
                                   0x1.8p-24f, 0x1p-14f, 1e-40f,    -0x1p-130f};

/// A pack2 input of kind `kind % 4`: a special, an exact tie of fp16 or of bf16, or a normal
/// value over a wide exponent range.
float pack_input(std::mt19937& rng, int kind) {
  std::uniform_int_distribution<int> exponent(-24, 15);
  std::uniform_int_distribution<std::size_t> special(0, std::size(kPackSpecials) - 1);
  std::normal_distribution<float> normal;
  switch (kind % 4) {
    case 0:
      return kPackSpecials[special(rng)];
    case 1: {
      unsigned word = (static_cast<unsigned>(rng()) & 0x807fffffu) |
                      static_cast<unsigned>(127 + exponent(rng)) << 23;
      // Halfway between two fp16 values (13 dropped bits), or two bf16 values (16 bits).
      word = rng() % 2 == 0 ? (word & ~0x1fffu) | 0x1000u : (word & ~0xffffu) | 0x8000u;
      return float_of(word);
    }
    default:
      return std::ldexp(normal(rng), std::uniform_int_distribution<int>(-30, 20)(rng));
  }
}

/// The 16-bit half `half` (0: low) of `word`.
unsigned half_of(unsigned word, int half) { return (word >> (16 * half)) & 0xffffu; }

/// The fp32 input that pack2 put into half `half` of output word `i`.
float packed_input(const Words& in, std::size_t i, int half) {
  const std::size_t thread = i / kPackOutWords, pair = i % kPackOutWords;
  return float_of(in[thread * kPackInWords + 2 * pair + static_cast<std::size_t>(half)]);
}

template <class T>
bool is_nan16(unsigned bits) {
  return kIsHalf<T> ? (bits & 0x7c00u) == 0x7c00u && (bits & 0x03ffu) != 0
                    : (bits & 0x7f80u) == 0x7f80u && (bits & 0x007fu) != 0;
}

/// Bit for bit, except that a NaN input need only give a NaN on both sides: the hardware
/// returns its canonical NaN, the emulator keeps the payload, and no kernel packs a NaN.
template <class T>
void check_pack2(unsigned seed) {
  const Probe probe{
      kIsHalf<T> ? "pack2_probe<flashjit::half_t>" : "pack2_probe<flashjit::bfloat16_t>",
      kIsHalf<T> ? "testing.pack2.fp16" : "testing.pack2.bf16", &pack2_probe<T>, kPackInWords,
      kPackOutWords};
  std::mt19937 rng(seed);
  Words in;
  for (int i = 0; i < static_cast<int>(kThreads) * kPackInWords; ++i) {
    in.push_back(word_of(pack_input(rng, i)));
  }
  const Words gpu_out = run_on_gpu(probe, in), emulator_out = run_on_emulator(probe, in);
  check_words(probe, gpu_out, emulator_out, [&](std::size_t i) {
    bool agree = true;
    for (int half = 0; half < 2; ++half) {
      const unsigned g = half_of(gpu_out[i], half), e = half_of(emulator_out[i], half);
      agree &= std::isnan(packed_input(in, i, half)) ? is_nan16<T>(g) && is_nan16<T>(e) : g == e;
    }
    return agree;
  });
}

TEST_CASE("pack2 (cvt.rn to fp16x2 and bf16x2) on the GPU matches the emulator bit for bit") {
  check_pack2<half_t>(12);
  check_pack2<bfloat16_t>(13);
}

// --- exp2, log2, tanh approximations ------------------------------------------------------------

/// |gpu - emulator| <= relative · |emulator| + absolute, where the emulator's twin is the exact
/// function (std::exp2, std::log2, std::tanh, within an ulp): the hardware's documented error
/// plus that ulp, rounded up.
struct ApproxBound {
  double relative;
  double absolute;
};
/// ex2.approx.ftz.f32: about 2 ulp (tile/numeric.cuh); results below 2^-126 flush to zero.
constexpr ApproxBound kExp2Bound{0x1p-21, 0x1p-126};
/// lg2.approx.ftz.f32: absolute error about 2^-22.6 (PTX ISA), plus the result's rounding.
constexpr ApproxBound kLog2Bound{0x1p-22, 0x1p-21};
/// tanh.approx.f32: relative error about 2^-11 (PTX ISA).
constexpr ApproxBound kTanhBound{0x1p-10, 0.0};

/// Arguments for each function: a special value now and then, else a spread of ordinary ones
/// (for exp2, half of them in softmax's range [-30, 0]).
float exp2_argument(std::mt19937& rng, int i) {
  constexpr float kSpecials[] = {0.0f, -0.0f, -kInf, kInf, 128.0f, -126.5f, -149.5f, -200.0f};
  if (i % kApproxValues == 0) return kSpecials[rng() % std::size(kSpecials)];
  if (i % 2 == 1) return std::uniform_real_distribution<float>(-30.0f, 0.0f)(rng);
  return std::uniform_real_distribution<float>(-140.0f, 126.0f)(rng);
}
float log2_argument(std::mt19937& rng, int i) {
  constexpr float kSpecials[] = {1.0f, 2.0f, 0.5f, 0.0f, -0.0f, kInf, -1.0f, 0x1p-126f, 3.0e38f};
  if (i % kApproxValues == 0) return kSpecials[rng() % std::size(kSpecials)];
  return std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                    std::uniform_int_distribution<int>(-126, 126)(rng));
}
float tanh_argument(std::mt19937& rng, int i) {
  constexpr float kSpecials[] = {0.0f, -0.0f, kInf, -kInf, 1e-20f, 20.0f, -20.0f, 0.5f};
  if (i % kApproxValues == 0) return kSpecials[rng() % std::size(kSpecials)];
  if (i % 2 == 1) return std::uniform_real_distribution<float>(-10.0f, 10.0f)(rng);
  const float tiny = std::ldexp(std::uniform_real_distribution<float>(1.0f, 2.0f)(rng),
                                std::uniform_int_distribution<int>(-20, 0)(rng));
  return rng() % 2 == 0 ? tiny : -tiny;
}

bool within(float gpu_value, float emulator_value, ApproxBound bound) {
  if (std::isnan(emulator_value)) return std::isnan(gpu_value);
  if (std::isinf(emulator_value)) return gpu_value == emulator_value;
  const double error = std::fabs(double{gpu_value} - emulator_value);
  return error <= bound.relative * std::fabs(emulator_value) + bound.absolute;  // false for NaN
}

/// Runs approx_probe<F> on `argument(rng, i)` for every value i and checks each result.
template <Approx F>
void check_approx(const char* name, float (*argument)(std::mt19937&, int), ApproxBound bound) {
  const Probe probe{std::string("approx_probe<flashjit::testing::Approx::") + name + ">",
                    std::string("testing.approx.") + name, &approx_probe<F>, kApproxValues,
                    kApproxValues};
  std::mt19937 rng(14);
  Words in(kThreads * kApproxValues);
  for (std::size_t i = 0; i < in.size(); ++i) {
    in[i] = word_of(argument(rng, static_cast<int>(i % kApproxValues)));
  }
  const Words gpu_out = run_on_gpu(probe, in), emulator_out = run_on_emulator(probe, in);
  check_words(probe, gpu_out, emulator_out, [&](std::size_t i) {
    return within(float_of(gpu_out[i]), float_of(emulator_out[i]), bound);
  });
}

TEST_CASE("exp2, log2 and tanh approximations on the GPU are within their documented error") {
  check_approx<Approx::exp2>("exp2", exp2_argument, kExp2Bound);
  check_approx<Approx::log2>("log2", log2_argument, kLog2Bound);
  check_approx<Approx::tanh>("tanh", tanh_argument, kTanhBound);
}

}  // namespace
}  // namespace flashjit::testing

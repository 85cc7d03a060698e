#pragma once
// The math functions a score or mask modifier may call (modifier_grammar.hpp parses the same
// list), defined here once for every backend, so that NVRTC, the emulator's host compiler and
// `flashjit run`'s float64 reference read the same text the same way: the host's <cmath> has no
// min(int, int) and its ::abs is for ints only, where CUDA has both for floats too.
//
// They live in namespace flashjit_user, the namespace the rendered modifiers are in, so an
// unqualified call finds these and not the platform's. Each takes plain numbers (int, float,
// double) only; on a Dual (the backward's score, attention/parts/dual_number.cuh) the Dual's own
// hidden friend of the same name is found by argument-dependent lookup instead.
//   plain name (exp, min, ...)   float, or double when an argument is double
//   f name (expf, fminf, ...)    float
//   abs, min, max                the arguments' type: ints stay ints
#include "attention/parts/dual_number.cuh"
#include "tile/platform.cuh"

namespace flashjit_user {

/// The floating type a plain number computes in; no member for other types (a Dual), which
/// takes each template below out of overload resolution.
template <class T>
struct modifier_real {};
template <class R>
struct computes_in {
  using type = R;
};
// clang-format off
template <> struct modifier_real<bool> : computes_in<float> {};
template <> struct modifier_real<int> : computes_in<float> {};
template <> struct modifier_real<float> : computes_in<float> {};
template <> struct modifier_real<double> : computes_in<double> {};
// clang-format on
template <class T>
using modifier_real_t = typename modifier_real<T>::type;

// name(x) in float (double for a double), fname(x) in float.
#define FLASHJIT_MODIFIER_FUNCTION(name, fname)                           \
  template <class T>                                                      \
  FJ_DEVICE modifier_real_t<T> name(T x) {                                \
    return flashjit::dual_math::name(static_cast<modifier_real_t<T>>(x)); \
  }                                                                       \
  template <class T, class = modifier_real_t<T>>                          \
  FJ_DEVICE float fname(T x) {                                            \
    return flashjit::dual_math::name(static_cast<float>(x));              \
  }
FLASHJIT_MODIFIER_FUNCTION(exp, expf)
FLASHJIT_MODIFIER_FUNCTION(exp2, exp2f)
FLASHJIT_MODIFIER_FUNCTION(log, logf)
FLASHJIT_MODIFIER_FUNCTION(log2, log2f)
FLASHJIT_MODIFIER_FUNCTION(log1p, log1pf)
FLASHJIT_MODIFIER_FUNCTION(sqrt, sqrtf)
FLASHJIT_MODIFIER_FUNCTION(tanh, tanhf)
FLASHJIT_MODIFIER_FUNCTION(sin, sinf)
FLASHJIT_MODIFIER_FUNCTION(cos, cosf)
#undef FLASHJIT_MODIFIER_FUNCTION

template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE auto pow(A a, B b) -> modifier_real_t<decltype(a + b)> {
  using R = modifier_real_t<decltype(a + b)>;
  return flashjit::dual_math::pow(static_cast<R>(a), static_cast<R>(b));
}
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE float powf(A a, B b) {
  return flashjit::dual_math::pow(static_cast<float>(a), static_cast<float>(b));
}

template <class T, class = modifier_real_t<T>>
FJ_DEVICE T abs(T x) {
  return x < T(0) ? -x : x;
}
template <class T>
FJ_DEVICE modifier_real_t<T> fabs(T x) {
  return abs(static_cast<modifier_real_t<T>>(x));
}
template <class T, class = modifier_real_t<T>>
FJ_DEVICE float fabsf(T x) {
  return abs(static_cast<float>(x));
}

// min and max keep ints ints (the usual arithmetic conversions of a + b); fmin and fmax are
// floating, and take the other argument where one is NaN, as C's do.
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE auto min(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  return static_cast<R>(b) < static_cast<R>(a) ? static_cast<R>(b) : static_cast<R>(a);
}
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE auto max(A a, B b) -> decltype(a + b) {
  using R = decltype(a + b);
  return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(b) : static_cast<R>(a);
}
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE auto fmin(A a, B b) -> modifier_real_t<decltype(a + b)> {
  using R = modifier_real_t<decltype(a + b)>;
  const R x = static_cast<R>(a), y = static_cast<R>(b);
  return x != x ? y : (y < x ? y : x);  // x != x: x is NaN
}
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE auto fmax(A a, B b) -> modifier_real_t<decltype(a + b)> {
  using R = modifier_real_t<decltype(a + b)>;
  const R x = static_cast<R>(a), y = static_cast<R>(b);
  return x != x ? y : (x < y ? y : x);
}
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE float fminf(A a, B b) {
  return fmin(static_cast<float>(a), static_cast<float>(b));
}
template <class A, class B, class = modifier_real_t<A>, class = modifier_real_t<B>>
FJ_DEVICE float fmaxf(A a, B b) {
  return fmax(static_cast<float>(a), static_cast<float>(b));
}

}  // namespace flashjit_user

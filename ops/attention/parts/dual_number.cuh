#pragma once
// Dual numbers: a value and its derivative with respect to one input, carried through
// arithmetic by the chain rule. The backward evaluates the caller's score_mod (written against
// an `auto`-typed score) on Dual<float> to get ∂score_mod/∂score without a user-written
// derivative; `flashjit run` evaluates it on Dual<double> for its float64 reference.
//
// Every operator and math function is a hidden friend, found by argument-dependent lookup
// when an argument is a Dual: in a modifier, `expf(score)` and `max(score, 0.0f)` pick these,
// while the same call on plain floats keeps the platform's. A plain number mixed in converts to
// a constant (derivative 0). Comparisons compare values.
#include "tile/platform.cuh"

#if !defined(FJ_DEVICE_CODE)
#include <cmath>
#endif

namespace flashjit {

namespace dual_math {  // the platform function for float or double
FJ_DEVICE float exp(float x) { return ::expf(x); }
FJ_DEVICE double exp(double x) { return ::exp(x); }
FJ_DEVICE float exp2(float x) { return ::exp2f(x); }
FJ_DEVICE double exp2(double x) { return ::exp2(x); }
FJ_DEVICE float log(float x) { return ::logf(x); }
FJ_DEVICE double log(double x) { return ::log(x); }
FJ_DEVICE float log2(float x) { return ::log2f(x); }
FJ_DEVICE double log2(double x) { return ::log2(x); }
FJ_DEVICE float log1p(float x) { return ::log1pf(x); }
FJ_DEVICE double log1p(double x) { return ::log1p(x); }
FJ_DEVICE float sqrt(float x) { return ::sqrtf(x); }
FJ_DEVICE double sqrt(double x) { return ::sqrt(x); }
FJ_DEVICE float tanh(float x) { return ::tanhf(x); }
FJ_DEVICE double tanh(double x) { return ::tanh(x); }
FJ_DEVICE float sin(float x) { return ::sinf(x); }
FJ_DEVICE double sin(double x) { return ::sin(x); }
FJ_DEVICE float cos(float x) { return ::cosf(x); }
FJ_DEVICE double cos(double x) { return ::cos(x); }
FJ_DEVICE float pow(float x, float y) { return ::powf(x, y); }
FJ_DEVICE double pow(double x, double y) { return ::pow(x, y); }
template <class T>
constexpr T ln2() {
  return static_cast<T>(0.693147180559945309417);
}
}  // namespace dual_math

/// value + slope·ε with ε² = 0: `slope` is the derivative of `value` with respect to the input
/// seeded with slope 1.
template <class T>
struct Dual {
  T value;
  T slope;

  FJ_DEVICE Dual(T v = T(0), T s = T(0)) : value(v), slope(s) {}  // a plain number: a constant

  friend FJ_DEVICE Dual operator+(Dual a) { return a; }
  friend FJ_DEVICE Dual operator-(Dual a) { return {-a.value, -a.slope}; }
  friend FJ_DEVICE Dual operator+(Dual a, Dual b) { return {a.value + b.value, a.slope + b.slope}; }
  friend FJ_DEVICE Dual operator+(Dual a, T b) { return {a.value + b, a.slope}; }
  friend FJ_DEVICE Dual operator+(T a, Dual b) { return {a + b.value, b.slope}; }
  friend FJ_DEVICE Dual operator-(Dual a, Dual b) { return {a.value - b.value, a.slope - b.slope}; }
  friend FJ_DEVICE Dual operator-(Dual a, T b) { return {a.value - b, a.slope}; }
  friend FJ_DEVICE Dual operator-(T a, Dual b) { return {a - b.value, -b.slope}; }
  friend FJ_DEVICE Dual operator*(Dual a, Dual b) {
    return {a.value * b.value, a.slope * b.value + a.value * b.slope};
  }
  friend FJ_DEVICE Dual operator*(Dual a, T b) { return {a.value * b, a.slope * b}; }
  friend FJ_DEVICE Dual operator*(T a, Dual b) { return {a * b.value, a * b.slope}; }
  friend FJ_DEVICE Dual operator/(Dual a, Dual b) {
    return {a.value / b.value, (a.slope * b.value - a.value * b.slope) / (b.value * b.value)};
  }
  friend FJ_DEVICE Dual operator/(Dual a, T b) { return {a.value / b, a.slope / b}; }
  friend FJ_DEVICE Dual operator/(T a, Dual b) {
    return {a / b.value, -a * b.slope / (b.value * b.value)};
  }

  friend FJ_DEVICE bool operator<(Dual a, Dual b) { return a.value < b.value; }
  friend FJ_DEVICE bool operator>(Dual a, Dual b) { return a.value > b.value; }
  friend FJ_DEVICE bool operator<=(Dual a, Dual b) { return a.value <= b.value; }
  friend FJ_DEVICE bool operator>=(Dual a, Dual b) { return a.value >= b.value; }
  friend FJ_DEVICE bool operator==(Dual a, Dual b) { return a.value == b.value; }
  friend FJ_DEVICE bool operator!=(Dual a, Dual b) { return a.value != b.value; }

  // f(a) with f' at a: the chain rule's one step.
  FJ_DEVICE Dual then(T f, T derivative) const { return {f, slope * derivative}; }

  friend FJ_DEVICE Dual expf(Dual a) {
    const T e = dual_math::exp(a.value);
    return a.then(e, e);
  }
  friend FJ_DEVICE Dual exp2f(Dual a) {
    const T e = dual_math::exp2(a.value);
    return a.then(e, e * dual_math::ln2<T>());
  }
  friend FJ_DEVICE Dual logf(Dual a) { return a.then(dual_math::log(a.value), T(1) / a.value); }
  friend FJ_DEVICE Dual log2f(Dual a) {
    return a.then(dual_math::log2(a.value), T(1) / (a.value * dual_math::ln2<T>()));
  }
  friend FJ_DEVICE Dual log1pf(Dual a) {
    return a.then(dual_math::log1p(a.value), T(1) / (T(1) + a.value));
  }
  friend FJ_DEVICE Dual sqrtf(Dual a) {
    const T r = dual_math::sqrt(a.value);
    return a.then(r, T(0.5) / r);
  }
  friend FJ_DEVICE Dual tanhf(Dual a) {
    const T t = dual_math::tanh(a.value);
    return a.then(t, T(1) - t * t);
  }
  friend FJ_DEVICE Dual sinf(Dual a) {
    return a.then(dual_math::sin(a.value), dual_math::cos(a.value));
  }
  friend FJ_DEVICE Dual cosf(Dual a) {
    return a.then(dual_math::cos(a.value), -dual_math::sin(a.value));
  }
  friend FJ_DEVICE Dual fabsf(Dual a) { return a.value < T(0) ? -a : a; }
  friend FJ_DEVICE Dual fminf(Dual a, Dual b) { return b.value < a.value ? b : a; }
  friend FJ_DEVICE Dual fmaxf(Dual a, Dual b) { return a.value < b.value ? b : a; }
  friend FJ_DEVICE Dual powf(Dual a, Dual b) {  // a^b = 2^(b·log2 a), for a > 0
    const T p = dual_math::pow(a.value, b.value);
    return {p, p * (b.slope * dual_math::log(a.value) + b.value * a.slope / a.value)};
  }
  friend FJ_DEVICE Dual powf(Dual a, T b) {  // any a, a constant exponent
    return a.then(dual_math::pow(a.value, b), b * dual_math::pow(a.value, b - T(1)));
  }

  // The double-named and overloaded spellings of the same functions.
  friend FJ_DEVICE Dual exp(Dual a) { return expf(a); }
  friend FJ_DEVICE Dual exp2(Dual a) { return exp2f(a); }
  friend FJ_DEVICE Dual log(Dual a) { return logf(a); }
  friend FJ_DEVICE Dual log2(Dual a) { return log2f(a); }
  friend FJ_DEVICE Dual log1p(Dual a) { return log1pf(a); }
  friend FJ_DEVICE Dual sqrt(Dual a) { return sqrtf(a); }
  friend FJ_DEVICE Dual tanh(Dual a) { return tanhf(a); }
  friend FJ_DEVICE Dual sin(Dual a) { return sinf(a); }
  friend FJ_DEVICE Dual cos(Dual a) { return cosf(a); }
  friend FJ_DEVICE Dual fabs(Dual a) { return fabsf(a); }
  friend FJ_DEVICE Dual abs(Dual a) { return fabsf(a); }
  friend FJ_DEVICE Dual fmin(Dual a, Dual b) { return fminf(a, b); }
  friend FJ_DEVICE Dual fmax(Dual a, Dual b) { return fmaxf(a, b); }
  friend FJ_DEVICE Dual min(Dual a, Dual b) { return fminf(a, b); }
  friend FJ_DEVICE Dual max(Dual a, Dual b) { return fmaxf(a, b); }
  friend FJ_DEVICE Dual pow(Dual a, Dual b) { return powf(a, b); }
  friend FJ_DEVICE Dual pow(Dual a, T b) { return powf(a, b); }
};

}  // namespace flashjit

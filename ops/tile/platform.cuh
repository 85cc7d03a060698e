#pragma once
// Lets every template compile both under NVRTC (device code) and under a host C++ compiler
// (the emulator and host-side twins). Templates include no CUDA toolkit headers, so NVRTC needs
// no include path and stays fast.
#if defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FJ_DEVICE_CODE 1
#define FJ_DEVICE __device__ __forceinline__
#define FJ_HOST_DEVICE __host__ __device__ __forceinline__
#define FJ_GLOBAL __global__
#else
#define FJ_DEVICE inline
#define FJ_HOST_DEVICE inline
#define FJ_GLOBAL
#if defined(FLASHJIT_EMULATOR)
// threadIdx, __syncthreads, warp shuffles and votes as the CPU emulator's fibers.
#include "emulator/device_api.hpp"
#endif
#endif

// Whether kernels may declare thread block clusters (__cluster_dims__): on the device from
// sm_90 (NVRTC rejects the attribute below, even on a template never instantiated); always on
// the host, where the emulator takes the cluster shape from the launch.
#if !defined(FJ_DEVICE_CODE) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define FJ_HAS_CLUSTERS 1
#endif

namespace flashjit {

/// 64-bit element offsets: tensors over 2^31 elements are addressed without overflow.
using index_t = long long;

/// The largest finite float and -infinity, spelled without <cfloat>/<cmath>.
constexpr float kFloatMax = 3.402823466e+38f;
#if defined(FJ_DEVICE_CODE)
FJ_DEVICE float negative_infinity() { return __int_as_float(0xff800000); }
#else
inline float negative_infinity() { return -__builtin_huge_valf(); }
#endif

FJ_HOST_DEVICE constexpr int min_int(int a, int b) { return a < b ? a : b; }
FJ_HOST_DEVICE constexpr int max_int(int a, int b) { return a > b ? a : b; }

template <typename T>
constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

/// std::conditional_t without <type_traits> (NVRTC has no include path): IfThen if Condition,
/// else Otherwise.
template <bool Condition, typename IfThen, typename Otherwise>
struct select_type {
  using type = IfThen;
};
template <typename IfThen, typename Otherwise>
struct select_type<false, IfThen, Otherwise> {
  using type = Otherwise;
};
template <bool Condition, typename IfThen, typename Otherwise>
using select_type_t = typename select_type<Condition, IfThen, Otherwise>::type;

}  // namespace flashjit

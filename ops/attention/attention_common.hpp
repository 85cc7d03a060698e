#pragma once
// Host pieces the attention ops share (forward and backward): how a validated tensor is handed
// to a kernel, the checks of a [batch, seqlen, heads, head_dim] tensor, and the checks that an
// explicit config can run a call. Internal to ops/.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attention/fa2/forward_space.cuh"
#include "attention/parts/forward_params.cuh"
#include "attention/parts/mask_kind.cuh"
#include "flashjit/attention.hpp"
#include "flashjit/device.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/tensor.hpp"
#include "runtime/executor.hpp"

namespace flashjit::kernels {

/// The softmax scale of a call: attention.scale, or 1/sqrt(head_dim) when unset.
double softmax_scale(const Attention& attention);

/// The kernels' view of a validated [batch, seqlen, heads, head_dim] tensor.
HeadTensor head_tensor(const TensorView& view);

/// The kernels' view of a validated call's dropout (attention/parts/dropout.cuh).
DropoutParams dropout_params(const Attention& attention);

/// A tensor a launch touches, named for the emulator's findings.
detail::KernelBuffer kernel_buffer(const TensorView& view, const char* name);

/// Throws InvalidArgument("dtype") unless `dtype` is fp16 or bf16, and
/// InvalidArgument("head_dim") unless the attention kernels support `head_dim`.
void check_attention_support(DType dtype, int head_dim);

/// fp8 descale factors (an e4m3 cache's, the fp8 forward's): fp32 [1] (per tensor), [heads_kv]
/// (per head) or [batch, heads_kv] (per sequence and head, FlashAttention-3's), unit last
/// stride, 4-byte aligned; absent is fine. Throws InvalidArgument(name + ".dtype", ".shape" or
/// ".strides").
void check_descale(const TensorView& view, const std::string& name, const Attention& a);
/// A checked descale tensor as the kernels read it (descale_at); absent: none (1).
CacheDescale cache_descale(const TensorView& view);

/// The fp8 forward's descale factors (Attention::q_descale, k_descale, v_descale), each with its
/// field's name ("q_descale", ...): what its checks and its launch walk alike.
struct NamedDescale {
  const TensorView* view;
  const char* name;
};
std::array<NamedDescale, 3> fp8_descales(const Attention& a);

/// `view` is a [batch, seqlen, heads, head_dim] tensor the kernels move with 16-byte vectors:
/// exactly that shape (InvalidArgument(name + ".shape")), unit head_dim stride and the other
/// strides multiples of 8 elements (name + ".strides"), data 16-byte aligned (name). `dims`
/// names the sizes for the message, e.g. "[batch, seqlen_q, heads_q, head_dim]".
void check_head_tensor(const TensorView& view, std::string_view name, std::int64_t batch,
                       std::int64_t seqlen, std::int64_t heads, std::int64_t head_dim,
                       const char* dims);

/// What a call fixes of the config that runs it (the tile shape is free).
struct ConfigClass {
  DType dtype;
  int head_dim;
  MaskKind mask;
  bool softcap;
};

/// Throws InvalidArgument("config") unless a config of class `config` can run the validated
/// call: same dtype (q's), head dim and softcap, and a mask kind that covers the call's
/// (window covers none: unbounded windows see every key).
void check_config_class(const ConfigClass& config, const Attention& attention, const TensorView& q);

/// Br, Bc and warps of a config, and whether Q stays in registers: one entry of the forward's
/// table of preferred tiles.
struct TileShape {
  int block_m;
  int block_n;
  int warps;
  bool q_in_registers = false;
};

/// The C++ type of `dtype`'s elements in the templates ("flashjit::bfloat16_t").
std::string template_element(DType dtype);

/// The config of `configs` (not empty) with the least shared memory: a default's last resort
/// when no preferred tile fits.
template <class Config>
Config least_shared_memory(const std::vector<Config>& configs) {
  return *std::min_element(configs.begin(), configs.end(), [](const Config& a, const Config& b) {
    return a.shared_bytes() < b.shared_bytes();
  });
}

/// Throws InvalidArgument("config") when a block of `shared_bytes` does not fit `device` (the
/// emulator models an sm_80, so this holds on both backends).
void check_config_fits_device(int shared_bytes, const DeviceInfo& device);

}  // namespace flashjit::kernels

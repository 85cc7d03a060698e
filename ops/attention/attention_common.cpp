#include "attention/attention_common.hpp"

#include <cmath>

#include "attention/attention_forward.hpp"
#include "common/argument_checks.hpp"
#include "flashjit/error.hpp"

namespace flashjit::kernels {
namespace {

/// cp.async and the vector stores move 16 bytes: 8 elements of fp16/bf16.
constexpr std::int64_t kVectorBytes = 16;

}  // namespace

double softmax_scale(const Attention& attention) {
  return attention.scale.has_value() ? double{*attention.scale}
                                     : 1.0 / std::sqrt(static_cast<double>(attention.head_dim));
}

HeadTensor head_tensor(const TensorView& view) {
  return {view.data, view.strides[0], view.strides[1], view.strides[2]};
}

DropoutParams dropout_params(const Attention& attention) {
  const double p = attention.dropout_p;
  DropoutParams dropout{};
  if (p <= 0.0) return dropout;
  // p < 1 in fp32 is at most 1 − 2⁻²⁴: the threshold stays below 2³².
  dropout.threshold = static_cast<unsigned>(std::floor(std::ldexp(p, 32)));
  dropout.scale = static_cast<float>(1.0 / (1.0 - p));
  dropout.seed[0] = static_cast<unsigned>(attention.dropout_seed);
  dropout.seed[1] = static_cast<unsigned>(attention.dropout_seed >> 32);
  dropout.offset[0] = static_cast<unsigned>(attention.dropout_offset);
  dropout.offset[1] = static_cast<unsigned>(attention.dropout_offset >> 32);
  return dropout;
}

detail::KernelBuffer kernel_buffer(const TensorView& view, const char* name) {
  return {view.data, static_cast<std::size_t>(view.span_bytes()), name};
}

void check_attention_support(DType dtype, int head_dim) {
  if (dtype == DType::e4m3) {
    throw InvalidArgument("dtype",
                          "is e4m3, which only the dense forward takes (the fp8 forward, "
                          "which has no backward); this takes fp16 and bf16");
  }
  if (dtype != DType::f16 && dtype != DType::bf16) {
    throw InvalidArgument(
        "dtype", "is " + std::string(dtype_name(dtype)) + "; attention supports fp16 and bf16");
  }
  if (!attention_forward_space::head_dim_supported(head_dim)) {
    throw InvalidArgument(
        "head_dim", "is " + std::to_string(head_dim) + "; supported: multiples of 8 from 8 to 256");
  }
}

void check_head_tensor(const TensorView& view, std::string_view name, std::int64_t batch,
                       std::int64_t seqlen, std::int64_t heads, std::int64_t head_dim,
                       const char* dims) {
  check_shape(view, name, {batch, seqlen, heads, head_dim}, dims);
  if (view.strides[3] != 1) {
    throw InvalidArgument(
        std::string(name) + ".strides",
        "the head_dim stride is " + std::to_string(view.strides[3]) + "; must be 1");
  }
  // 8 elements of 16 bits, 16 of an fp8 cache's.
  const auto vector_elements = kVectorBytes / static_cast<std::int64_t>(dtype_size(view.dtype));
  for (int d = 0; d < 3; ++d) {
    // A dimension of size 1 is never stepped along, so its stride does not matter.
    if (view.shape[d] > 1 && view.strides[d] % vector_elements != 0) {
      throw InvalidArgument(std::string(name) + ".strides",
                            "stride [" + std::to_string(d) + "] is " +
                                std::to_string(view.strides[d]) + "; must be a multiple of " +
                                std::to_string(vector_elements) +
                                " elements (the kernel moves 16 bytes at a time)");
    }
  }
  check_aligned(view, name, kVectorBytes);
}

void check_descale(const TensorView& view, const std::string& name, const Attention& a) {
  if (!present(view)) return;
  if (view.dtype != DType::f32) {
    throw InvalidArgument(name + ".dtype",
                          "is " + std::string(dtype_name(view.dtype)) + "; must be fp32");
  }
  const bool per_tensor = view.rank == 1 && view.shape[0] == 1;
  const bool per_head = view.rank == 1 && view.shape[0] == a.heads_kv;
  const bool per_sequence =
      view.rank == 2 && view.shape[0] == a.batch && view.shape[1] == a.heads_kv;
  if (!per_tensor && !per_head && !per_sequence) {
    std::string shape;
    for (int d = 0; d < view.rank; ++d)
      shape += (d > 0 ? ", " : "") + std::to_string(view.shape[d]);
    throw InvalidArgument(name + ".shape",
                          "is [" + shape + "]; expected [1], [heads_kv] = [" +
                              std::to_string(a.heads_kv) + "] or [batch, heads_kv] = [" +
                              std::to_string(a.batch) + ", " + std::to_string(a.heads_kv) + "]");
  }
  const int last = view.rank - 1;
  if (view.shape[last] > 1 && view.strides[last] != 1) {
    throw InvalidArgument(
        name + ".strides",
        "the last stride is " + std::to_string(view.strides[last]) + "; must be 1");
  }
  check_aligned(view, name, 4);
}

std::array<NamedDescale, 3> fp8_descales(const Attention& a) {
  return {{{&a.q_descale, "q_descale"}, {&a.k_descale, "k_descale"}, {&a.v_descale, "v_descale"}}};
}

CacheDescale cache_descale(const TensorView& view) {
  if (view.data == nullptr) return {nullptr, 0, 0};
  const auto* data = static_cast<const float*>(view.data);
  if (view.rank == 2) return {data, view.strides[0], view.strides[1]};
  return {data, 0, view.shape[0] == 1 ? 0 : view.strides[0]};
}

void check_config_class(const ConfigClass& config, const Attention& attention,
                        const TensorView& q) {
  auto reject = [](const std::string& problem) { throw InvalidArgument("config", problem); };
  if (config.dtype != q.dtype) {
    reject("is for " + std::string(dtype_name(config.dtype)) + "; the tensors are " +
           std::string(dtype_name(q.dtype)));
  }
  if (config.head_dim != attention.head_dim) {
    reject("is for head dim " + std::to_string(config.head_dim) + "; the call has " +
           std::to_string(attention.head_dim));
  }
  if (config.softcap != (attention.softcap > 0.0f)) {
    reject(config.softcap ? "has softcap on; the call has softcap 0"
                          : "has softcap off; the call sets attention.softcap");
  }
  if (config.mask == MaskKind::none && forward_mask_kind(attention) == MaskKind::window) {
    reject("has mask kind none; the call is causal or windowed and needs mask kind window");
  }
}

std::string template_element(DType dtype) {
  return dtype == DType::f16 ? "flashjit::half_t" : "flashjit::bfloat16_t";
}

void check_config_fits_device(int shared_bytes, const DeviceInfo& device) {
  if (static_cast<std::size_t>(shared_bytes) > device.shared_memory_optin) {
    throw InvalidArgument("config", "needs " + std::to_string(shared_bytes) +
                                        " bytes of shared memory; this GPU allows " +
                                        std::to_string(device.shared_memory_optin));
  }
}

}  // namespace flashjit::kernels

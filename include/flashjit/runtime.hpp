#pragma once
// The entry point of the C++ API: a Runtime owns one GPU's context and the kernels loaded on
// it, and runs ops on tensors that live in that GPU's memory; or, on the emulator backend, runs
// the same kernel templates on the CPU with tensors in host memory.
#include <cstddef>
#include <memory>
#include <string>

#include "flashjit/attention.hpp"
#include "flashjit/device.hpp"
#include "flashjit/device_buffer.hpp"
#include "flashjit/layer_norm.hpp"
#include "flashjit/multiscale_attention.hpp"
#include "flashjit/tensor.hpp"
#include "flashjit/tuning.hpp"
#include "flashjit/work_counters.hpp"

namespace flashjit {

namespace detail {
struct RuntimeParts;
}  // namespace detail

/// How a Runtime is set up.
struct RuntimeOptions {
  int device = 0;  ///< CUDA device ordinal (cuda backend; ignored by the emulator)
  Backend backend = Backend::cuda;
  /// How kernels are chosen; FLASHJIT_TUNING=off|cached|auto, when set, overrides it.
  TuningPolicy tuning = TuningPolicy::cached;
  /// The GPU the emulator backend models and chooses kernels for: "sm_80" (an A100), "sm_89"
  /// (an L40S: 99 KB of shared memory a block, fp8 tensor cores) or "sm_90a" (an H100, where
  /// the Hopper path runs). Ignored by the cuda backend.
  std::string emulated_arch = "sm_80";
  /// Inference calls (Runtime::forward with Sequences) check their index arrays before any
  /// launch: cu_seqlens from 0 and nondecreasing within the packed tensors, lengths within the
  /// longest, page table entries of used pages within the cache. The emulator backend always
  /// checks (on the host). On the cuda backend a small kernel makes one pass over the arrays
  /// and the host waits for its answer (a synchronization), and only when it finds a bad index
  /// are the arrays copied to name it; so the check is off by default, and an out-of-range
  /// index then reads or writes outside the tensors, as in FlashAttention and FlashInfer
  /// (undefined results, or an illegal-address error).
  bool check_indices = false;
  /// The emulator backend also models what ncu's memory tables show (MemoryCounters in
  /// emulated_work(): shared-memory bank wavefronts and global sector use per instruction site,
  /// bytes in flight, DRAM bytes through an L2 model; docs/emulator.md). Launches run slower.
  /// Ignored by the cuda backend.
  bool model_memory = false;
};

class Runtime {
 public:
  /// Opens `options.device` on the cuda backend. Throws Error{no_driver} or Error{no_device}
  /// (saying which is missing) when kernels cannot run here, InvalidArgument("device") for a
  /// bad ordinal, InvalidArgument("FLASHJIT_TUNING") for an unknown policy in the environment.
  /// The emulator backend always opens and never loads the driver.
  explicit Runtime(const RuntimeOptions& options = {});
  ~Runtime();
  Runtime(Runtime&&) noexcept;
  Runtime& operator=(Runtime&&) noexcept;

  /// The device this runtime runs on; on the emulator, "flashjit CPU emulator" modelling the
  /// GPU of RuntimeOptions::emulated_arch (its shared memory limit and arch()).
  const DeviceInfo& device() const;

  /// Allocates `bytes` of device memory (at least 1 byte is allocated for 0). The emulator
  /// returns host memory aligned to 256 bytes, filled with 0xff bytes (NaN) until written.
  /// Throws Error{out_of_memory} when the device (on the emulator, the host) cannot hold it.
  DeviceBuffer allocate(std::size_t bytes);
  /// Allocates `bytes` in `stream`'s order: usable by work queued on `stream` after this call,
  /// and freed, when the buffer is destroyed, after the work queued on `stream` by then,
  /// without the host waiting (cuMemAllocFromPoolAsync/cuMemFreeAsync), from a memory pool of
  /// this runtime's own that keeps the memory freed into it for the next allocation until the
  /// runtime is destroyed (the device's default pool would hand it back to the system at every
  /// synchronization, and the next call would map it again while the GPU waits). On a GPU
  /// without memory pools the allocation is plain and destroying the buffer waits for `stream`
  /// first. For scratch space a call needs only while its kernels run.
  DeviceBuffer allocate_on_stream(std::size_t bytes, Stream stream);
  /// Copies `bytes` from host memory to device memory (synchronously). A destination inside a
  /// buffer of this runtime must leave room for `bytes` in it: InvalidArgument("bytes") if not,
  /// before anything is copied.
  void copy_to_device(void* device_dst, const void* host_src, std::size_t bytes);
  /// Copies `bytes` from device memory to host memory (synchronously); a source inside a buffer
  /// of this runtime is checked as copy_to_device checks its destination.
  void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes);
  /// Waits for all work on `stream` (nothing to wait for on the emulator).
  void synchronize(Stream stream = nullptr);

  /// Row-wise softmax over the last dimension: y[r, :] = softmax(scale · x[r, :]).
  /// `x` and `y` are rank-2 [rows, cols] views of device memory with unit column stride and any
  /// row stride; dtype fp16, bf16 or fp32, the same for both. `y` may be `x` itself (in place)
  /// but must not partly overlap it. A row whose entries are all -inf gives zeros.
  /// Throws InvalidArgument naming the argument for bad input; nothing is launched then.
  void softmax(const TensorView& x, const TensorView& y, float scale = 1.0f,
               Stream stream = nullptr);

  /// Merges partial attention states computed over disjoint key sets into the exact state over
  /// their union (split-KV decoding, cascade attention, context parallelism): per (token, head),
  ///   lse = log Σᵢ exp(partial_lse[i]),   o = Σᵢ exp(partial_lse[i] − lse) · partial_o[i].
  /// partial_o is [num_partials, tokens, heads, head_dim] (num_partials >= 1, head_dim 1 to
  /// 1024, unit head_dim stride, any other strides), fp16, bf16 or fp32; partial_lse is fp32
  /// [num_partials, tokens, heads] with any strides. o is [tokens, heads, head_dim] with unit
  /// head_dim stride, in partial_o's dtype or fp32 (fp32 partials into any); lse is fp32 [tokens,
  /// heads], or a view with null data to skip it. LSEs are natural-log, as forward() writes them
  /// (FlashInfer's are base 2: multiply those by ln 2 first), finite or -inf. A partial whose LSE
  /// is -inf (it saw no key) contributes nothing, whatever its o holds; a row where every partial
  /// is -inf gets o = 0 and lse = -inf. o and lse must share no memory with the inputs or each
  /// other. Throws InvalidArgument naming the argument for bad input; nothing is launched then.
  void merge_states(const TensorView& partial_o, const TensorView& partial_lse, const TensorView& o,
                    const TensorView& lse, Stream stream = nullptr);

  /// Merges state b into state a in place, the two-way form of merge_states(): (o_a, lse_a)
  /// becomes the state over both key sets. This is cascade attention's step: the shared
  /// prefix's state, written once, absorbs each request's own state. o_a and o_b are
  /// [tokens, heads, head_dim] of one dtype (fp16, bf16 or fp32; fp32 keeps the state exact
  /// enough to merge again, 16-bit rounds it each time), unit head_dim stride; lse_a and lse_b
  /// fp32 [tokens, heads], natural log; any other strides. o_b and lse_b are only read and
  /// must not overlap o_a or lse_a. Throws InvalidArgument naming the argument for bad input;
  /// nothing is launched then.
  void merge_state_in_place(const TensorView& o_a, const TensorView& lse_a, const TensorView& o_b,
                            const TensorView& lse_b, Stream stream = nullptr);

  /// Layer norm forward over each row of x [rows, cols] (cols 1 to 65536):
  ///   y = (x − μ)/√(σ² + ε) · γ + β,  μ and σ² (biased, 1/cols) over the row,
  /// or with options.rms, y = x/√(mean(x²) + ε) · γ. With options.bias [cols] and/or
  /// options.residual [rows, cols], x is input + bias + residual (`x` is then the input), rounded
  /// to the dtype, and is written to options.sum when given. x, y, residual and sum are
  /// [rows, cols] with unit column stride and any row stride; gamma, beta and bias contiguous
  /// [cols]; all fp16, bf16 or fp32, one dtype. mean and rstd (1/√(σ² + ε), or 1/√(mean(x²) + ε))
  /// are fp32 [rows] with any stride, written for the backward, each skipped when its data is
  /// null; RMS norm takes no beta and writes no mean. Statistics are fp32 (the mean, then the
  /// variance about it, in two passes over the row held on chip). Outputs must not overlap the
  /// inputs or each other (y may be x itself). Throws InvalidArgument naming the argument for
  /// bad input; nothing is launched or written then.
  void layer_norm(const LayerNorm& options, const TensorView& x, const TensorView& gamma,
                  const TensorView& beta, const TensorView& y, const TensorView& mean,
                  const TensorView& rstd, Stream stream = nullptr);

  /// Layer norm backward: given dy = dL/dy of a layer_norm() call with the same options.rms,
  /// its x (options.sum when that call was fused: the tensor it normalized), gamma, and the
  /// mean and rstd it wrote (mean absent for RMS norm), writes dx = dL/dx (which is also
  /// dL/dinput and dL/dresidual of a fused call), dgamma, dbeta (absent for RMS norm) and,
  /// when given, dbias = the column sums of dx (dL/dbias of a fused call). Shapes, dtypes and
  /// strides as in layer_norm(); options' bias, residual and sum must be absent. dgamma, dbeta
  /// and dbias are summed over rows in a fixed order (per-slot fp32 partials in a workspace of
  /// up to 64 MiB, allocated in the stream's order, then a second kernel): the same bits on
  /// every run. Throws InvalidArgument naming the argument for bad input; nothing is launched or
  /// written then.
  void layer_norm_backward(const LayerNorm& options, const TensorView& x, const TensorView& gamma,
                           const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                           const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                           const TensorView& dbias, Stream stream = nullptr);

  /// Attention forward: o = softmax(scale · q kᵀ + mask) v for every (batch, query head), and
  /// lse[b, h, i] = log Σⱼ exp(scale · q_i·k_j) over the visible keys (for the backward pass).
  /// q is [batch, seqlen_q, heads_q, head_dim], k and v [batch, seqlen_k, heads_kv, head_dim],
  /// o like q (logical shapes; any strides with a unit head_dim stride), all fp16 or all bf16
  /// (or q, k and v e4m3 with o bf16: the fp8 forward, Attention::q_descale); lse is fp32 [batch,
  /// heads_q, seqlen_q] with unit last stride, or a view with null data to skip it. A query row
  /// that sees no key gets o = 0 and lse = -inf. The kernel config comes from the tuning policy
  /// (tuning_policy(); under auto, a new shape is tuned first). On sm_90a a causal or windowed
  /// call's persistent kernel takes its tiles from a counter the runtime holds per stream: the
  /// first such call on a stream allocates it, so make one before capturing a CUDA graph (later
  /// calls allocate nothing). Throws InvalidArgument naming the argument for bad input; nothing
  /// is launched then.
  void forward(const Attention& attention, const TensorView& q, const TensorView& k,
               const TensorView& v, const TensorView& o, const TensorView& lse,
               Stream stream = nullptr);

  /// Makes ready, ahead of the first call, the kernels a dense forward of `attention` with q, k
  /// and v of `dtype` (f16, bf16, or e4m3 without `backward`: the fp8 forward) launches and,
  /// with `backward`, the kernels of its backward: compiled concurrently, or loaded from the
  /// kernel cache, none run. The configs are those the
  /// calls would run with as far as is known without timing: the tuning database's winner for
  /// the shape, else the default (a shape that the auto policy has yet to tune is tuned at its
  /// first call, as ever). A mask_mod's automatic block mask is built here (its one launch, on
  /// the default stream), since whether the calls use it decides their kernels. Throws
  /// InvalidArgument naming the argument for bad input; nothing is compiled then.
  void prepare(const Attention& attention, DType dtype, bool backward = true);

  /// Builds attention.mask_mod's block mask into `block_mask` (int32 [batch, heads_q,
  /// ceil(seqlen_q / 16), 4], unit strides in the last two dimensions; see
  /// Attention::block_mask), evaluating the mask for every (batch, query head, query, key) once,
  /// as FlexAttention's create_block_mask. Set it as Attention::block_mask of forward calls with
  /// the same mask_mod and sizes. Each entry summarizes 16 query rows: the keys any of them
  /// sees, and the longest run of 16-key tiles all of them see whole. Throws InvalidArgument
  /// naming the argument (attention.mask_mod is required); nothing is launched then.
  void build_block_mask(const Attention& attention, const TensorView& block_mask,
                        Stream stream = nullptr);

  /// Attention forward for inference batches: sequences of different lengths packed without
  /// padding, K and V in a paged cache, and decoding's few queries per sequence against a long
  /// cache (see Sequences for the conventions). Query heads that share a key/value head are
  /// packed into one tile's rows where that fills the tensor cores better (GQA/MQA decoding),
  /// and the keys are split across CTAs when the grid would otherwise leave SMs idle; the
  /// partial results merge exactly (merge_states). Decoding calls (up to 16 queries a sequence)
  /// run one kernel that merges its own splits, with scratch (split partials, arrival counters)
  /// the runtime holds per stream: after a first call as large on a stream, which allocates it,
  /// such a call allocates nothing and captures into a CUDA graph. Shapes as forward() except
  /// where Sequences packs them. Index arrays are checked as RuntimeOptions::check_indices says.
  /// Throws InvalidArgument naming the argument ("sequences.page_table", "k.shape", ...) for bad
  /// input; nothing is launched or written then.
  void forward(const Attention& attention, const Sequences& sequences, const TensorView& q,
               const TensorView& k, const TensorView& v, const TensorView& o, const TensorView& lse,
               Stream stream = nullptr);

  /// Attention backward of a variable-length batch (Sequences with cu_seqlens_q and/or
  /// cu_seqlens_k, and the used counts seqused_q and seqlens_k; the forward-only members,
  /// page_table, the cache's and splits, must be absent): dq like q, dk and dv like k (packed
  /// where Sequences packs them), dout like o; lse as the forward with the same sequences wrote
  /// it (required). Gradients as backward() computes them, sequence by sequence: a sequence with
  /// no queries gets dK = dV = 0, one with no keys dQ = 0, and rows past the used counts 0.
  /// attention.deterministic works, and promises, as in backward() (see
  /// Attention::deterministic).
  /// Index arrays are checked as in forward(). Throws InvalidArgument naming the argument for
  /// bad input; nothing is launched or written then.
  void backward(const Attention& attention, const Sequences& sequences, const TensorView& q,
                const TensorView& k, const TensorView& v, const TensorView& o,
                const TensorView& lse, const TensorView& dout, const TensorView& dq,
                const TensorView& dk, const TensorView& dv, Stream stream = nullptr);

  /// Attention backward: given dout = dL/do of the forward call with the same arguments (and
  /// its o and lse, which must not be null), writes dq = dL/dq, dk = dL/dk, dv = dL/dv. dk and
  /// dv sum over the query heads that share a key/value head (GQA/MQA). Shapes, dtypes and
  /// strides as in forward(); dq like q, dk and dv like k. attention.deterministic chooses how
  /// dQ is summed: by default with fp32 atomic adds (on a GPU dQ's last bits may then differ
  /// between runs; dK and dV do not), or without atomics (all three bit-identical between
  /// runs); Attention::deterministic says exactly what each mode promises. Rows that see no
  /// key contribute nothing. The config comes from the tuning policy, as in forward(). Like
  /// forward(), it only queues work on `stream`: its workspace (4 bytes per query row and head,
  /// and in the default mode 4 bytes per element of dq for the atomic sums) is allocated and
  /// freed in the stream's order (allocate_on_stream), so the host does not wait.
  /// Throws InvalidArgument naming the argument for bad input; nothing is launched.
  void backward(const Attention& attention, const TensorView& q, const TensorView& k,
                const TensorView& v, const TensorView& o, const TensorView& lse,
                const TensorView& dout, const TensorView& dq, const TensorView& dk,
                const TensorView& dv, Stream stream = nullptr);

  /// Multi-scale attention forward (retention; see MultiScaleAttention): o = (S v) / max(r, 1)
  /// with S = scale · (q kᵀ) ∘ M per (batch, query head), computed block by block with the
  /// running row sum r and normalizer max(r, 1) rescaling the output (the source document's
  /// fused loop). `mask` is the decay rates or the mask tensor, as attention.mask says (see
  /// MultiScaleMask); key blocks the mask zeroes entirely (above the diagonal, or where the
  /// decay underflows) are skipped. rowsum is fp32 [batch, heads_q, seqlen_q] with unit last
  /// stride (r, for the backward), or a view with null data to skip it. Throws InvalidArgument
  /// naming the argument for bad input; nothing is launched then.
  void multiscale_forward(const MultiScaleAttention& attention, const TensorView& q,
                          const TensorView& k, const TensorView& v, const TensorView& mask,
                          const TensorView& o, const TensorView& rowsum, Stream stream = nullptr);

  /// Multi-scale attention backward: given dout = dL/do of the forward with the same arguments
  /// (and its o and rowsum, required), writes dq, dk, dv (dk and dv summed over the query heads
  /// of a key/value head) and, for a mask tensor, dmask = dL/dM [heads_q, seqlen_q, seqlen_k]
  /// summed over the batch (fp32, unit last stride; a view with null data skips it; it must be
  /// null for the decay mask). S is recomputed block by block; dS = (dO Vᵀ − [r > 1] · δ ·
  /// sign(S)) / max(r, 1) with δ = rowsum(dO ∘ O). No atomics: the same inputs give the same
  /// bits on every run with the same kernel config, as the attention backward's deterministic
  /// mode (Attention::deterministic). Throws InvalidArgument naming the argument for bad input.
  void multiscale_backward(const MultiScaleAttention& attention, const TensorView& q,
                           const TensorView& k, const TensorView& v, const TensorView& mask,
                           const TensorView& o, const TensorView& rowsum, const TensorView& dout,
                           const TensorView& dq, const TensorView& dk, const TensorView& dv,
                           const TensorView& dmask, Stream stream = nullptr);

  /// The work the emulator counted, per kernel, for the launches since the runtime opened or
  /// reset_emulated_work() last ran, in the order the kernels first ran. Call it (and the reset)
  /// while no other thread launches on this runtime. Throws Error{unsupported} on the cuda
  /// backend (a GPU is timed, not counted).
  std::vector<KernelWork> emulated_work() const;
  /// Forgets the counted work (emulator backend; Error{unsupported} on cuda).
  void reset_emulated_work();

  /// The backend this runtime was opened with.
  Backend backend() const;
  /// How this runtime chooses kernels: RuntimeOptions::tuning, or FLASHJIT_TUNING when set.
  TuningPolicy tuning_policy() const;

 private:
  friend struct detail::RuntimeParts;  // flashjit's own layers reach the parts through it
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashjit

#pragma once
// Which mask an attention kernel evaluates: a template parameter of the forward and backward
// kernels and a field of their configs, so host and kernel share it.

namespace flashjit {

/// none: only the ragged end of the keys; window: the windowed predicate of the attention
/// params (attention/parts/forward_params.cuh), of which causal is a case.
enum class MaskKind : int { none = 0, window = 1 };

}  // namespace flashjit

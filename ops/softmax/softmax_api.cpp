// The row-wise softmax's public face: Runtime::softmax (flashjit/runtime.hpp), built into the
// facade (api/) from this folder. It has no C function.
#include "api/runtime_parts.hpp"
#include "softmax/softmax.hpp"

namespace flashjit {

void Runtime::softmax(const TensorView& x, const TensorView& y, float scale, Stream stream) {
  kernels::run_softmax(detail::backend_of(*this), x, y, scale, stream);
}

}  // namespace flashjit

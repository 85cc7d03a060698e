// The emulated kernel table's contents: every op's share, as its registry entry adds it
// (explicitly: registration by static initializers would be dropped from a static library).
#include "common/builtin_kernels.hpp"

#include "common/op_registry.hpp"

namespace flashjit::kernels::emulated {

const detail::EmulatedKernelTable& builtin_kernels() {
  static const detail::EmulatedKernelTable table = [] {
    detail::EmulatedKernelTable filled;
    for (const OpInfo& op : ops()) {
      if (op.add_emulated) op.add_emulated(filled);
    }
    return filled;
  }();
  return table;
}

}  // namespace flashjit::kernels::emulated

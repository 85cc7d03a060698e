#include "emulated_kernel_table.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>

namespace flashjit::detail {
namespace {

/// How many traits ("bf16", "window", "br64", ...) `a` and `b` share.
int shared_traits(const KernelSpec& a, const KernelSpec& b) {
  int shared = 0;
  for (const std::string& trait : a.traits) {
    shared += std::find(b.traits.begin(), b.traits.end(), trait) != b.traits.end() ? 1 : 0;
  }
  return shared;
}

}  // namespace

void EmulatedKernelTable::add(EmulatedKernel kernel) {
  if (by_name_.contains(kernel.spec.name_expression)) return;
  by_name_.emplace(kernel.spec.name_expression, kernels_.size());
  kernels_.push_back(std::move(kernel));
}

const EmulatedKernel* EmulatedKernelTable::find(const std::string& name_expression) const {
  auto it = by_name_.find(name_expression);
  return it == by_name_.end() ? nullptr : &kernels_[it->second];
}

std::string missing_kernel_message(const EmulatedKernelTable& table, const KernelSpec& spec,
                                   const std::string& no_compiler, const std::string& remedy) {
  std::vector<const KernelSpec*> same_op;
  for (const EmulatedKernel& kernel : table.kernels()) {
    if (kernel.spec.op == spec.op) same_op.push_back(&kernel.spec);
  }
  std::string message = "kernel " + spec.readable_name + " (" + spec.name_expression +
                        ") is not among the emulator's build-time specializations, and the "
                        "emulator cannot compile it: " +
                        no_compiler + ".";
  message += " " + remedy +
             ", and the emulator compiles any specialization at run time; or run it on a GPU.";
  if (same_op.empty()) return message + " The emulator has no '" + spec.op + "' kernel at all.";
  // The nearest first: the same role (a forward for a forward, not the op's helper kernels),
  // the closest head dim, then those sharing the most traits (dtype, mask, tiles), so the list
  // suggests what to run instead.
  auto distance = [&](const KernelSpec* k) {
    return spec.head_dim == 0 || k->head_dim == 0 ? 0 : std::abs(k->head_dim - spec.head_dim);
  };
  std::stable_sort(same_op.begin(), same_op.end(), [&](const KernelSpec* a, const KernelSpec* b) {
    const bool a_role = a->role == spec.role, b_role = b->role == spec.role;
    if (a_role != b_role) return a_role;
    if (distance(a) != distance(b)) return distance(a) < distance(b);
    return shared_traits(*a, spec) > shared_traits(*b, spec);
  });
  constexpr std::size_t kListed = 6;
  message += " The emulator has " + std::to_string(same_op.size()) + " '" + spec.op +
             "' kernels; the nearest:";
  for (std::size_t i = 0; i < same_op.size() && i < kListed; ++i) {
    message += "\n  " + same_op[i]->readable_name;
  }
  return message;
}

}  // namespace flashjit::detail

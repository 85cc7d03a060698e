// Programmatic dependent launch on the emulator (PTX ISA "griddepcontrol"). On a GPU a grid
// launched with programmatic stream serialization may start while the grid before it in the
// stream still runs (once that grid's blocks have all called griddepcontrol.launch_dependents
// or exited), which hides its launch and set-up; each of its threads must call
// griddepcontrol.wait before it reads what that grid writes or writes what that grid reads.
// Launches run one after another here, so the wait has nothing to wait for; the emulator keeps
// the rule instead: in a launch marked as overlapping (LaunchConfig::overlaps_previous_grid),
// a thread's global access before its wait is a finding (memory_checker.cpp).
#include "emulator/machine.hpp"

namespace flashjit::emulator {

void grid_dependency_wait() {
  detail::Machine& m = detail::launch_machine("griddepcontrol.wait");
  m.threads[static_cast<std::size_t>(m.current)].waited_previous_grid = true;
}

void launch_dependent_grids() { detail::launch_machine("griddepcontrol.launch_dependents"); }

}  // namespace flashjit::emulator

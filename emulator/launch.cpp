// run_grid: sets up the machine for a launch (shared memory, its shadow, fiber stacks), runs
// the blocks one at a time, and hands back the report. Also the host twins of CUDA's built-in
// index variables, and the finding bookkeeping shared by the checks.
#include <stdexcept>

#include "emulator/machine.hpp"

flashjit::emulator::Dim3 threadIdx{0, 0, 0};
flashjit::emulator::Dim3 blockIdx{0, 0, 0};
flashjit::emulator::Dim3 blockDim;
flashjit::emulator::Dim3 gridDim;

namespace flashjit::emulator::detail {
namespace {

Machine* g_active = nullptr;
constexpr std::size_t kSharedAlignment = 16;  // as __align__(16) on the device

// Ends the launch however run_grid leaves, so a throw does not leave a stale machine.
struct ActiveScope {
  explicit ActiveScope(Machine& machine) { set_active(&machine); }
  ~ActiveScope() { set_active(nullptr); }
  ActiveScope(const ActiveScope&) = delete;
  ActiveScope& operator=(const ActiveScope&) = delete;
};

void prepare_shared(Machine& machine, std::size_t bytes) {
  machine.shared.assign(bytes + kSharedAlignment, std::byte{0});
  const auto raw = reinterpret_cast<std::uintptr_t>(machine.shared.data());
  const auto aligned = (raw + kSharedAlignment - 1) & ~(kSharedAlignment - 1);
  machine.shared_begin = machine.shared.data() + (aligned - raw);
  machine.shadow.assign(bytes, ShadowByte{});
}

}  // namespace

Machine* active() { return g_active; }
void set_active(Machine* machine) { g_active = machine; }

std::string format(Dim3 index) {
  return "(" + std::to_string(index.x) + "," + std::to_string(index.y) + "," +
         std::to_string(index.z) + ")";
}

void record(Machine& machine, int thread, Finding finding) {
  if (machine.report.findings.size() >= Report::kMaxFindings) {
    ++machine.report.suppressed;
    return;
  }
  finding.kernel = machine.config->kernel_name;
  finding.block = machine.block_index;
  if (thread >= 0) finding.thread = machine.threads[static_cast<std::size_t>(thread)].index;
  finding.message = std::string(to_string(finding.kind)) + " in " +
                    (finding.kernel.empty() ? std::string("kernel") : "'" + finding.kernel + "'") +
                    " block " + format(finding.block) + " thread " + format(finding.thread) + ": " +
                    finding.message;
  machine.report.findings.push_back(std::move(finding));
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

Report run_grid(const LaunchConfig& config, void (*body)(void*), void* context) {
  static detail::Machine machine;  // kept between launches: its fiber stacks are reused
  if (detail::active() != nullptr) throw std::logic_error("emulator launches do not nest");
  const auto threads = config.block.volume();
  if (threads == 0 || threads > 1024) {
    throw std::invalid_argument("emulator launch: a block holds 1 to 1024 threads");
  }
  machine.config = &config;
  machine.body = body;
  machine.body_context = context;
  machine.report = Report{};
  detail::prepare_shared(machine, config.shared_bytes);
  machine.stacks.reserve(static_cast<std::size_t>(threads));
  blockDim = config.block;
  gridDim = config.grid;
  detail::ActiveScope scope(machine);
  for (unsigned z = 0; z < config.grid.z; ++z) {
    for (unsigned y = 0; y < config.grid.y; ++y) {
      for (unsigned x = 0; x < config.grid.x; ++x) detail::run_block(machine, {x, y, z});
    }
  }
  return std::move(machine.report);
}

}  // namespace flashjit::emulator

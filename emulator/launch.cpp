// run_grid: sets up a machine per block of a cluster (shared memory, its shadow, fiber stacks),
// runs the clusters one at a time, and hands back the report, the blocks' merged. Also the host
// twins of CUDA's built-in index variables, and the finding bookkeeping shared by the checks.
#include <array>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <utility>

#include "emulator/machine.hpp"

flashjit::emulator::Dim3 threadIdx{0, 0, 0};
flashjit::emulator::Dim3 blockIdx{0, 0, 0};
flashjit::emulator::Dim3 blockDim;
flashjit::emulator::Dim3 gridDim;

namespace flashjit::emulator::detail {
namespace {

Machine* g_active = nullptr;
constexpr std::size_t kSharedAlignment = 16;  // as __align__(16) on the device

// Gives back the memory a launch sized by its shared memory and warps. A host-compiled kernel's
// copy of the emulator keeps its machine to the end of the process; hundreds of them holding
// megabytes of shadow each would add up, and the next launch sizes them anew anyway.
void release_launch_memory(Machine& machine) {
  std::vector<std::byte>().swap(machine.shared);
  std::vector<ShadowByte>().swap(machine.shadow);
  std::vector<std::uint32_t>().swap(machine.pair_sync);
  std::vector<std::uint32_t>().swap(machine.warps_sync);
  std::vector<std::uint32_t>().swap(machine.handoff_sync);
  std::vector<std::uint32_t>().swap(machine.warp_reads);
  machine.shared_begin = nullptr;
  machine.stacks = nullptr;
}

// Ends the launch however run_grid leaves, so a throw does not leave a stale machine.
struct ActiveScope {
  explicit ActiveScope(Machine& machine) : machine_(&machine) { set_active(&machine); }
  ~ActiveScope() {
    if (machine_ == nullptr) return;  // moved from
    set_active(nullptr);
    machine_->cluster = nullptr;
    release_launch_memory(*machine_);
  }
  ActiveScope(ActiveScope&& other) noexcept : machine_(std::exchange(other.machine_, nullptr)) {}
  ActiveScope(const ActiveScope&) = delete;
  ActiveScope& operator=(const ActiveScope&) = delete;
  ActiveScope& operator=(ActiveScope&&) = delete;

 private:
  Machine* machine_;
};

void prepare_shared(Machine& machine, std::size_t bytes) {
  machine.shared.assign(bytes + kSharedAlignment, std::byte{0});
  const auto raw = reinterpret_cast<std::uintptr_t>(machine.shared.data());
  const auto aligned = (raw + kSharedAlignment - 1) & ~(kSharedAlignment - 1);
  machine.shared_begin = machine.shared.data() + (aligned - raw);
  machine.shadow.assign(bytes, ShadowByte{});
}

// The race checker's clock restarts with each launch, and so do the records it compares with.
void reset_clock(Machine& machine, std::size_t threads) {
  const std::size_t warps = (threads + 31) / 32;
  machine.time = 0;
  machine.barrier_time = 0;
  machine.warp_sync.assign(warps, 0);
  machine.pair_sync.assign(warps * 32 * 32, 0);
  machine.warps_sync.assign(warps * warps, 0);
  machine.handoff_sync.assign(threads * warps, 0);
  machine.warp_reads.assign((machine.shadow.size() + kShadowChunk - 1) / kShadowChunk * warps, 0);
  for (AsyncQueue& queue : machine.async_queues) {
    queue.copies.clear();  // pointed into the previous launch's shared memory
    queue.head = 0;
  }
}

}  // namespace

Machine* active() { return g_active; }
void set_active(Machine* machine) { g_active = machine; }

std::string format(Dim3 index) {
  // Appended piece by piece: GCC 12 warns -Wrestrict (a false positive, GCC bug 105329) on
  // "literal" + std::to_string(...) at -O2 and above.
  std::string text = "(";
  text += std::to_string(index.x);
  text += ",";
  text += std::to_string(index.y);
  text += ",";
  text += std::to_string(index.z);
  text += ")";
  return text;
}

std::string hex(std::uintptr_t address) {
  char text[24];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(address));
  return text;
}

void record(Machine& machine, int thread, Finding finding) {
  if (machine.report.findings.size() >= Report::kMaxFindings) {
    ++machine.report.suppressed;
    return;
  }
  finding.kernel = machine.config->kernel_name;
  finding.block = machine.block_index;
  if (thread >= 0) {
    const ThreadSlot& slot = machine.threads[static_cast<std::size_t>(thread)];
    finding.thread = slot.index;
    if (slot.location.line() != 0) {
      finding.location =
          std::string(slot.location.file_name()) + ":" + std::to_string(slot.location.line());
    }
  }
  finding.message = std::string(to_string(finding.kind)) + " in " +
                    (finding.kernel.empty() ? std::string("kernel") : "'" + finding.kernel + "'") +
                    " block " + format(finding.block) + " thread " + format(finding.thread) + ": " +
                    finding.message;
  if (!finding.location.empty()) finding.message += " (at " + finding.location + ")";
  if (machine.explorer.on) {
    const std::string seed = std::to_string(machine.explorer.seed);
    finding.message += " [explored schedule, seed " + seed + ": FLASHJIT_EMULATOR_EXPLORE=" +
                       seed + " replays it]";
  }
  machine.report.findings.push_back(std::move(finding));
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

Report run_grid(const LaunchConfig& config, void (*body)(void*), void* context) {
  // This copy of the emulator's, one per block of a cluster, made when first needed; their
  // stacks are reused. On the heap: every host-compiled kernel links a copy of the emulator,
  // and eight machines in its .bss would map pages of their own in each of them.
  static std::array<std::unique_ptr<detail::Machine>, kMaxClusterBlocks> machines;
  if (detail::active() != nullptr) throw std::logic_error("emulator launches do not nest");
  const auto threads = static_cast<std::size_t>(config.block.volume());
  if (threads == 0 || threads > 1024) {
    throw std::invalid_argument("emulator launch: a block holds 1 to 1024 threads");
  }
  detail::check_cluster_shape(config);
  const Dim3 shape = config.cluster;
  const auto blocks = static_cast<std::size_t>(shape.volume());
  detail::Cluster cluster;
  std::vector<detail::ActiveScope> scopes;
  scopes.reserve(blocks);
  const std::optional<std::uint64_t> seed = detail::explore_seed(config);
  for (std::size_t r = 0; r < blocks; ++r) {
    if (!machines[r]) machines[r] = std::make_unique<detail::Machine>();
  }
  FiberStacks* stacks = config.stacks != nullptr ? config.stacks : &machines[0]->own_stacks;
  stacks->reserve(threads * blocks);
  for (std::size_t r = 0; r < blocks; ++r) {
    detail::Machine& machine = *machines[r];
    scopes.emplace_back(machine);
    machine.config = &config;
    machine.body = body;
    machine.body_context = context;
    machine.report = Report{};
    machine.explorer = {seed.has_value(), seed.value_or(0), 0};
    detail::prepare_shared(machine, config.shared_bytes);
    detail::reset_clock(machine, threads);
    machine.stacks = stacks;
    machine.stack_base = r * threads;
    machine.cluster = &cluster;
    machine.rank = static_cast<unsigned>(r);
    cluster.ranks.push_back(&machine);
  }
  blockDim = config.block;
  gridDim = config.grid;
  detail::model_launch_begin(config);
  std::vector<Dim3> members(blocks);
  for (unsigned z = 0; z < config.grid.z; z += shape.z) {
    for (unsigned y = 0; y < config.grid.y; y += shape.y) {
      for (unsigned x = 0; x < config.grid.x; x += shape.x) {
        for (std::size_t r = 0; r < blocks; ++r) {  // %cluster_ctarank: x fastest
          const auto rank = static_cast<unsigned>(r);
          members[r] = {x + rank % shape.x, y + rank / shape.x % shape.y,
                        z + rank / (shape.x * shape.y)};
        }
        cluster.barrier_phase = 0;
        detail::run_cluster(cluster, members);
      }
    }
  }
  Report report = std::move(machines[0]->report);
  report.schedule.explored = seed.has_value();
  report.schedule.seed = seed.value_or(0);
  for (std::size_t r = 1; r < blocks; ++r) detail::merge_report(report, machines[r]->report);
  report.memory = detail::model_launch_end(config);
  return report;
}

}  // namespace flashjit::emulator

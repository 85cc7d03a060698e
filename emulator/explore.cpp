// Exploring orderings (LaunchConfig::explore_seed). The default schedule is one legal order
// among many: threads run in index order until they block, and the async proxy completes TMA
// loads only when no thread can run, so a copy never lands while its issuer or a consumer
// could still move, and mbarrier.try_wait always waits for its phase. Code whose correctness
// hangs on those (bytes announced after a copy that may already have landed, a try_wait whose
// false result is ignored) passes there and fails on a GPU. Exploring, the emulator also:
//  - lands a TMA load as soon as it is issued, one time in kLandAtIssue (tma.cpp);
//  - after a thread's step, lands one load in flight, one time in kLandBetweenSteps;
//  - when no thread can run, lands one load at random rather than all in issue order;
//  - makes mbarrier.try_wait on an open phase return false one time in kTryWaitFails, after
//    letting the other threads run (its time limit ran out) (mbarrier.cpp).
// Each is an order the hardware allows. The choices come from a generator seeded from the seed
// and the block's index (splitmix64), so a block replays alone and the run is reproducible;
// findings name the seed (launch.cpp).
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::optional<std::uint64_t> explore_seed(const LaunchConfig& config) {
  if (config.explore_seed) return config.explore_seed;
  const char* value = std::getenv("FLASHJIT_EMULATOR_EXPLORE");
  if (value == nullptr || *value == '\0') return std::nullopt;
  char* end = nullptr;
  const unsigned long long seed = std::strtoull(value, &end, 10);
  if (*end != '\0' || value[0] == '-') {
    throw std::invalid_argument(std::string("FLASHJIT_EMULATOR_EXPLORE=") + value +
                                ": the seed is a non-negative decimal integer");
  }
  return seed;
}

void start_exploring_block(Machine& m, std::uint64_t linear_block) {
  m.explorer.state = m.explorer.seed ^ (linear_block * 0xD1B54A32D192ED03ull);
}

bool explore_chance(Machine& m, std::uint32_t odds) {
  return m.explorer.on && splitmix64(m.explorer.state) % odds == 0;
}

std::size_t explore_pick(Machine& m, std::size_t count) {
  return static_cast<std::size_t>(splitmix64(m.explorer.state) % count);
}

}  // namespace flashjit::emulator::detail

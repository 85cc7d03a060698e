// fence.proxy.async on the emulator (PTX ISA "membar / fence": proxy
// fences): shared memory written through the generic proxy (plain stores, cp.async) and then read
// through the async proxy (a TMA store's source, a wgmma's operands) needs a
// fence.proxy.async.shared::cta by the writing thread in between (CUTLASS's
// fence_view_async_shared). The shadow already keeps each byte's last writer and when it
// wrote; a fence stamps the thread's clock, and a write at or after its writer's latest fence
// is unfenced. Bytes a TMA load wrote have no generic writer and need no fence.
#include <string>

#include "emulator/machine.hpp"

namespace flashjit::emulator::detail {

bool check_proxy_fence(Machine& m, int thread, std::size_t offset, std::size_t bytes,
                       const char* what) {
  for (std::size_t b = offset; b < offset + bytes && b < m.shadow.size(); ++b) {
    const ShadowByte& s = m.shadow[b];
    if (s.writer < 0 || s.write_time < m.proxy_fence_time[static_cast<std::size_t>(s.writer)]) {
      continue;
    }
    Finding finding;
    finding.kind = FindingKind::proxy_fence_missing;
    finding.address = reinterpret_cast<std::uintptr_t>(m.shared_begin) + b;
    finding.bytes = 1;
    finding.offset = static_cast<long long>(b);
    finding.other_thread = s.writer;
    finding.message = std::string(what) + " reads shared offset " + std::to_string(b) + " (0x" +
                      hex(finding.address) + ") through the async proxy, which thread " +
                      format(m.threads[static_cast<std::size_t>(s.writer)].index) +
                      " last wrote through the generic proxy with no fence.proxy.async since";
    record(m, thread, std::move(finding));
    return false;
  }
  return true;
}

}  // namespace flashjit::emulator::detail

namespace flashjit::emulator {

void fence_proxy_async_shared() {
  detail::Machine& m = detail::launch_machine("fence.proxy.async.shared::cta");
  m.proxy_fence_time[static_cast<std::size_t>(m.current)] = ++m.time;
}

}  // namespace flashjit::emulator

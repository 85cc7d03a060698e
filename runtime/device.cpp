#include "flashjit/device.hpp"

#include <string>

#include "driver.hpp"
#include "flashjit/error.hpp"

namespace flashjit {
namespace {

int attribute(CUdevice device, CUdevice_attribute which, const char* what) {
  int value = 0;
  detail::check(detail::driver().cuDeviceGetAttribute(&value, which, device), what);
  return value;
}

}  // namespace

std::string DeviceInfo::arch() const {
  // The "a" suffix unlocks architecture-specific instructions (wgmma, setmaxnreg) from
  // Hopper on; such a cubin runs only on exactly this compute capability, which the cache
  // key already pins.
  std::string arch = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  return cc_major >= 9 ? arch + "a" : arch;
}

DeviceInfo query_device(int ordinal) {
  const detail::DriverApi& api = detail::driver();
  int count = 0;
  FLASHJIT_CU(cuDeviceGetCount, &count);
  if (ordinal < 0 || ordinal >= count) {
    throw InvalidArgument("device", "ordinal " + std::to_string(ordinal) + " is out of range; " +
                                        std::to_string(count) + " GPU(s) present");
  }
  CUdevice device = 0;
  FLASHJIT_CU(cuDeviceGet, &device, ordinal);
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  FLASHJIT_CU(cuDeviceGetName, name, static_cast<int>(sizeof(name)), device);
  info.name = name;
  info.cc_major = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major");
  info.cc_minor = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor");
  info.sm_count = attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count");
  info.shared_memory_optin = static_cast<std::size_t>(attribute(
      device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory opt-in"));
  info.l2_bytes =
      static_cast<std::size_t>(attribute(device, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size"));
  std::size_t total = 0;
  detail::check(api.cuDeviceTotalMem(&total, device), "cuDeviceTotalMem");
  info.global_memory_bytes = total;
  return info;
}

SystemInfo query_system() {
  SystemInfo system;
  try {
    detail::driver();
    system.driver_loaded = true;
    FLASHJIT_CU(cuDriverGetVersion, &system.driver_version);
    int count = 0;
    FLASHJIT_CU(cuDeviceGetCount, &count);
    for (int i = 0; i < count; ++i) system.devices.push_back(query_device(i));
  } catch (const Error& error) {
    system.driver_loaded = error.kind() != ErrorKind::no_driver;
    system.unavailable_reason = error.what();
  }
  if (system.driver_loaded && system.devices.empty() && system.unavailable_reason.empty()) {
    system.unavailable_reason = "no GPU: the CUDA driver reports no device";
  }
  return system;
}

}  // namespace flashjit

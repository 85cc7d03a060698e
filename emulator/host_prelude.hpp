#pragma once
// The emulator's side of every kernel compiled for it at run time, included first by each such
// translation unit (runtime/host_kernel_build.cpp): the launcher bridge and the device and PTX
// functions the templates call. It changes only with flashjit, so the runtime has GCC
// precompile it once per cache and compiler (docs/emulator.md): parsing it is about half of a
// small kernel's compile.
#include "emulator/device_api.hpp"
#include "emulator/host_launcher.hpp"
#include "emulator/ptx_api.hpp"

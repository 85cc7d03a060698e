#pragma once
// flashjit: run-time specialized attention kernels for NVIDIA GPUs. The one header to include.
#include "flashjit/device.hpp"
#include "flashjit/dtype.hpp"
#include "flashjit/error.hpp"
#include "flashjit/runtime.hpp"
#include "flashjit/tensor.hpp"
#include "flashjit/version.hpp"

#!/usr/bin/env bash
# Installs what building flashjit needs on Debian 12 and checks for the CUDA toolkit.
# Packages already present are left alone; nothing is downloaded from outside Debian.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" cmake g++ make pkgconf doctest-dev nlohmann-json3-dev \
  libcli11-dev libxxhash-dev

cuda=${CUDA_HOME:-/usr/local/cuda}
if [[ ! -f $cuda/include/nvrtc.h || ! -f $cuda/include/cuda.h ]]; then
  echo "flashjit: the CUDA toolkit (NVRTC and cuda.h) was not found under $cuda;" \
       "install it there or set CUDA_HOME" >&2
  exit 1
fi

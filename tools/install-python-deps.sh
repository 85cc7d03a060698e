#!/usr/bin/env bash
# Installs what the Python package's build and tests need on Debian 12: Debian's python3 with
# venv and pip, setuptools and wheel (the package's build), numpy, PyTorch (1.13, CPU) and
# pytest. Packages already present are left alone; nothing is downloaded from outside Debian.
set -euo pipefail

bash "$(dirname "$0")/apt-install.sh" python3 python3-venv python3-pip python3-setuptools \
  python3-wheel python3-numpy python3-torch python3-pytest

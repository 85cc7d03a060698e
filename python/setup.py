"""Builds libflashjit.so with the project's CMake build and puts it inside the package, with
the emulator's archive, which the CPU emulator links the kernels it compiles on first use to,
and the C API's header flashjit_c.h, which the package reads its ctypes face from.

The library is built in FLASHJIT_CMAKE_BUILD_DIR when that names a configured build folder of
this repository (absolute, or relative to the repository's root; CI reuses the folder its test
build made), else in the repository's
build/python folder, configured here once (a Release build: a few minutes the first time,
incremental afterwards). Only the build looks at that variable: the installed package finds the
library beside its own files.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def build_library() -> list:
    """Builds the shared library and the emulator's archive (which the emulator links the
    kernels it compiles at run time against) and returns their paths."""
    build_dir = os.environ.get("FLASHJIT_CMAKE_BUILD_DIR") or os.path.join("build", "python")
    build_dir = os.path.join(REPO, build_dir)  # (an absolute path stays as it is)
    if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
        print(f"flashjit: configuring a Release build of libflashjit.so in {build_dir}")
        subprocess.check_call(["cmake", "-S", REPO, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                               "-DFLASHJIT_BUILD_SHARED=ON",
                               "-DCUDAToolkit_ROOT=" + os.environ.get("CUDA_HOME",
                                                                      "/usr/local/cuda")])
    jobs = str(os.cpu_count() or 2)
    print(f"flashjit: building libflashjit.so in {build_dir} (-j{jobs})")
    subprocess.check_call(["cmake", "--build", build_dir, "--target", "flashjit_shared",
                           "flashjit_emulator", "-j", jobs])
    libraries = [os.path.join(build_dir, "api", "libflashjit.so"),
                 os.path.join(build_dir, "emulator", "libflashjit_emulator.a")]
    for library in libraries:
        if not os.path.isfile(library):
            raise RuntimeError(f"the build did not produce {library}")
    return libraries


class BuildWithLibrary(build_py):
    """build_py that first builds the libraries and copies them into the built package, with
    the C API's header, from which the package builds its ctypes face at import."""

    def run(self):
        files = build_library() + [os.path.join(REPO, "include", "flashjit", "flashjit_c.h")]
        super().run()
        target = os.path.join(self.build_lib, "flashjit")
        os.makedirs(target, exist_ok=True)
        for file in files:
            shutil.copyfile(file, os.path.join(target, os.path.basename(file)))


class BinaryDistribution(Distribution):
    """The package holds a native library: its wheel is for this platform only."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)

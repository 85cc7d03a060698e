# The installed package end to end (run by CTest as a script): `cmake --install` of this build
# into an empty prefix, then a consumer project outside the source tree configured against it
# with find_package(flashjit), built, and run on the emulator backend. Also checks that the
# command and the pkg-config file were installed, and that the installed command runs a kernel
# the emulator compiles for the host.
# Inputs: BUILD_DIR (flashjit's build), CONSUMER (the consumer's sources), WORK (scratch),
# CUDA_ROOT (the toolkit flashjit was built with).
file(REMOVE_RECURSE "${WORK}")
set(prefix "${WORK}/prefix")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}")
foreach(installed bin/flashjit include/flashjit/flashjit.hpp include/flashjit/version.hpp)
  if(NOT EXISTS "${prefix}/${installed}")
    message(FATAL_ERROR "${installed} was not installed")
  endif()
endforeach()
file(GLOB pc_files "${prefix}/lib*/pkgconfig/flashjit.pc")
if(NOT pc_files)
  message(FATAL_ERROR "the pkg-config file was not installed")
endif()
# The installed command runs a kernel the emulator was not built with: the host compiler builds
# it from the embedded templates and headers and the installed emulator archive (named, since
# the scratch prefix is not the one the library was configured for).
file(GLOB emulator_archive "${prefix}/lib*/libflashjit_emulator.a")
if(NOT emulator_archive)
  message(FATAL_ERROR "the emulator's archive was not installed")
endif()
run_step("running the installed flashjit at head dim 72 on the emulator"
         "${CMAKE_COMMAND}" -E env "FLASHJIT_EMULATOR_LIBRARY=${emulator_archive}"
         "FLASHJIT_CACHE_DIR=${WORK}/cache" "${prefix}/bin/flashjit" run --emulate --head-dim 72
         --config br64.bc32.w4.s1 --batch 1 --heads 1 --seqlen-q 64)
if(NOT step_output MATCHES "PASS")
  message(FATAL_ERROR "the installed flashjit did not pass at head dim 72:\n${step_output}")
endif()
run_step("configuring the consumer" "${CMAKE_COMMAND}" -S "${CONSUMER}" -B "${WORK}/build"
         "-DCMAKE_PREFIX_PATH=${prefix}" "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
run_step("building the consumer" "${CMAKE_COMMAND}" --build "${WORK}/build")
run_step("running the consumer" "${WORK}/build/consumer")
if(NOT step_output MATCHES "^PASS")
  message(FATAL_ERROR "the consumer did not pass:\n${step_output}")
endif()
message(STATUS "${step_output}")

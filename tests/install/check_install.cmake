# The installed package end to end (run by CTest as a script): `cmake --install` of this build
# into an empty prefix, then a consumer project outside the source tree configured against it
# with find_package(flashjit), built, and run on the emulator backend. Also checks that the
# command and the pkg-config file were installed.
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
run_step("configuring the consumer" "${CMAKE_COMMAND}" -S "${CONSUMER}" -B "${WORK}/build"
         "-DCMAKE_PREFIX_PATH=${prefix}" "-DCUDAToolkit_ROOT=${CUDA_ROOT}")
run_step("building the consumer" "${CMAKE_COMMAND}" --build "${WORK}/build")
run_step("running the consumer" "${WORK}/build/consumer")
if(NOT step_output MATCHES "^PASS")
  message(FATAL_ERROR "the consumer did not pass:\n${step_output}")
endif()
message(STATUS "${step_output}")

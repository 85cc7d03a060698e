# The installed package end to end (run by CTest as a script): `cmake --install` of this build
# into an empty prefix, which is then moved elsewhere, as a packager or a user copying the
# prefix would. Everything below uses the moved prefix only:
# - no installed file, text or binary, names the source or the build tree;
# - `pkg-config --cflags --libs flashjit` gives the moved paths, and a consumer built with a
#   plain compiler command from those flags alone runs, compiling a kernel for the emulator
#   that it was not built with (so libflashjit.so finds the emulator's archive beside itself);
# - the moved `bin/flashjit` finds the moved archive (flashjit info) and runs such a kernel
#   with no FLASHJIT_* variable set;
# - a consumer project configured with find_package(flashjit) builds and runs.
# Inputs: BUILD_DIR (flashjit's build), SOURCE_DIR (flashjit's sources), CONSUMER (the
# consumer's sources), WORK (scratch), CUDA_ROOT (the toolkit flashjit was built with), CXX (a
# C++ compiler), PKG_CONFIG (pkg-config or pkgconf), SANITIZE_FLAGS (a sanitized build's
# -fsanitize flags, which its consumers are built with too; empty otherwise), LINK_FLAGS (the
# build's CMAKE_EXE_LINKER_FLAGS, the consumers' too).
file(REMOVE_RECURSE "${WORK}")
set(installed "${WORK}/installed")
set(moved "${WORK}/elsewhere/moved-prefix")

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${what} failed (${result}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# Every FLASHJIT_* variable that could point the runtime at its files is unset, so only the
# lookup relative to the library or program is tried; the kernel cache is a scratch folder so
# the host compile really happens (and the user's cache is left alone).
set(clean_env "${CMAKE_COMMAND}" -E env --unset=FLASHJIT_EMULATOR_LIBRARY
    --unset=FLASHJIT_HOST_CXX --unset=FLASHJIT_TEMPLATE_DIR --unset=PKG_CONFIG_SYSROOT_DIR
    "FLASHJIT_CACHE_DIR=${WORK}/cache")

run_step("install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${installed}")
file(MAKE_DIRECTORY "${WORK}/elsewhere")
file(RENAME "${installed}" "${moved}")
foreach(file bin/flashjit include/flashjit/flashjit.hpp include/flashjit/version.hpp
             share/doc/flashjit/LICENSE)
  if(NOT EXISTS "${moved}/${file}")
    message(FATAL_ERROR "${file} was not installed")
  endif()
endforeach()

# No installed file holds the source or build tree's path (debug information, __FILE__, baked-in
# run-time paths, generated CMake and pkg-config files): grep reads binaries as text with -a.
# A sanitized build's binaries are left out: GCC 12 writes the sanitizers' source locations
# without applying -ffile-prefix-map, so they name the trees whatever the build does.
separate_arguments(sanitize_flags UNIX_COMMAND "${SANITIZE_FLAGS}")
separate_arguments(link_flags UNIX_COMMAND "${LINK_FLAGS}")
set(skip_binaries)
if(sanitize_flags)
  set(skip_binaries --exclude=*.a --exclude=*.so --exclude=*.so.* --exclude-dir=bin)
endif()
foreach(tree "${SOURCE_DIR}" "${BUILD_DIR}")
  execute_process(COMMAND grep -r -l -a -F ${skip_binaries} "${tree}" "${moved}"
                  RESULT_VARIABLE found OUTPUT_VARIABLE files)
  if(found EQUAL 0)
    message(FATAL_ERROR "installed files name the tree ${tree}:\n${files}")
  endif()
endforeach()

# pkg-config from the moved prefix: each -I and -L of flashjit's must be a folder of it.
file(GLOB pc_dirs "${moved}/lib*/pkgconfig")
if(NOT pc_dirs)
  message(FATAL_ERROR "the pkg-config file was not installed")
endif()
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config (or pkgconf) is needed to check the installed flashjit.pc")
endif()
run_step("pkg-config" ${clean_env} "PKG_CONFIG_PATH=${pc_dirs}" "${PKG_CONFIG}" --cflags --libs
         flashjit)
string(STRIP "${step_output}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
set(pc_folders "")
foreach(flag IN LISTS pc_flags)
  if(flag MATCHES "^-[IL](.*)$")
    file(REAL_PATH "${CMAKE_MATCH_1}" folder)
    list(APPEND pc_folders "${folder}")
  endif()
endforeach()
file(REAL_PATH "${moved}/include" include_dir)
get_filename_component(lib_dir "${pc_dirs}" DIRECTORY)
file(REAL_PATH "${lib_dir}" lib_dir)
list(FIND pc_folders "${include_dir}" include_at)
list(FIND pc_folders "${lib_dir}" lib_at)
if(include_at EQUAL -1 OR lib_at EQUAL -1)
  message(FATAL_ERROR "pkg-config --cflags --libs flashjit gives ${pc_flags}: not the moved "
                      "prefix's include and library folders (${include_dir}, ${lib_dir})")
endif()

# A consumer from pkg-config's flags alone (the run-path only spares LD_LIBRARY_PATH), run at a
# head dim the emulator was not built with.
run_step("compiling a consumer with pkg-config's flags" "${CXX}" -std=c++20
         "${CONSUMER}/main.cpp" ${sanitize_flags} ${link_flags} ${pc_flags} "-Wl,-rpath,${lib_dir}"
         -o "${WORK}/pc_consumer")
run_step("running the pkg-config consumer at head dim 72" ${clean_env} "${WORK}/pc_consumer" 72)
if(NOT step_output MATCHES "^PASS")
  message(FATAL_ERROR "the pkg-config consumer did not pass:\n${step_output}")
endif()

# The moved command finds the moved archive (not the build tree's, which still exists here),
# and runs a kernel the emulator was not built with: the host compiler builds it from the
# embedded templates and headers and that archive.
file(GLOB archive "${lib_dir}/libflashjit_emulator.a")
if(NOT archive)
  message(FATAL_ERROR "the emulator's archive was not installed in ${lib_dir}")
endif()
run_step("flashjit info from the moved prefix" ${clean_env} "${moved}/bin/flashjit" info)
string(FIND "${step_output}" "with ${archive}\n" archive_at)
if(archive_at EQUAL -1)
  message(FATAL_ERROR "the moved flashjit does not use the moved ${archive}:\n${step_output}")
endif()
run_step("running the moved flashjit at head dim 72 on the emulator" ${clean_env}
         "${moved}/bin/flashjit" run --emulate --head-dim 72 --config br64.bc32.w4.s1 --batch 1
         --heads 1 --seqlen-q 64)
if(NOT step_output MATCHES "PASS")
  message(FATAL_ERROR "the moved flashjit did not pass at head dim 72:\n${step_output}")
endif()

run_step("configuring the consumer" "${CMAKE_COMMAND}" -S "${CONSUMER}" -B "${WORK}/build"
         "-DCMAKE_PREFIX_PATH=${moved}" "-DCUDAToolkit_ROOT=${CUDA_ROOT}"
         "-DCMAKE_CXX_FLAGS=${SANITIZE_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}")
run_step("building the consumer" "${CMAKE_COMMAND}" --build "${WORK}/build")
run_step("running the consumer" ${clean_env} "${WORK}/build/consumer")
if(NOT step_output MATCHES "^PASS")
  message(FATAL_ERROR "the consumer did not pass:\n${step_output}")
endif()
message(STATUS "${step_output}")

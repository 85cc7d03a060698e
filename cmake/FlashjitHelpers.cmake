# Shared build helpers: compiler warnings for our own targets, template embedding, tests.

function(flashjit_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
                         -Wno-sign-conversion)
  if(FLASHJIT_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Generates the C++ sources holding every file under `template_dir` as a byte array, so an
# installed library needs no source tree, and the set's digest (the flashjit_template_digest
# tool, which the caller defines), so a cache hit needs no hashing of it (docs/cache.md).
# Regenerated when a template changes or one is added (CONFIGURE_DEPENDS).
function(flashjit_embed_templates out_var template_dir)
  file(GLOB_RECURSE templates CONFIGURE_DEPENDS RELATIVE "${template_dir}"
       "${template_dir}/*.cuh" "${template_dir}/*.cu")
  list(SORT templates)
  set(abs_templates "")
  foreach(t IN LISTS templates)
    list(APPEND abs_templates "${template_dir}/${t}")
  endforeach()
  set(output "${CMAKE_CURRENT_BINARY_DIR}/embedded_templates.cpp")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} -DTEMPLATE_DIR=${template_dir} "-DTEMPLATES=${templates}"
            -DOUTPUT=${output} -P "${PROJECT_SOURCE_DIR}/cmake/EmbedTemplates.cmake"
    DEPENDS ${abs_templates} "${PROJECT_SOURCE_DIR}/cmake/EmbedTemplates.cmake"
    COMMENT "Embedding kernel templates"
    VERBATIM)
  set(digest "${CMAKE_CURRENT_BINARY_DIR}/embedded_templates_digest.cpp")
  add_custom_command(
    OUTPUT "${digest}"
    COMMAND flashjit_template_digest "${digest}" "${template_dir}" ${templates}
    DEPENDS ${abs_templates} flashjit_template_digest
    COMMENT "Digesting kernel templates"
    VERBATIM)
  set(${out_var} "${output}" "${digest}" PARENT_SCOPE)
endfunction()

# Generates a C++ source defining flashjit::detail::embedded_host_headers(): the emulator's
# headers and the public headers they need, by their paths under the source tree, which the
# emulator backend writes out for the host compiler (docs/emulator.md), so an installed
# library compiles kernels for the emulator without a source tree.
function(flashjit_embed_host_headers out_var)
  file(GLOB headers CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}"
       "${PROJECT_SOURCE_DIR}/emulator/*.hpp")
  # emulator/host_launcher.hpp throws flashjit::InvalidArgument.
  list(APPEND headers include/flashjit/error.hpp)
  list(SORT headers)
  list(TRANSFORM headers PREPEND "${PROJECT_SOURCE_DIR}/" OUTPUT_VARIABLE abs_headers)
  set(output "${CMAKE_CURRENT_BINARY_DIR}/embedded_host_headers.cpp")
  add_custom_command(
    OUTPUT "${output}"
    COMMAND ${CMAKE_COMMAND} -DTEMPLATE_DIR=${PROJECT_SOURCE_DIR} "-DTEMPLATES=${headers}"
            -DFUNCTION=embedded_host_headers -DOUTPUT=${output}
            -P "${PROJECT_SOURCE_DIR}/cmake/EmbedTemplates.cmake"
    DEPENDS ${abs_headers} "${PROJECT_SOURCE_DIR}/cmake/EmbedTemplates.cmake"
    COMMENT "Embedding the emulator's headers"
    VERBATIM)
  set(${out_var} "${output}" PARENT_SCOPE)
endfunction()

# One helper adds a doctest executable and registers each TEST_CASE with CTest.
# LABELS: CTest labels for every case (`gpu` for GPU-only suites, `emulated` for emulator runs).
# EXPLORE: the test runs with FLASHJIT_EMULATOR_EXPLORE=${FLASHJIT_TEST_EXPLORE_SEED}, so
# every emulator launch in it explores other legal orderings (TMA copies landing early,
# mbarrier.try_wait failing), reproducibly from that seed.
set(FLASHJIT_TEST_EXPLORE_SEED 1 CACHE STRING
    "the seed of the orderings the emulator explores in tests marked EXPLORE")
function(flashjit_add_test name)
  cmake_parse_arguments(ARG "EXPLORE" "" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  # doctest_discover_tests splits the names it reads at ';' (a CMake list), so a case whose name
  # holds one would be registered under names that match nothing and "pass" without running.
  # Names split over several string literals (as clang-format wraps them) are read whole.
  foreach(source IN LISTS ARG_SOURCES)
    file(READ "${CMAKE_CURRENT_SOURCE_DIR}/${source}" text)
    string(REGEX MATCH "(TEST_CASE|SCENARIO)\\([ \n]*(\"[^\"]*\"[ \n]*)*\"[^\"]*;" bad "${text}")
    if(bad)
      message(FATAL_ERROR "${source}: a test case name holds ';', which CTest cannot run: ${bad}")
    endif()
  endforeach()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE flashjit_test_main ${ARG_LIBRARIES})
  flashjit_set_warnings(${name})
  set(labels unit)
  if(ARG_LABELS)
    set(labels ${ARG_LABELS})
  endif()
  # A second variable goes in ENVIRONMENT_MODIFICATION: doctest_discover_tests would split an
  # ENVIRONMENT list at its ';'.
  set(explore)
  if(ARG_EXPLORE)
    set(explore ENVIRONMENT_MODIFICATION
                "FLASHJIT_EMULATOR_EXPLORE=set:${FLASHJIT_TEST_EXPLORE_SEED}")
  endif()
  doctest_discover_tests(${name} TEST_PREFIX "${name}: " PROPERTIES LABELS "${labels}"
                         ENVIRONMENT "FLASHJIT_TEST_BINARY_DIR=${PROJECT_BINARY_DIR}" ${explore})
endfunction()

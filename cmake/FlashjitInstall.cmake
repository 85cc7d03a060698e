# `cmake --install`: the public headers, libflashjit (static, and shared when built), the
# `flashjit` command, a CMake package (find_package(flashjit CONFIG REQUIRED) gives
# flashjit::flashjit) and a pkg-config file. The templates and the emulator's headers are
# embedded in the library; the emulator finds its archive relative to the library or program
# (runtime/host_compiler.cpp). Nothing installed names the build or source tree, and the CMake
# package and the pkg-config file locate the prefix from their own folder, so a prefix can be
# moved after it is installed (tests/install/check_install.cmake).
include(CMakePackageConfigHelpers)

set(FLASHJIT_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/flashjit")

# The static library needs the archives of the layers below it (link-only dependencies), so
# they are installed and exported beside it.
set_target_properties(flashjit_autotune PROPERTIES EXPORT_NAME autotune)
set_target_properties(flashjit_ops PROPERTIES EXPORT_NAME ops)
set_target_properties(flashjit_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(flashjit_emulator PROPERTIES EXPORT_NAME emulator)
set(flashjit_install_targets flashjit flashjit_ops flashjit_autotune flashjit_runtime
    flashjit_emulator)
if(TARGET flashjit_shared)
  set_target_properties(flashjit_shared PROPERTIES EXPORT_NAME flashjit_shared)
  list(APPEND flashjit_install_targets flashjit_shared)
endif()
install(TARGETS ${flashjit_install_targets} EXPORT flashjitTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}"
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(TARGETS flashjit_cli RUNTIME DESTINATION "${CMAKE_INSTALL_BINDIR}")
foreach(include_dir IN LISTS FLASHJIT_PUBLIC_INCLUDE_DIRS)
  install(DIRECTORY "${include_dir}/flashjit"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}" FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
endforeach()
install(FILES "${PROJECT_BINARY_DIR}/include/flashjit/version.hpp"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}/flashjit")

install(EXPORT flashjitTargets NAMESPACE flashjit:: DESTINATION "${FLASHJIT_CMAKE_DIR}")
configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/flashjitConfig.cmake.in"
                              "${PROJECT_BINARY_DIR}/flashjitConfig.cmake"
                              INSTALL_DESTINATION "${FLASHJIT_CMAKE_DIR}")
write_basic_package_version_file("${PROJECT_BINARY_DIR}/flashjitConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/flashjitConfig.cmake"
              "${PROJECT_BINARY_DIR}/flashjitConfigVersion.cmake"
        DESTINATION "${FLASHJIT_CMAKE_DIR}")

# pkg-config: the shared library when there is one; static linking needs the private libraries.
# Every path in the file is relative to the file's own folder (${pcfiledir}), not the prefix
# configured here, so that `cmake --install --prefix P` and a prefix moved afterwards both work.
get_filename_component(FLASHJIT_NVRTC_DIR "${CUDA_nvrtc_LIBRARY}" DIRECTORY)
set(pc_dir "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH FLASHJIT_PC_TO_PREFIX "${pc_dir}" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" FLASHJIT_PC_TO_PREFIX "${FLASHJIT_PC_TO_PREFIX}")  # "../../"
file(RELATIVE_PATH FLASHJIT_PC_LIBDIR "${CMAKE_INSTALL_PREFIX}" "${CMAKE_INSTALL_FULL_LIBDIR}")
file(RELATIVE_PATH FLASHJIT_PC_INCLUDEDIR "${CMAKE_INSTALL_PREFIX}"
     "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
configure_file("${PROJECT_SOURCE_DIR}/cmake/flashjit.pc.in" "${PROJECT_BINARY_DIR}/flashjit.pc"
               @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/flashjit.pc" DESTINATION "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
# The license travels with every install (share/doc/flashjit/LICENSE).
install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DOCDIR}")

# The layers of docs/layout.md as CMake targets. A layer's include path holds its own
# folder and nothing else of the source tree: the path is a directory of links made here
# (build/layers/<folder>/<folder> -> the source folder), and the layers below arrive only through
# what the target links. An include that points up (`#include "attention/attention_tuning.hpp"` in autotune/) is
# therefore not found and does not compile; tests/layers checks that it stays so.

# Sets `out` to an include directory through which `#include "<folder>/..."` reaches the source
# folder `folder` (or the one the optional third argument names, relative to the source tree)
# and nothing else.
function(flashjit_layer_include_dir out folder)
  set(source "${folder}")
  if(ARGC GREATER 2)
    set(source "${ARGV2}")
  endif()
  set(root "${PROJECT_BINARY_DIR}/layers/${folder}")
  file(MAKE_DIRECTORY "${root}")
  file(REMOVE "${root}/${folder}")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${source}" "${root}/${folder}" SYMBOLIC)
  set(${out} "${root}" PARENT_SCOPE)
endfunction()

# The tile library (ops/tile/), which every layer may include as "tile/...": the primitives
# whose numerics the emulator and the runtime share with the kernels. Reaching it does not
# reach the ops beside it.
flashjit_layer_include_dir(FLASHJIT_TILE_INCLUDE_DIR tile ops/tile)

# The public include folders: include/ (the facade's headers and the shared types) and each op's
# include/ (ops/<op>/include/flashjit/<op>.hpp: the op's own public types), installed together
# as one include/flashjit/.
file(GLOB FLASHJIT_OP_INCLUDE_DIRS LIST_DIRECTORIES true CONFIGURE_DEPENDS
     "${PROJECT_SOURCE_DIR}/ops/*/include")
set(FLASHJIT_PUBLIC_INCLUDE_DIRS "${PROJECT_SOURCE_DIR}/include" ${FLASHJIT_OP_INCLUDE_DIRS})

# flashjit_public_types: the public headers of plain types every layer may use (errors, dtypes,
# tensor views, device info, an op's call description, ...). The facade's headers (runtime.hpp,
# flashjit.hpp, the C API) are left out, so no layer below the facade can include them; every
# other public header is a type header, so an op's new public header needs no line here.
set(flashjit_types_root "${PROJECT_BINARY_DIR}/layers/types")
file(REMOVE_RECURSE "${flashjit_types_root}")
file(MAKE_DIRECTORY "${flashjit_types_root}/flashjit")
foreach(include_dir IN LISTS FLASHJIT_PUBLIC_INCLUDE_DIRS)
  file(GLOB headers CONFIGURE_DEPENDS RELATIVE "${include_dir}/flashjit"
       "${include_dir}/flashjit/*.hpp")
  list(REMOVE_ITEM headers runtime.hpp flashjit.hpp)
  foreach(header IN LISTS headers)
    file(CREATE_LINK "${include_dir}/flashjit/${header}"
         "${flashjit_types_root}/flashjit/${header}" SYMBOLIC)
  endforeach()
endforeach()
file(CREATE_LINK "${PROJECT_BINARY_DIR}/include/flashjit/version.hpp"
     "${flashjit_types_root}/flashjit/version.hpp" SYMBOLIC)
add_library(flashjit_public_types INTERFACE)
target_include_directories(flashjit_public_types INTERFACE "${flashjit_types_root}")

# Gives `target` (the library of layer folder `folder`) its include path: its own folder, public
# to what links it, plus its dependencies' through target_link_libraries. With ROOT, the folder
# itself is the include root (ops/: "softmax/softmax.hpp", the names NVRTC gives the templates).
function(flashjit_layer target folder)
  cmake_parse_arguments(ARG "ROOT" "" "" ${ARGN})
  if(ARG_ROOT)
    set(dir "${PROJECT_SOURCE_DIR}/${folder}")
  else()
    flashjit_layer_include_dir(dir "${folder}")
  endif()
  target_include_directories(${target} PUBLIC "$<BUILD_INTERFACE:${dir}>")
  target_link_libraries(${target} PUBLIC "$<BUILD_INTERFACE:flashjit_public_types>")
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  flashjit_set_warnings(${target})
endfunction()

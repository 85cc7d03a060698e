# cmake -DSOURCE_DIR=<flashjit's source tree> -P check_examples.cmake
# Fails (with the reasons) unless
# - README.md shows examples/quick_start.cpp in a ```cpp block and examples/quick_start.c in a
#   ```c block, each exactly as the file is, so the code a reader copies is the code CTest runs;
# - every #include in examples/ names a public header ("flashjit/..." or <flashjit/...>) or a
#   standard one (no folder in its name): the examples must build against an installed flashjit,
#   which has no reference/, tests/ or layer folders.
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<source tree> -P check_examples.cmake")
endif()

set(problems "")
file(READ "${SOURCE_DIR}/README.md" readme)
foreach(pair "cpp:quick_start.cpp" "c:quick_start.c")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 fence)
  list(GET pair 1 file)
  file(READ "${SOURCE_DIR}/examples/${file}" code)
  string(FIND "${readme}" "```${fence}\n${code}```\n" at)
  if(at EQUAL -1)
    string(APPEND problems
           "\n  README.md has no ```${fence} block equal to examples/${file} (copy the file in)")
  endif()
endforeach()

file(GLOB sources "${SOURCE_DIR}/examples/*.cpp" "${SOURCE_DIR}/examples/*.c")
foreach(source IN LISTS sources)
  file(STRINGS "${source}" includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS includes)
    string(REGEX MATCH "[\"<]([^\">]*)[\">]" _ "${line}")
    set(header "${CMAKE_MATCH_1}")
    if(header MATCHES "/" AND NOT header MATCHES "^flashjit/")
      get_filename_component(name "${source}" NAME)
      string(APPEND problems "\n  examples/${name}: ${line} is not an installed header")
    endif()
  endforeach()
endforeach()

if(problems)
  message(FATAL_ERROR "examples:${problems}")
endif()
message(STATUS "examples: README code blocks match; only public headers included")

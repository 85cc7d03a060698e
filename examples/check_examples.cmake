# cmake -DSOURCE_DIR=<flashjit's source tree> -P check_examples.cmake
# Fails (with the reasons) unless
# - README.md shows examples/quick_start.cpp in a ```cpp block and examples/quick_start.c in a
#   ```c block, each exactly as the file is, so the code a reader copies is the code CTest runs;
# - every #include in examples/ names a public header ("flashjit/..." or <flashjit/...>) or a
#   standard one (no folder in its name): the examples must build against an installed flashjit,
#   which has no reference/, tests/ or layer folders;
# - every relative link in README.md and docs/*.md points at a file that exists.
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

# Every relative link of the README and of docs/ names a file that exists.
file(GLOB pages "${SOURCE_DIR}/docs/*.md")
foreach(page "${SOURCE_DIR}/README.md" ${pages})
  get_filename_component(page_dir "${page}" DIRECTORY)
  file(READ "${page}" text)
  # Square brackets group list items in CMake: turn them into something inert first.
  string(REPLACE "[" "<" text "${text}")
  string(REPLACE "]" ">" text "${text}")
  string(REGEX MATCHALL ">\\([^)#:]+[)#]" links "${text}")
  foreach(link IN LISTS links)
    string(REGEX REPLACE "^>\\(([^)#]+)[)#]$" "\\1" target "${link}")
    if(NOT EXISTS "${page_dir}/${target}")
      file(RELATIVE_PATH name "${SOURCE_DIR}" "${page}")
      string(APPEND problems "\n  ${name} links to ${target}, which does not exist")
    endif()
  endforeach()
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
message(STATUS "examples: README code blocks match; only public headers included; links resolve")

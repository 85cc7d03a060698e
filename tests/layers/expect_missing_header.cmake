# Builds probe TARGET in BUILD_DIR and passes only if the build fails because HEADER is not
# found: a layer that can reach the header of a layer above it fails this test.
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}"
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} built: its layer can include ${HEADER}, which is above it")
endif()
string(FIND "${output}" "${HEADER}: No such file or directory" missing)
if(missing EQUAL -1)
  message(FATAL_ERROR "${TARGET} failed for another reason than a missing ${HEADER}:\n${output}")
endif()
message(STATUS "${TARGET}: ${HEADER} is out of reach, as it should be")

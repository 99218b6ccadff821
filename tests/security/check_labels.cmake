# Issue 15: the runtime tests carried no ctest label although the README lists one, so `ctest -L runtime`
# ran nothing. Each label given in LABELS must select at least one test of this build. A test program not
# built yet (gtest discovery lists it as NAME_NOT_BUILT, without labels) makes the check skip, not fail.
# Usage: cmake -DCTEST=... -DBUILD=... -DLABELS=a,b -P check_labels.cmake
string(REPLACE "," ";" labels "${LABELS}")
execute_process(COMMAND ${CTEST} -N -R "_NOT_BUILT$" WORKING_DIRECTORY ${BUILD} OUTPUT_VARIABLE not_built)
foreach(label IN LISTS labels)
  execute_process(COMMAND ${CTEST} -N -L "^${label}$" WORKING_DIRECTORY ${BUILD} OUTPUT_VARIABLE out)
  if(NOT out MATCHES "Total Tests: [1-9]")
    if(not_built MATCHES "Total Tests: [1-9]")
      message("label ${label} selects no test, but some test programs are not built: skipped")
      return()
    endif()
    message(FATAL_ERROR "ctest label ${label} (listed in README.md) selects no test")
  endif()
  string(REGEX MATCH "Total Tests: [0-9]+" count "${out}")
  message("label ${label}: ${count}")
endforeach()

# Runs the idist::torch-only consumer from an install prefix (ctest driver step, `cmake -P`):
#   -DAPP=<the consumer's program>  -DPREFIX=<idist's install prefix>
# Checks that the program does not load libidist itself (else the check below would prove nothing),
# that the installed libraries carry the run path $ORIGIN, then runs the program without
# LD_LIBRARY_PATH: libidist_torch must find its sibling libidist in the prefix on its own.
cmake_minimum_required(VERSION 3.22)
find_program(READELF readelf REQUIRED)

function(dynamic_section file out)
  execute_process(COMMAND ${READELF} -d "${file}" RESULT_VARIABLE rc OUTPUT_VARIABLE text ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${file} failed: ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

dynamic_section("${APP}" app)
if(NOT app MATCHES "NEEDED[^\n]*libidist_torch\\.so")
  message(FATAL_ERROR "the consumer does not need libidist_torch:\n${app}")
endif()
if(app MATCHES "NEEDED[^\n]*\\[libidist\\.so")
  message(FATAL_ERROR "the consumer needs libidist directly, so its start would not test libidist_torch's "
                      "run path (does it call a function of libidist, or was --as-needed ignored?):\n${app}")
endif()

file(GLOB libs "${PREFIX}/lib*/libidist.so.*.*.*" "${PREFIX}/lib*/libidist_torch.so.*.*.*")
list(LENGTH libs n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "expected libidist and libidist_torch in ${PREFIX}, found: ${libs}")
endif()
foreach(lib IN LISTS libs)
  dynamic_section("${lib}" text)
  if(NOT text MATCHES "R(UN)?PATH[^\n]*\\[\\$ORIGIN(:|\\])")
    message(FATAL_ERROR "${lib} has no run path starting with $ORIGIN:\n${text}")
  endif()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${APP}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer did not run from ${PREFIX} without LD_LIBRARY_PATH (exit ${rc})")
endif()

# ignite's multi-node Parallel emulated on one machine (ctest driver, `cmake -P`): two launches of the
# example, node ranks 0 and 1, started together; "{port}" in the commands becomes one random port.
#   -DNODE0=<;-list> -DNODE1=<;-list>   the two commands
#   -DWORLD_SIZE=<n>                    the world size rank 0 must report
cmake_minimum_required(VERSION 3.22)
include(${CMAKE_CURRENT_LIST_DIR}/json_report.cmake)

string(RANDOM LENGTH 4 ALPHABET 0123456789 r)
math(EXPR port "20000 + ${r}")
foreach(node NODE0 NODE1)
  string(REPLACE "\\;" ";" ${node} "${${node}}")
  string(REPLACE "{port}" "${port}" ${node} "${${node}}")
endforeach()
# One execute_process runs its commands at the same time (as a pipeline): node 1 first, so that
# node 0's stdout, where rank 0 prints the report, is the captured one.
execute_process(COMMAND ${NODE1} COMMAND ${NODE0} RESULTS_VARIABLE codes OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("---- node 1: ${NODE1}\n---- node 0: ${NODE0}\n---- stdout (node 0)\n${out}---- stderr (both)\n${err}----")
if(NOT codes STREQUAL "0;0")
  message(FATAL_ERROR "exit codes (node 1, node 0): ${codes}, expected 0;0")
endif()
example_json(json "${out}")
example_json_get(ws "${json}" world_size)
if(NOT ws EQUAL WORLD_SIZE)
  message(FATAL_ERROR "world_size is ${ws}, expected ${WORLD_SIZE}")
endif()
message("ok: two launches formed one world of ${ws}")

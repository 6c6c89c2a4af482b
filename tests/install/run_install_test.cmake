# Installs the idist build tree into a temporary prefix, then configures, builds and runs a consumer
# project against it (ctest driver, `cmake -P`).
#   -DBUILD_DIR=<idist build tree>  -DCONSUMER_DIR=<consumer source>  -DWORK_DIR=<scratch folder>
#   -DGENERATOR=<CMake generator>   -DCXX=<C++ compiler>             -DCONFIG=<build type>
#   -DRUN=<;-list>   how to run the built program, with @APP@ standing for its path and @PREFIX@
#                    for the install prefix
#   -DCONSUMER_ARGS=<;-list> more arguments for configuring the consumer (e.g. -DTorch_DIR=...)
#   -DPROGRAM=<name>   the consumer's program (default: the one program named app*)
#   -DEXPECT_REGEX=<re>  the run's output must match it (optional)
cmake_minimum_required(VERSION 3.22)

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (exit ${rc}):\n${ARGN}\n---- stdout\n${out}\n---- stderr\n${err}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

# add_test hands lists over with their separators escaped (\;): make them lists again.
string(REPLACE "\\;" ";" RUN "${RUN}")
string(REPLACE "\\;" ";" CONSUMER_ARGS "${CONSUMER_ARGS}")
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")

run_step("cmake --install" "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}" --config "${CONFIG}")
foreach(f include/idist/idist.hpp include/idist/config.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()
file(GLOB_RECURSE config_files "${prefix}/*/idistConfig.cmake")
if(NOT config_files)
  message(FATAL_ERROR "the install has no idistConfig.cmake")
endif()

# idist is found in the prefix only (no package registry pointing at a build tree).
run_step("configuring the consumer" "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
         "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_BUILD_TYPE=${CONFIG}" "-DCMAKE_PREFIX_PATH=${prefix}"
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${CONSUMER_ARGS})
file(STRINGS "${WORK_DIR}/build/CMakeCache.txt" found_dir REGEX "^idist_DIR:")
string(FIND "${found_dir}" "=${prefix}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "find_package(idist) did not use the install prefix: ${found_dir}")
endif()
run_step("building the consumer" "${CMAKE_COMMAND}" --build "${WORK_DIR}/build")

if(NOT PROGRAM)
  set(PROGRAM "app*")
endif()
file(GLOB apps LIST_DIRECTORIES false "${WORK_DIR}/build/${PROGRAM}")
list(LENGTH apps n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "expected one consumer program in ${WORK_DIR}/build, found: ${apps}")
endif()
# The program must use the installed library, not the build tree's.
run_step("ldd" ldd "${apps}")
string(FIND "${step_output}" "=> ${prefix}/" at)
if(at EQUAL -1 OR NOT step_output MATCHES "libidist\\.so")
  message(FATAL_ERROR "the consumer does not load libidist from ${prefix}:\n${step_output}")
endif()
string(REPLACE "@APP@" "${apps}" run_command "${RUN}")
string(REPLACE "@PREFIX@" "${prefix}" run_command "${run_command}")
run_step("running the consumer" ${run_command})
message("${step_output}")
if(DEFINED EXPECT_REGEX AND NOT step_output MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "the consumer's output does not match '${EXPECT_REGEX}'")
endif()

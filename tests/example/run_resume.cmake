# Checkpoint / resume of the fashion_mnist example (ctest driver, `cmake -P`):
#   -DFIRST=<;-list>      optional: a run stopped early with --checkpoint-dir (--stop-after-epoch K, or
#                         --checkpoint-every-steps N --stop-after-steps S to stop mid-epoch as if killed)
#   -DRESUME=<;-list>     the run continued with --resume / --auto-resume (any launcher / world size)
#   -DREFERENCE=<;-list>  optional: the uninterrupted run; then RESUME must end with exactly its weights
#                         (weights_digest, every rank's parameters and buffers) and test accuracy
#   -DCHECKPOINT_DIR=dir  emptied first
#   -DITERATION=<n>       the iteration RESUME continues from (0: it starts fresh); FIRST must leave
#                         checkpoint_<n>.pt
#   -DFIRST_EPOCH=<e>     the epoch RESUME starts with (the checkpoint's, when it was saved mid-epoch)
#   -DTEAR=<file name>    optional: truncate this checkpoint of FIRST to half its size before RESUME, which
#                         must fall back (with a warning) to checkpoint_<ITERATION>.pt
#   -DMIN_ACCURACY=<x>    RESUME's test accuracy must exceed it
cmake_minimum_required(VERSION 3.22)
include(${CMAKE_CURRENT_LIST_DIR}/json_report.cmake)

function(run_example label command out_json out_err)
  string(REPLACE "\\;" ";" command "${command}")
  execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("---- ${label}: ${command}\n---- stdout\n${out}---- stderr\n${err}----")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${label} exited with ${rc}")
  endif()
  example_json(json "${out}")
  set(${out_json} "${json}" PARENT_SCOPE)
  set(${out_err} "${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${CHECKPOINT_DIR}")
if(DEFINED FIRST)
  run_example(first "${FIRST}" first_json first_err)
  if(NOT EXISTS "${CHECKPOINT_DIR}/checkpoint_${ITERATION}.pt")
    file(GLOB left "${CHECKPOINT_DIR}/*")
    message(FATAL_ERROR "the first run left no ${CHECKPOINT_DIR}/checkpoint_${ITERATION}.pt (it left: ${left})")
  endif()
  if(DEFINED TEAR)
    # A torn file: its header intact, half of its payload missing.
    file(SIZE "${CHECKPOINT_DIR}/${TEAR}" size)
    math(EXPR half "${size} / 2")
    execute_process(COMMAND truncate -s ${half} "${CHECKPOINT_DIR}/${TEAR}" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "cannot truncate ${CHECKPOINT_DIR}/${TEAR}")
    endif()
  endif()
endif()

run_example(resume "${RESUME}" resume_json resume_err)
example_json_get(resumed "${resume_json}" resumed_iteration)
if(NOT resumed EQUAL ITERATION)
  message(FATAL_ERROR "the resumed run continued from iteration ${resumed}, expected ${ITERATION}")
endif()
example_json_get(first_epoch "${resume_json}" first_epoch)
if(NOT first_epoch EQUAL FIRST_EPOCH)
  message(FATAL_ERROR "the resumed run started at epoch ${first_epoch}, expected ${FIRST_EPOCH}")
endif()
if(DEFINED TEAR AND NOT resume_err MATCHES "WARNING: Checkpoint: cannot load [^\n]*${TEAR}[^\n]*falling back")
  message(FATAL_ERROR "the resumed run did not warn that it skipped the torn ${TEAR}")
endif()
if(ITERATION EQUAL 0 AND NOT resume_err MATCHES "--auto-resume: no checkpoint in [^\n]*, starting fresh")
  message(FATAL_ERROR "the run did not say that it started fresh")
endif()
example_json_get(accuracy "${resume_json}" test_accuracy)
if(NOT accuracy GREATER MIN_ACCURACY)
  message(FATAL_ERROR "the resumed run's test_accuracy ${accuracy} is not above ${MIN_ACCURACY}")
endif()

if(DEFINED REFERENCE)
  run_example(reference "${REFERENCE}" reference_json reference_err)
  foreach(key weights_digest test_accuracy train_loss train_accuracy last_epoch)
    example_json_get(want "${reference_json}" ${key})
    example_json_get(got "${resume_json}" ${key})
    if(NOT got STREQUAL want)
      message(FATAL_ERROR "${key}: resumed ${got}, uninterrupted ${want}")
    endif()
  endforeach()
  example_json_get(digest "${resume_json}" weights_digest)
  message("ok: the run resumed from iteration ${ITERATION} ends with the uninterrupted run's weights (${digest}), "
          "loss and accuracy")
else()
  message("ok: resumed from iteration ${ITERATION}, test_accuracy ${accuracy}")
endif()

# IDIST_SANITIZE: instrument idist, its tests and examples with GCC / Clang sanitizers.
#   -DIDIST_SANITIZE=address,undefined   AddressSanitizer + UndefinedBehaviorSanitizer
#   -DIDIST_SANITIZE=thread              ThreadSanitizer
# Prebuilt dependencies (Gloo, Open MPI, LibTorch) stay uninstrumented; scripts/run-sanitizers.sh runs
# the suites with the suppression files of scripts/sanitizers/.
if(NOT IDIST_SANITIZE)
  return()
endif()
string(REPLACE "," ";" _idist_sanitizers "${IDIST_SANITIZE}")
foreach(s IN LISTS _idist_sanitizers)
  if(NOT s MATCHES "^(address|undefined|thread)$")
    message(FATAL_ERROR "IDIST_SANITIZE: unknown sanitizer '${s}'; expected address,undefined or thread")
  endif()
endforeach()
if("thread" IN_LIST _idist_sanitizers AND "address" IN_LIST _idist_sanitizers)
  message(FATAL_ERROR "IDIST_SANITIZE: thread cannot be combined with address (got '${IDIST_SANITIZE}')")
endif()
# Line tables (-g1) are all a report's stack needs (functions, files, lines) and build faster than full
# debug information; -O1 keeps the instrumented suite fast enough for CI.
set(_idist_san_flags -fsanitize=${IDIST_SANITIZE} -fno-omit-frame-pointer -g1 -O1)
if("undefined" IN_LIST _idist_sanitizers)
  list(APPEND _idist_san_flags -fno-sanitize-recover=undefined)  # a UB report fails the test
endif()
add_compile_options(${_idist_san_flags})
add_link_options(-fsanitize=${IDIST_SANITIZE})
message(STATUS "idist: sanitizers ${IDIST_SANITIZE}")

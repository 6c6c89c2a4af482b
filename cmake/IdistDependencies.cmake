# Finds each optional dependency according to IDIST_WITH_<X> (AUTO / ON / OFF) and sets
# IDIST_HAVE_<X> to 1 or 0 for config.hpp.

# idist_find(<NAME> <var-of-found> <find-command...>): runs the find command unless OFF, fails when
# ON and not found, prints a status line when AUTO and not found.
macro(idist_resolve name found)
  if(IDIST_WITH_${name} STREQUAL "OFF")
    set(IDIST_HAVE_${name} 0)
  elseif(${found})
    set(IDIST_HAVE_${name} 1)
  elseif(IDIST_WITH_${name} STREQUAL "ON")
    message(FATAL_ERROR "IDIST_WITH_${name}=ON but its dependency was not found")
  else()
    set(IDIST_HAVE_${name} 0)
    message(STATUS "idist: ${name} not found, building without it")
  endif()
  message(STATUS "idist: ${name} = ${IDIST_HAVE_${name}}")
endmacro()

find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
# The TCP store (src/store), the bootstrap of gloo and nccl, is written on standalone asio (headers).
find_path(IDIST_ASIO_INCLUDE asio.hpp)

if(NOT IDIST_WITH_MPI STREQUAL "OFF")
  set(MPI_CXX_SKIP_MPICXX TRUE)  # the C API only; no deprecated C++ bindings
  find_package(MPI COMPONENTS CXX QUIET)
endif()
idist_resolve(MPI MPI_CXX_FOUND)

if(NOT IDIST_WITH_GLOO STREQUAL "OFF")
  find_package(Gloo CONFIG QUIET)
  if(Gloo_FOUND AND IDIST_ASIO_INCLUDE)
    set(IDIST_GLOO_DEPS_FOUND TRUE)
  endif()
endif()
idist_resolve(GLOO IDIST_GLOO_DEPS_FOUND)

if(NOT IDIST_WITH_NCCL STREQUAL "OFF")
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
  find_package(NCCL QUIET)
  if(CUDAToolkit_FOUND AND NCCL_FOUND AND IDIST_ASIO_INCLUDE)
    set(IDIST_NCCL_DEPS_FOUND TRUE)
  endif()
endif()
idist_resolve(NCCL IDIST_NCCL_DEPS_FOUND)

if(NOT IDIST_WITH_TORCH STREQUAL "OFF")
  find_package(Torch QUIET)
endif()
idist_resolve(TORCH TORCH_FOUND)
# Whether the LibTorch found was built with CUDA (PyTorch's downloads and wheels; Debian's is CPU-only):
# its CMake config then lists its CUDA libraries.
set(IDIST_TORCH_HAS_CUDA OFF)
if(IDIST_HAVE_TORCH AND (TARGET c10_cuda OR TORCH_CUDA_LIBRARIES))
  set(IDIST_TORCH_HAS_CUDA ON)
endif()
message(STATUS "idist: LibTorch with CUDA = ${IDIST_TORCH_HAS_CUDA}")
# Code compiled against LibTorch uses fmt header-only: LibTorch 2.x ships its own fmt headers in its
# include directory, which then shadow the system's, and their symbols would not be in the system's
# libfmt (LibTorch 2.11 bundles fmt 12; Debian 12 has fmt 9). Header-only, each target uses whichever
# fmt its include path finds, consistently; libidist itself is compiled without LibTorch's headers.
set(IDIST_FMT_WITH_TORCH fmt::fmt-header-only)

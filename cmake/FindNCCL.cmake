# FindNCCL: locates NCCL's header and library.
#
# Search order:
#   1. NCCL_ROOT or NCCL_HOME (CMake variable or environment variable). When one is given, ONLY it is
#      searched: pointing it at a directory without NCCL means "build without NCCL".
#   2. The CUDA toolkit: CUDAToolkit_LIBRARY_ROOT / CUDAToolkit_ROOT (after find_package(CUDAToolkit)),
#      $CUDA_HOME, $CUDA_PATH, /usr/local/cuda.
#   3. The system paths, where Debian / Ubuntu's libnccl-dev installs it (/usr/include/nccl.h,
#      /usr/lib/<multiarch>/libnccl.so; CMake adds the multiarch directory itself).
#
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION (from nccl.h) and the imported
# target NCCL::NCCL.
set(_nccl_roots)
foreach(_v NCCL_ROOT NCCL_HOME)
  if(DEFINED ${_v} AND NOT "${${_v}}" STREQUAL "")
    list(APPEND _nccl_roots "${${_v}}")
  elseif(DEFINED ENV{${_v}} AND NOT "$ENV{${_v}}" STREQUAL "")
    list(APPEND _nccl_roots "$ENV{${_v}}")
  endif()
endforeach()

# A changed NCCL_ROOT / NCCL_HOME invalidates what an earlier configure cached.
if(NOT "${_nccl_roots}" STREQUAL "${_IDIST_NCCL_SEARCHED_ROOTS}")
  unset(NCCL_INCLUDE_DIR CACHE)
  unset(NCCL_LIBRARY CACHE)
  set(_IDIST_NCCL_SEARCHED_ROOTS "${_nccl_roots}" CACHE INTERNAL "NCCL_ROOT / NCCL_HOME of the last NCCL search")
endif()

set(_nccl_lib_suffixes lib lib64 lib/x86_64-linux-gnu lib/aarch64-linux-gnu lib/powerpc64le-linux-gnu
    targets/x86_64-linux/lib targets/sbsa-linux/lib)
if(_nccl_roots)
  find_path(NCCL_INCLUDE_DIR nccl.h PATHS ${_nccl_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
  find_library(NCCL_LIBRARY NAMES nccl PATHS ${_nccl_roots} PATH_SUFFIXES ${_nccl_lib_suffixes} NO_DEFAULT_PATH)
else()
  set(_nccl_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH} /usr/local/cuda)
  if(CUDAToolkit_INCLUDE_DIRS)
    list(APPEND _nccl_hints ${CUDAToolkit_INCLUDE_DIRS}/..)
  endif()
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY NAMES nccl HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES ${_nccl_lib_suffixes})
endif()

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _nccl_major "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _nccl_minor "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH +([0-9]+).*" "\\1" _nccl_patch "${_nccl_ver}")
  set(NCCL_VERSION "${_nccl_major}.${_nccl_minor}.${_nccl_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
unset(_nccl_roots)
unset(_nccl_hints)
unset(_nccl_lib_suffixes)

# FindNCCL: locates NCCL's header and library.
# Searched: NCCL_ROOT / NCCL_HOME (CMake or environment), the CUDA toolkit directory, then the
# system paths where Debian / Ubuntu's libnccl-dev installs it.
# Defines NCCL_FOUND, NCCL_INCLUDE_DIR, NCCL_LIBRARY, NCCL_VERSION and the imported target NCCL::NCCL.
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${NCCL_HOME} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT}
    ${CUDAToolkit_ROOT} $ENV{CUDA_HOME} /usr/local/cuda)
find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_hints} PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64 lib/x86_64-linux-gnu)
if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" _maj "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" _min "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH +([0-9]+).*" "\\1" _pat "${_nccl_ver}")
  set(NCCL_VERSION "${_maj}.${_min}.${_pat}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR VERSION_VAR NCCL_VERSION)
if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                              INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)

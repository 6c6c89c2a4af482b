# Installs libidist, its headers and a CMake package so that consumers can
#   find_package(idist CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE idist::idist)      # or idist::torch for the LibTorch layer
# (find_package(idist CONFIG REQUIRED COMPONENTS torch) requires the latter; the package then finds
# Torch itself, see idistConfig.cmake.in).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(IDIST_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/idist)
set(_idist_targets idist)
if(IDIST_HAVE_TORCH)
  list(APPEND _idist_targets idist_torch)
endif()

# An installed library finds its siblings in its own directory (libidist_torch needs libidist, which a
# program using only the LibTorch layer does not load itself when linked with --as-needed), and the
# libraries it was linked with outside the system directories (a downloaded LibTorch, CUDA, MPI).
set_target_properties(${_idist_targets} PROPERTIES INSTALL_RPATH "$ORIGIN" INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS ${_idist_targets} EXPORT idistTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/idist DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.hpp")
install(FILES ${PROJECT_BINARY_DIR}/include/idist/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/idist)
install(EXPORT idistTargets NAMESPACE idist:: DESTINATION ${IDIST_CMAKE_DIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/idistConfig.cmake.in
  ${PROJECT_BINARY_DIR}/idistConfig.cmake INSTALL_DESTINATION ${IDIST_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/idistConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/idistConfig.cmake ${PROJECT_BINARY_DIR}/idistConfigVersion.cmake
  DESTINATION ${IDIST_CMAKE_DIR})

# The `docs` target: Doxygen HTML of the public headers in <build>/docs/html, failing on any warning
# (an undocumented public declaration included). Absent, with a note, when Doxygen is not installed.
find_package(Doxygen QUIET)
if(DOXYGEN_FOUND)
  set(IDIST_DOCS_OUTPUT ${PROJECT_BINARY_DIR}/docs)
  configure_file(${PROJECT_SOURCE_DIR}/docs/Doxyfile.in ${PROJECT_BINARY_DIR}/Doxyfile @ONLY)
  add_custom_target(docs
    COMMAND ${DOXYGEN_EXECUTABLE} ${PROJECT_BINARY_DIR}/Doxyfile
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    COMMENT "Doxygen: the public API in ${IDIST_DOCS_OUTPUT}/html (warnings are errors)"
    VERBATIM)
else()
  message(STATUS "idist: Doxygen not found; no docs target (scripts/install-deps.sh installs it)")
endif()

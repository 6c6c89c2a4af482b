// Context of docs/fault-tolerance.md's record() program: run() succeeds, or throws when
// DOCS_RUN_THROWS is set, so that the test sees record()'s exit status and error file.
#pragma once

#include <cstdlib>
#include <stdexcept>

inline int run(int, char**) {
  if (std::getenv("DOCS_RUN_THROWS")) throw std::runtime_error("docs: run() failed on purpose");
  return 0;
}

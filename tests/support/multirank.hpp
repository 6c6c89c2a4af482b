#pragma once
// Helpers for tests that run on several ranks at once (under mpirun or spawned workers).
#include <string>

namespace idist::test {

/// The backend the test binary runs on: the IDIST_TEST_BACKEND environment variable ("serial" when
/// unset). Set by the ctest registration functions in tests/CMakeLists.txt.
std::string backend_under_test();

}  // namespace idist::test

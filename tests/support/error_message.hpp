#pragma once
// The message of the idist error a callable throws, for tests that check what an error names.
#include <functional>
#include <string>

#include "idist/error.hpp"

namespace idist::test {

/// Runs `fn` and returns what() of the ValueError it throws, or "" when it throws none.
inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

}  // namespace idist::test

// Group value type.
#include "idist/group.hpp"

#include <utility>

#include <fmt/format.h>

namespace idist {

Group::Group(std::vector<int> ranks) : ranks_(std::move(ranks)) {}

std::string Group::str() const {
  if (is_world()) return "world";
  return fmt::format("[{}]", fmt::join(ranks_, ", "));
}

}  // namespace idist

// Group value type.
#include "idist/group.hpp"

#include <utility>

namespace idist {

Group::Group(std::vector<int> ranks) : ranks_(std::move(ranks)) {}

std::string Group::str() const {
  if (is_world()) return "world";
  std::string s = "[";
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(ranks_[i]);
  }
  return s + "]";
}

}  // namespace idist

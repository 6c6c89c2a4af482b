#include "backend_kit/op_family.hpp"

#include <string_view>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::backend_kit {

namespace {

// The do_* function of `family` and what it takes.
std::string_view describe(OpFamily family) {
  switch (family) {
    case OpFamily::Reduction: return "do_reduce, which takes reductions";
    case OpFamily::Gathering: return "do_gather, which takes gatherings";
    case OpFamily::Distribution: return "do_distribute, which takes distributions";
    case OpFamily::PointToPoint: return "do_point_to_point, which takes send and recv";
  }
  return "a do_* function of another family";
}

}  // namespace

void outside_family(OpType op, OpFamily family) {
  throw Error(fmt::format("idist internal error: {} (OpType {}) reached the backend's {} only", to_string(op),
                          static_cast<int>(op), describe(family)));
}

}  // namespace idist::backend_kit

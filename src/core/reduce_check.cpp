#include "core/reduce_check.hpp"

#include <string>

#include "idist/error.hpp"

namespace idist::core {

void check_reduce_op(DType dtype, ReduceOp op) {
  if (is_floating(dtype) && (op == ReduceOp::And || op == ReduceOp::Or))
    throw ValueError("all_reduce: op " + std::string(to_string(op)) + " is bitwise and cannot reduce " +
                     std::string(to_string(dtype)) + " data; expected an integer or bool element type");
}

}  // namespace idist::core

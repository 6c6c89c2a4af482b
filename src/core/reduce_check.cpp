#include "core/reduce_check.hpp"

#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/op_type.hpp"

namespace idist::core {

void check_reduce_op(DType dtype, ReduceOp op, OpType which) {
  if (is_floating(dtype) && (op == ReduceOp::And || op == ReduceOp::Or))
    throw ValueError(
        fmt::format("{}: op {} is bitwise and cannot reduce {} data; expected an integer or bool element type",
                    to_string(which), to_string(op), to_string(dtype)));
}

}  // namespace idist::core

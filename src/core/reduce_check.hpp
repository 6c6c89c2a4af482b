#pragma once
// Validation of (element type, reduction) pairs, shared by every backend.
#include "idist/op_type.hpp"
#include "idist/types.hpp"

namespace idist::core {

/// @throws ValueError naming the operation `which` when `op` cannot be applied to `dtype` (And / Or
///         on floating types).
void check_reduce_op(DType dtype, ReduceOp op, OpType which = OpType::AllReduce);

}  // namespace idist::core

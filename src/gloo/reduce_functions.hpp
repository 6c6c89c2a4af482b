#pragma once
// Element-wise reduction functions handed to gloo::allreduce, one per (element type, op).
#include <cstddef>

#include "idist/types.hpp"

namespace idist::gloo_backend {

/// gloo's reduction signature: out[i] = a[i] (op) b[i] for n elements (out may alias a or b).
using ReduceFn = void (*)(void* out, const void* a, const void* b, std::size_t n);

/// The reduction of `op` on `dtype` elements. float16 and bfloat16 use core::reduce16; bool and
/// the bitwise And / Or are ours (gloo has none). On bool, Sum and Max act as
/// Or, Product and Min as And, so that the result stays a bool.
/// @throws ValueError for And / Or on a floating type.
ReduceFn reduce_function(DType dtype, ReduceOp op);

}  // namespace idist::gloo_backend

#pragma once
// Reductions on the host, shared by every backend that reduces in its own code: gloo (its
// allreduce calls a reduction function per pair of buffers) and nccl (the fallback for what NCCL
// cannot reduce: int16, bitwise And / Or). Pure: no backend, no device.
#include <cstddef>

#include "idist/types.hpp"

namespace idist::backend_kit {

/// out[i] = a[i] op b[i] for n elements; `out` may alias `a` or `b` (gloo's reduction signature).
using ReduceFn = void (*)(void* out, const void* a, const void* b, std::size_t n);

/// The element-wise reduction of `op` on `dtype`, with idist's semantics on every backend:
/// integer Sum / Product wrap around (two's complement); And / Or are bitwise on integers and
/// logical on bool; on bool Sum and Max act as Or, Product and Min as And, so that the result
/// stays a bool (any non-zero byte is true); float16 and bfloat16 go through reduce16 (computed in
/// float, rounded to nearest even).
/// @throws ValueError for And / Or on a floating type (core::check_reduce_op).
ReduceFn reduce_function(DType dtype, ReduceOp op);

/// out[i] = rows[0][i] op rows[1][i] op ... op rows[nranks-1][i], where `rows` holds `nranks` rows
/// of `count` elements of `dtype` back to back (what an all-gather produces), reduced pairwise in
/// rank order with reduce_function(). `out` may alias row 0 but no other row.
/// @throws ValueError for And / Or on a floating type.
void reduce_rows(void* out, const void* rows, std::size_t count, int nranks, DType dtype, ReduceOp op);

}  // namespace idist::backend_kit

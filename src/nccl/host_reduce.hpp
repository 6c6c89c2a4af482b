#pragma once
// Host-side reduction of all-gathered rows: the fallback for what NCCL cannot reduce (int16, bitwise
// And / Or on integers). Pure: no device needed.
#include <cstddef>

#include "idist/types.hpp"

namespace idist::nccl_backend {

/// out[i] = rows[0][i] op rows[1][i] op ... op rows[nranks-1][i], where `rows` holds `nranks` rows of
/// `count` elements of `dtype` back to back (what ncclAllGather produces), reduced in rank order.
/// Semantics are idist's: integer Sum / Product wrap around (two's complement), And / Or are bitwise
/// on integers and logical on bool, Sum / Product on bool are Or / And, half and bfloat16 are
/// accumulated in float and rounded once. `out` may alias row 0 but no other row.
/// @throws ValueError for And / Or on a floating type.
void reduce_rows(void* out, const void* rows, std::size_t count, int nranks, DType dtype, ReduceOp op);

}  // namespace idist::nccl_backend

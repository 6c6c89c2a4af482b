#pragma once
// Element-wise reductions of 16-bit floats (float16, bfloat16) in bulk, shared by every backend that
// reduces them on the host (gloo's reduction functions, mpi's user-defined ops). Each block is widened
// to float, reduced, and rounded back to nearest even once: torch's CPU semantics, at memory speed.
#include <cstddef>

#include "idist/types.hpp"

namespace idist::backend_kit {

/// out[i] = a[i] op b[i] for `n` elements of `dtype` (Float16 or BFloat16), computed in float and
/// rounded to nearest even; Min / Max propagate NaN (as torch). `out` may alias `a` or `b`.
/// float16 conversions use the CPU's F16C instructions when it has them (the same results).
/// @throws ValueError for another dtype, or And / Or (not defined on floating types).
void reduce16(DType dtype, ReduceOp op, void* out, const void* a, const void* b, std::size_t n);

}  // namespace idist::backend_kit

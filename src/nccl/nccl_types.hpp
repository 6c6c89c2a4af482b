#pragma once
// How idist's element types and reductions map onto NCCL's (pure: no device needed).
#include <nccl.h>

#include <optional>

#include "idist/types.hpp"

namespace idist::nccl_backend {

/// NCCL's element type for `t`, or std::nullopt where NCCL has none (int16, uint16; bfloat16 before
/// NCCL 2.10). Bool maps to ncclUint8: a C++ bool is one byte holding 0 or 1; uint32 and uint64 to
/// ncclUint32 and ncclUint64.
std::optional<ncclDataType_t> to_nccl(DType t) noexcept;

/// NCCL's reduction for Sum, Product, Min and Max; std::nullopt for And / Or (NCCL has no bitwise
/// reductions).
std::optional<ncclRedOp_t> to_nccl(ReduceOp op) noexcept;

/// How one all_reduce of (dtype, op) runs on NCCL.
struct ReducePlan {
  enum class Kind {
    /// One ncclAllReduce with `type` and `op`.
    Native,
    /// NCCL cannot reduce this pair: the rows are all-gathered, reduced on the host in stream order
    /// (cudaLaunchHostFunc) and copied back. Exact, but moves world-size times the data.
    HostFallback,
  };
  Kind kind = Kind::Native;
  ncclDataType_t type = ncclUint8;  ///< for Native
  ncclRedOp_t op = ncclSum;         ///< for Native
  friend bool operator==(const ReducePlan&, const ReducePlan&) = default;
};

/// How NCCL reduces `dtype` with `op` (all_reduce now; every reducing operation uses the same rules):
/// - bool: Sum / Max / Or -> ncclMax on uint8, Product / Min / And -> ncclMin on uint8 (logical, as
///   idist's bool semantics require);
/// - integers: Sum / Product / Min / Max natively; And / Or (bitwise) through the host fallback;
/// - int16 and uint16 (no NCCL type): every op through the host fallback;
/// - float16, bfloat16, float32, float64: natively (bfloat16 on NCCL < 2.10 through the fallback).
/// @throws ValueError for And / Or on a floating type (the same check every backend makes).
ReducePlan reduction_for(DType dtype, ReduceOp op);

}  // namespace idist::nccl_backend

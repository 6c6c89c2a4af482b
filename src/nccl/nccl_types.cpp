#include "nccl/nccl_types.hpp"

#include "core/reduce_check.hpp"

namespace idist::nccl_backend {

std::optional<ncclDataType_t> to_nccl(DType t) noexcept {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return ncclUint8;
    case DType::Int8: return ncclInt8;
    case DType::Int16: return std::nullopt;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16:
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
      return ncclBfloat16;
#else
      return std::nullopt;
#endif
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::UInt16: return std::nullopt;
    case DType::UInt32: return ncclUint32;
    case DType::UInt64: return ncclUint64;
  }
  return std::nullopt;
}

std::optional<ncclRedOp_t> to_nccl(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::And:
    case ReduceOp::Or: return std::nullopt;
  }
  return std::nullopt;
}

ReducePlan reduction_for(DType dtype, ReduceOp op) {
  core::check_reduce_op(dtype, op);
  if (dtype == DType::Bool) {
    // Logical semantics on 0 / 1 bytes: "any" is a max, "all" is a min.
    const bool any = op == ReduceOp::Sum || op == ReduceOp::Max || op == ReduceOp::Or;
    return ReducePlan{ReducePlan::Kind::Native, ncclUint8, any ? ncclMax : ncclMin};
  }
  const std::optional<ncclDataType_t> type = to_nccl(dtype);
  const std::optional<ncclRedOp_t> nop = to_nccl(op);
  if (!type || !nop) return ReducePlan{ReducePlan::Kind::HostFallback, ncclUint8, ncclSum};
  return ReducePlan{ReducePlan::Kind::Native, *type, *nop};
}

}  // namespace idist::nccl_backend

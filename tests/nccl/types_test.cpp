// DType -> ncclDataType_t, ReduceOp -> ncclRedOp_t and the all-reduce plans (no GPU needed).
#include <gtest/gtest.h>

#include <array>

#include "idist/error.hpp"
#include "nccl/nccl_types.hpp"

namespace idist::nccl_backend {
namespace {

using Kind = ReducePlan::Kind;

constexpr std::array kAllTypes = {DType::Bool,  DType::UInt8,   DType::Int8,     DType::Int16,   DType::Int32,
                                  DType::Int64, DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
constexpr std::array kAllOps = {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min,
                                ReduceOp::Max, ReduceOp::And,     ReduceOp::Or};

TEST(NcclTypes, ElementTypesMapToNcclTypesOfTheSameWidth) {
  EXPECT_EQ(to_nccl(DType::Bool), ncclUint8);
  EXPECT_EQ(to_nccl(DType::UInt8), ncclUint8);
  EXPECT_EQ(to_nccl(DType::Int8), ncclInt8);
  EXPECT_EQ(to_nccl(DType::Int32), ncclInt32);
  EXPECT_EQ(to_nccl(DType::Int64), ncclInt64);
  EXPECT_EQ(to_nccl(DType::Float16), ncclFloat16);
  EXPECT_EQ(to_nccl(DType::Float32), ncclFloat32);
  EXPECT_EQ(to_nccl(DType::Float64), ncclFloat64);
  // NCCL has no 16-bit integer type.
  EXPECT_EQ(to_nccl(DType::Int16), std::nullopt);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
  EXPECT_EQ(to_nccl(DType::BFloat16), ncclBfloat16);
#else
  EXPECT_EQ(to_nccl(DType::BFloat16), std::nullopt);
#endif
}

TEST(NcclTypes, ReductionsMapExceptTheBitwiseOnes) {
  EXPECT_EQ(to_nccl(ReduceOp::Sum), ncclSum);
  EXPECT_EQ(to_nccl(ReduceOp::Product), ncclProd);
  EXPECT_EQ(to_nccl(ReduceOp::Min), ncclMin);
  EXPECT_EQ(to_nccl(ReduceOp::Max), ncclMax);
  EXPECT_EQ(to_nccl(ReduceOp::And), std::nullopt);
  EXPECT_EQ(to_nccl(ReduceOp::Or), std::nullopt);
}

TEST(NcclTypes, BoolReducesLogicallyThroughMaxAndMinOnBytes) {
  // Sum / Max / Or mean "any", Product / Min / And mean "all" on bool.
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Or})
    EXPECT_EQ(reduction_for(DType::Bool, op), (ReducePlan{Kind::Native, ncclUint8, ncclMax})) << to_string(op);
  for (ReduceOp op : {ReduceOp::Product, ReduceOp::Min, ReduceOp::And})
    EXPECT_EQ(reduction_for(DType::Bool, op), (ReducePlan{Kind::Native, ncclUint8, ncclMin})) << to_string(op);
}

TEST(NcclTypes, ArithmeticOnNcclTypesIsNative) {
  for (DType t : kAllTypes) {
    if (t == DType::Bool || !to_nccl(t)) continue;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
      const ReducePlan plan = reduction_for(t, op);
      EXPECT_EQ(plan.kind, Kind::Native) << to_string(t) << " " << to_string(op);
      EXPECT_EQ(plan.type, *to_nccl(t)) << to_string(t);
      EXPECT_EQ(plan.op, *to_nccl(op)) << to_string(op);
    }
  }
}

TEST(NcclTypes, HalfAndBFloat16SumNatively) {
  EXPECT_EQ(reduction_for(DType::Float16, ReduceOp::Sum), (ReducePlan{Kind::Native, ncclFloat16, ncclSum}));
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
  EXPECT_EQ(reduction_for(DType::BFloat16, ReduceOp::Sum), (ReducePlan{Kind::Native, ncclBfloat16, ncclSum}));
#endif
}

TEST(NcclTypes, BitwiseOnIntegersAndEverythingOnInt16UseTheHostFallback) {
  for (DType t : {DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64})
    for (ReduceOp op : {ReduceOp::And, ReduceOp::Or})
      EXPECT_EQ(reduction_for(t, op).kind, Kind::HostFallback) << to_string(t) << " " << to_string(op);
  for (ReduceOp op : kAllOps) EXPECT_EQ(reduction_for(DType::Int16, op).kind, Kind::HostFallback) << to_string(op);
}

TEST(NcclTypes, UnsignedWidthsAreNativeExceptUInt16) {
  EXPECT_EQ(to_nccl(DType::UInt32), ncclUint32);
  EXPECT_EQ(to_nccl(DType::UInt64), ncclUint64);
  EXPECT_EQ(to_nccl(DType::UInt16), std::nullopt);  // NCCL has no 16-bit integer type
  EXPECT_EQ(reduction_for(DType::UInt32, ReduceOp::Sum), (ReducePlan{Kind::Native, ncclUint32, ncclSum}));
  EXPECT_EQ(reduction_for(DType::UInt64, ReduceOp::Max), (ReducePlan{Kind::Native, ncclUint64, ncclMax}));
  EXPECT_EQ(reduction_for(DType::UInt64, ReduceOp::Product), (ReducePlan{Kind::Native, ncclUint64, ncclProd}));
  for (ReduceOp op : kAllOps) EXPECT_EQ(reduction_for(DType::UInt16, op).kind, Kind::HostFallback) << to_string(op);
  for (DType t : {DType::UInt32, DType::UInt64})
    for (ReduceOp op : {ReduceOp::And, ReduceOp::Or})
      EXPECT_EQ(reduction_for(t, op).kind, Kind::HostFallback) << to_string(t) << " " << to_string(op);
}

TEST(NcclTypes, BitwiseOnFloatingTypesIsAValueErrorNamingTheOpAndType) {
  for (DType t : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
    for (ReduceOp op : {ReduceOp::And, ReduceOp::Or}) {
      try {
        reduction_for(t, op);
        ADD_FAILURE() << "no error for " << to_string(t) << " " << to_string(op);
      } catch (const ValueError& e) {
        EXPECT_NE(std::string(e.what()).find(std::string(to_string(op))), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(std::string(to_string(t))), std::string::npos) << e.what();
      }
    }
  }
}

TEST(NcclTypes, EveryPairHasAPlanOrAValueError) {
  int planned = 0, rejected = 0;
  for (DType t : kAllTypes) {
    for (ReduceOp op : kAllOps) {
      try {
        (void)reduction_for(t, op);
        ++planned;
      } catch (const ValueError&) {
        ++rejected;
      }
    }
  }
  EXPECT_EQ(rejected, 4 * 2);  // four floating types x {And, Or}
  EXPECT_EQ(planned + rejected, int(kAllTypes.size() * kAllOps.size()));
}

}  // namespace
}  // namespace idist::nccl_backend

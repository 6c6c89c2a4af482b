// DType / ReduceOp to MPI handles, and the user-defined half and bfloat16 reductions.
#include "mpi/mpi_types.hpp"

#include <cstdint>

#include "backend_kit/reduce16.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

namespace {

// One pairwise step of a 16-bit floating reduction, inout[i] = in[i] op inout[i], in blocks
// (backend_kit/reduce16.hpp). MPI calls it with `len` elements of the MPI_UINT16_T carrier type.
template <DType D, ReduceOp Op>
void reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  backend_kit::reduce16(D, Op, inout, in, inout, std::size_t(*len));
}

template <DType D>
void create_float16_ops(std::array<MPI_Op, 6>& ops, int rank) {
  const auto make = [&](MPI_User_function* fn, ReduceOp op) {
    check_mpi(MPI_Op_create(fn, /*commute=*/1, &ops[std::size_t(op)]), "MPI_Op_create", rank);
  };
  make(&reduce16<D, ReduceOp::Sum>, ReduceOp::Sum);
  make(&reduce16<D, ReduceOp::Product>, ReduceOp::Product);
  make(&reduce16<D, ReduceOp::Min>, ReduceOp::Min);
  make(&reduce16<D, ReduceOp::Max>, ReduceOp::Max);
  // And / Or stay MPI_OP_NULL: core::check_reduce_op rejects them for floating types.
}

}  // namespace

void TypeMap::create(int rank) {
  if (created_) return;
  for (auto& row : ops_) row.fill(MPI_OP_NULL);

  types_[std::size_t(DType::Bool)] = MPI_C_BOOL;
  types_[std::size_t(DType::UInt8)] = MPI_UINT8_T;
  types_[std::size_t(DType::Int8)] = MPI_INT8_T;
  types_[std::size_t(DType::Int16)] = MPI_INT16_T;
  types_[std::size_t(DType::Int32)] = MPI_INT32_T;
  types_[std::size_t(DType::Int64)] = MPI_INT64_T;
  types_[std::size_t(DType::Float16)] = MPI_UINT16_T;
  types_[std::size_t(DType::BFloat16)] = MPI_UINT16_T;
  types_[std::size_t(DType::Float32)] = MPI_FLOAT;
  types_[std::size_t(DType::Float64)] = MPI_DOUBLE;
  types_[std::size_t(DType::UInt16)] = MPI_UINT16_T;
  types_[std::size_t(DType::UInt32)] = MPI_UINT32_T;
  types_[std::size_t(DType::UInt64)] = MPI_UINT64_T;

  // bool: the result must stay a bool, so Sum is logical or and Product logical and (as torch).
  auto& b = ops_[std::size_t(DType::Bool)];
  b[std::size_t(ReduceOp::Sum)] = MPI_LOR;
  b[std::size_t(ReduceOp::Product)] = MPI_LAND;
  b[std::size_t(ReduceOp::Min)] = MPI_LAND;
  b[std::size_t(ReduceOp::Max)] = MPI_LOR;
  b[std::size_t(ReduceOp::And)] = MPI_LAND;
  b[std::size_t(ReduceOp::Or)] = MPI_LOR;

  // Unsigned MPI_SUM / MPI_PROD wrap around modulo 2^bits, as idist's host reductions do.
  for (DType t : {DType::UInt8, DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt16, DType::UInt32,
                  DType::UInt64, DType::Float32, DType::Float64}) {
    auto& row = ops_[std::size_t(t)];
    row[std::size_t(ReduceOp::Sum)] = MPI_SUM;
    row[std::size_t(ReduceOp::Product)] = MPI_PROD;
    row[std::size_t(ReduceOp::Min)] = MPI_MIN;
    row[std::size_t(ReduceOp::Max)] = MPI_MAX;
    if (!is_floating(t)) {
      row[std::size_t(ReduceOp::And)] = MPI_BAND;
      row[std::size_t(ReduceOp::Or)] = MPI_BOR;
    }
  }

  created_ = true;  // before the user ops, so that release() frees whatever was created
  create_float16_ops<DType::Float16>(ops_[std::size_t(DType::Float16)], rank);
  create_float16_ops<DType::BFloat16>(ops_[std::size_t(DType::BFloat16)], rank);
}

void TypeMap::release() noexcept {
  if (!created_) return;
  for (DType t : {DType::Float16, DType::BFloat16})
    for (MPI_Op& op : ops_[std::size_t(t)])
      if (op != MPI_OP_NULL) MPI_Op_free(&op);  // sets op to MPI_OP_NULL
  created_ = false;
}

}  // namespace idist::mpi_backend

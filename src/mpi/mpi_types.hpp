#pragma once
// idist element types and reductions as MPI datatypes and MPI_Op handles.
#include <mpi.h>

#include <array>
#include <cstddef>

#include "idist/types.hpp"

namespace idist::mpi_backend {

/// The MPI datatype and reduction handle for every (DType, ReduceOp) pair idist supports.
///
/// Built-in MPI types and ops cover bool (MPI_C_BOOL with logical ops), the signed and unsigned
/// integers (MPI_INTn_T / MPI_UINTn_T; MPI_BAND / MPI_BOR for And / Or) and float / double. MPI has no half or
/// bfloat16, so those travel as MPI_UINT16_T and are reduced by user-defined, commutative ops (MPI_Op_create) that
/// compute in float and round back to 16 bits after every pairwise step.
///
/// Lookups are array indexing, so that the all-reduce hot path does no searching.
class TypeMap {
 public:
  TypeMap() = default;
  TypeMap(const TypeMap&) = delete;
  TypeMap& operator=(const TypeMap&) = delete;

  /// Fills the tables and creates the half / bfloat16 reductions. Needs an initialized MPI.
  /// @throws BackendError when MPI_Op_create fails.
  void create(int rank);

  /// Frees the user-defined reductions (MPI_Op_free). Call before MPI_Finalize; idempotent.
  void release() noexcept;

  /// The MPI datatype that carries elements of `t`.
  MPI_Datatype datatype(DType t) const noexcept { return types_[std::size_t(t)]; }

  /// The MPI reduction applying `op` to elements of `t`. The pair must have passed
  /// core::check_reduce_op (And / Or on floating types map to MPI_OP_NULL).
  MPI_Op op(DType t, ReduceOp op) const noexcept { return ops_[std::size_t(t)][std::size_t(op)]; }

 private:
  static constexpr std::size_t kTypes = kDTypeCount;
  static constexpr std::size_t kOps = std::size_t(ReduceOp::Or) + 1;
  std::array<MPI_Datatype, kTypes> types_{};
  std::array<std::array<MPI_Op, kOps>, kTypes> ops_{};
  bool created_ = false;
};

}  // namespace idist::mpi_backend

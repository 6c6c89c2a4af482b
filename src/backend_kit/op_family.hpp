#pragma once
// How a backend's do_* functions dispatch: a `switch` over the descriptor's OpType with one case per
// operation of the family and no `default`, the other OpTypes named by the list below. libidist is
// built with -Werror=switch, so a new OpType compiles only once every backend handles it in its
// family's switch (or refuses it with unsupported()) and the other families' lists below name it.
//
//   switch (r.op) {
//     case OpType::AllReduce: return all_reduce(r, how);
//     ...
//     IDIST_OPTYPES_OUTSIDE_REDUCTION: break;
//   }
//   backend_kit::outside_family(r.op, backend_kit::OpFamily::Reduction);
#include "idist/op_type.hpp"

namespace idist::backend_kit {

/// The descriptor families of idist/operation.hpp, one per do_* function that takes an OpType.
enum class OpFamily {
  Reduction,     ///< do_reduce: AllReduce, Reduce, ReduceScatter, ReduceScatterV
  Gathering,     ///< do_gather: AllGather, AllGatherV, Gather
  Distribution,  ///< do_distribute: Broadcast, Scatter, AllToAll, AllToAllV
  PointToPoint,  ///< do_point_to_point: Send, Recv
};

/// An internal error: `op` reached the do_* function of `family`, which does not take it (the front
/// door sends each operation to its own family). Also for a value outside the OpType enum.
/// @throws Error naming the operation and the family.
[[noreturn]] void outside_family(OpType op, OpFamily family);

}  // namespace idist::backend_kit

// The case labels of the OpTypes outside each family (the colon after the last one is the caller's).
// A label listed twice in one switch, or an OpType missing from it, does not compile.

#define IDIST_OPTYPES_OUTSIDE_REDUCTION \
  case ::idist::OpType::AllGather:      \
  case ::idist::OpType::AllGatherV:     \
  case ::idist::OpType::Gather:         \
  case ::idist::OpType::Broadcast:      \
  case ::idist::OpType::Scatter:        \
  case ::idist::OpType::AllToAll:       \
  case ::idist::OpType::AllToAllV:      \
  case ::idist::OpType::Send:           \
  case ::idist::OpType::Recv:           \
  case ::idist::OpType::Barrier:        \
  case ::idist::OpType::MonitoredBarrier

#define IDIST_OPTYPES_OUTSIDE_GATHERING \
  case ::idist::OpType::AllReduce:      \
  case ::idist::OpType::Reduce:         \
  case ::idist::OpType::ReduceScatter:  \
  case ::idist::OpType::ReduceScatterV: \
  case ::idist::OpType::Broadcast:      \
  case ::idist::OpType::Scatter:        \
  case ::idist::OpType::AllToAll:       \
  case ::idist::OpType::AllToAllV:      \
  case ::idist::OpType::Send:           \
  case ::idist::OpType::Recv:           \
  case ::idist::OpType::Barrier:        \
  case ::idist::OpType::MonitoredBarrier

#define IDIST_OPTYPES_OUTSIDE_DISTRIBUTION \
  case ::idist::OpType::AllReduce:         \
  case ::idist::OpType::Reduce:            \
  case ::idist::OpType::ReduceScatter:     \
  case ::idist::OpType::ReduceScatterV:    \
  case ::idist::OpType::AllGather:         \
  case ::idist::OpType::AllGatherV:        \
  case ::idist::OpType::Gather:            \
  case ::idist::OpType::Send:              \
  case ::idist::OpType::Recv:              \
  case ::idist::OpType::Barrier:           \
  case ::idist::OpType::MonitoredBarrier

#define IDIST_OPTYPES_OUTSIDE_POINT_TO_POINT \
  case ::idist::OpType::AllReduce:           \
  case ::idist::OpType::Reduce:              \
  case ::idist::OpType::ReduceScatter:       \
  case ::idist::OpType::ReduceScatterV:      \
  case ::idist::OpType::AllGather:           \
  case ::idist::OpType::AllGatherV:          \
  case ::idist::OpType::Gather:              \
  case ::idist::OpType::Broadcast:           \
  case ::idist::OpType::Scatter:             \
  case ::idist::OpType::AllToAll:            \
  case ::idist::OpType::AllToAllV:           \
  case ::idist::OpType::Barrier:             \
  case ::idist::OpType::MonitoredBarrier

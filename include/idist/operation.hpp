#pragma once
/// @file
/// What a backend receives for one operation, checked by ComputationModel's front door: one
/// descriptor per data-movement family (reductions, gathers, distributions from a root or between all
/// ranks), each naming its OpType, its buffers, its reduce op, its root as a position in the group, its
/// counts and the resolved group. A family takes new operations without new virtual functions.

#include <cstddef>
#include <span>

#include "idist/op_type.hpp"
#include "idist/process_group.hpp"
#include "idist/types.hpp"

namespace idist {

/// Data reduced with an operator. AllReduce: `in` and `out` are the same buffer (in place). Later
/// Reduce (the result in `out` on `root`) and ReduceScatter (`out` receives this rank's block).
struct Reduction {
  /// AllReduce.
  OpType op;
  /// What this rank contributes.
  ConstBuffer in;
  /// Where the result goes.
  Buffer out;
  /// The operator, valid for the element type (checked).
  ReduceOp reduce_op;
  /// Position in the group of the rank that receives the result; -1 where every rank does.
  int root;
  /// The group, of which this rank is a member.
  const ProcessGroup& group;
};

/// Blocks of every member concatenated in group rank order. AllGather: every rank contributes
/// in.count elements and out holds in.count * group size; AllGatherV: rank i contributes counts[i]
/// elements and out holds their sum. Later Gather (out significant on `root`).
struct Gathering {
  /// AllGather or AllGatherV.
  OpType op;
  /// This rank's block.
  ConstBuffer in;
  /// Every block, in group rank order (same element type as `in`, checked).
  Buffer out;
  /// AllGatherV: elements of each group rank (counts[group.rank()] == in.count, checked); empty for
  /// AllGather.
  std::span<const std::size_t> counts;
  /// Position in the group of the rank that receives the blocks; -1 where every rank does.
  int root;
  /// The group, of which this rank is a member.
  const ProcessGroup& group;
};

/// Data sent out from a root (Broadcast; later Scatter) or between all members (later AllToAll,
/// AllToAllV). Broadcast: `in` and `out` are the same buffer, read on the root and written on the
/// others.
struct Distribution {
  /// Broadcast.
  OpType op;
  /// What this rank sends.
  ConstBuffer in;
  /// What this rank receives.
  Buffer out;
  /// Elements per group rank where they differ (later AllToAllV); empty otherwise.
  std::span<const std::size_t> counts;
  /// Position in the group of the rank the data comes from; -1 where every rank sends.
  int root;
  /// The group, of which this rank is a member.
  const ProcessGroup& group;
};

}  // namespace idist

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

/// Data reduced with an operator. AllReduce: `in` and `out` are the same buffer (in place). Reduce:
/// `in` and `out` are the same buffer, which receives the result on `root` and is left unchanged on the
/// others. ReduceScatter: `in` holds group size blocks of out.count elements; `out` receives the
/// reduction of block group.rank(). ReduceScatterV: as ReduceScatter with blocks of counts[i] elements,
/// back to back.
struct Reduction {
  /// AllReduce, Reduce, ReduceScatter or ReduceScatterV.
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
  /// ReduceScatterV: the length of each group rank's block (in.count == sum(counts), out.count ==
  /// counts[group.rank()], checked); empty for the other operations.
  std::span<const std::size_t> counts{};
};

/// Blocks of every member concatenated in group rank order. AllGather: every rank contributes
/// in.count elements and out holds in.count * group size; AllGatherV: rank i contributes counts[i]
/// elements and out holds their sum. Gather: as AllGather, but `out` is significant on `root` only
/// (count 0 on the others).
struct Gathering {
  /// AllGather, AllGatherV or Gather.
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

/// Data sent out from a root (Broadcast, Scatter) or between all members (AllToAll, AllToAllV).
/// Broadcast: `in` and `out` are the same buffer, read on the root and written on the others.
/// Scatter: on the root `in` holds group size blocks of out.count elements, block i for group rank i
/// (count 0 on the others). AllToAll: `in` and `out` hold group size blocks of the same length; block
/// j of `in` goes to group rank j, block i of `out` comes from group rank i. AllToAllV: block j of
/// `in` has in_counts[j] elements, block i of `out` has counts[i], blocks back to back.
struct Distribution {
  /// Broadcast, Scatter, AllToAll or AllToAllV.
  OpType op;
  /// What this rank sends.
  ConstBuffer in;
  /// What this rank receives.
  Buffer out;
  /// AllToAllV: elements this rank receives from each group rank; empty otherwise.
  std::span<const std::size_t> counts;
  /// Position in the group of the rank the data comes from; -1 where every rank sends.
  int root;
  /// The group, of which this rank is a member.
  const ProcessGroup& group;
  /// AllToAllV: elements this rank sends to each group rank; empty otherwise.
  std::span<const std::size_t> in_counts = {};
};

/// A message between two ranks of the world (Send, Recv). Send reads `data`, Recv writes it; the two
/// sides agree on the element type, the count and the tag.
struct PointToPoint {
  /// Send or Recv.
  OpType op;
  /// The message: read by Send, written by Recv.
  Buffer data;
  /// The other rank (world rank, not this one).
  int peer;
  /// Tells messages between the same two ranks apart (non-negative); a Recv matches the Send of the
  /// same tag.
  int tag;
  /// The world group.
  const ProcessGroup& group;
};

}  // namespace idist

#pragma once
/// @file
/// Tensor overloads of ignite.distributed's collectives: all_reduce, all_gather, broadcast (with
/// safe mode) and all_gather_tensors_with_shapes, plus their non-blocking forms. Compiled into
/// idist_torch.
///
/// Common rules:
/// - Any strided tensor works: a tensor that is not contiguous, or that does not live where the
///   backend reads (host memory for serial / mpi / gloo, idist::device() for nccl), is staged in a
///   contiguous copy and the result is copied back into it (for async calls, when the Work is
///   waited for). A CUDA tensor on a CPU backend is therefore copied to the host and back.
/// - Element types: see to_dtype(); others raise ValueError before any communication.
/// - Results are written through the tensor's storage without recording an autograd operation
///   (as torch.distributed does).
/// - A rank outside `group` gets its input back unchanged.

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "idist/group.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"

namespace idist {

// ---------------------------------------------------------------------------------------------
// all_reduce

/// Non-blocking in-place reduction of `t` over `group` (torch.distributed.all_reduce with
/// async_op=True). The tensor is kept alive by the Work; its new values are visible after wait().
/// @throws ValueError for an undefined tensor, an unsupported dtype or an op the dtype cannot take.
Work all_reduce_async(const at::Tensor& t, ReduceOp op = ReduceOp::Sum, const Group& group = {});

/// Reduces `t` in place over `group` with `op` and returns it (same tensor object, same shape on
/// every rank). Mirrors ignite.distributed.all_reduce on a tensor.
/// @throws ValueError as all_reduce_async; TimeoutError after the timeout given at initialize().
at::Tensor all_reduce(at::Tensor t, ReduceOp op = ReduceOp::Sum, const Group& group = {});

/// all_reduce with ignite's op name ("SUM", "PRODUCT", "MIN", "MAX", "AND", "OR").
/// @throws ValueError for an unknown name.
inline at::Tensor all_reduce(at::Tensor t, std::string_view op, const Group& group = {}) {
  return all_reduce(std::move(t), parse_reduce_op(op), group);
}

// ---------------------------------------------------------------------------------------------
// all_gather

/// Non-blocking all_gather of tensors of the same shape on every rank: `out` receives the group's
/// tensors concatenated in rank order and must hold group size * in.numel() elements of in's dtype
/// (typically shape (group size * in.size(0), ...)).
/// @throws ValueError for undefined tensors, a dtype mismatch or a wrong element count.
Work all_gather_async(const at::Tensor& in, const at::Tensor& out, const Group& group = {});

/// Gathers `t` from every rank of `group` and returns the concatenation along dimension 0, in rank
/// order. The first dimension may differ between ranks (the shapes are exchanged first); the
/// other dimensions and the dtype must agree. A 0-dimensional tensor is treated as shape (1), so
/// the result has shape (group size). Mirrors ignite.distributed.all_gather on a tensor. The result
/// lives on t's device. A rank outside `group` gets `t` back.
/// @throws ValueError for an undefined tensor or unsupported dtype (before any communication), and
///         on every rank when the ranks' dtypes or trailing dimensions differ.
at::Tensor all_gather(const at::Tensor& t, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// broadcast

/// Non-blocking in-place broadcast of `t` (same shape and dtype on every rank) from world rank `src`.
/// @throws ValueError for an undefined tensor, an unsupported dtype or src outside [0, world size).
Work broadcast_async(const at::Tensor& t, int src = 0, const Group& group = {});

/// Returns rank `src`'s tensor on every rank. Mirrors ignite.distributed.broadcast on a tensor.
///
/// Without safe mode every rank passes a defined tensor of the source's shape and dtype, which is
/// filled in place and returned. With `safe_mode`, non-source ranks may pass an undefined tensor
/// (or one of another shape / dtype): the source first broadcasts its shape and dtype, and those
/// ranks get a new tensor on idist::device() (or on the device of the tensor they passed); a
/// tensor of the right shape and dtype is filled in place.
/// @throws ValueError when src is outside [0, world size); when the source passes an undefined
///         tensor ("source data can not be undefined" — on every rank in safe mode); when a
///         non-source rank passes an undefined tensor without safe mode ("safe_mode should be
///         true ..."); for an unsupported dtype (on every rank in safe mode).
at::Tensor broadcast(at::Tensor t, int src = 0, bool safe_mode = false);

// ---------------------------------------------------------------------------------------------
// all_gather_tensors_with_shapes

/// Gathers tensors whose shapes differ between ranks but whose number of dimensions is the same.
/// `shapes[i]` is the shape of the tensor of group rank i (the i-th rank of `group` in ascending
/// order, or world rank i). Each tensor is zero-padded to the element-wise maximum of `shapes`,
/// the padded tensors are all-gathered, and each is cut back to its shape. Returns one tensor per
/// group rank, in group rank order (views into one gathered tensor, on t's device). A rank outside
/// `group` gets {t}. Mirrors ignite.distributed.utils.all_gather_tensors_with_shapes.
/// @throws ValueError on every rank of the group when some rank passed an undefined tensor, a
///         number of shapes other than the group size, a shape of another number of dimensions,
///         or a tensor whose shape is not its entry of `shapes` (the offending rank's message names
///         the argument; the others say which rank failed).
std::vector<at::Tensor> all_gather_tensors_with_shapes(const at::Tensor& t,
                                                       const std::vector<std::vector<std::int64_t>>& shapes,
                                                       const Group& group = {});

}  // namespace idist

#pragma once
/// @file
/// Tensor overloads of ignite.distributed's collectives: all_reduce, all_gather, broadcast (with
/// safe mode) and all_gather_tensors_with_shapes; torch.distributed's reduce, gather, scatter,
/// reduce_scatter, all_to_all (even and with split sizes) and the point-to-point send / recv; plus
/// their non-blocking forms. Compiled into idist_torch.
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
/// - Tensors written in place (reduce, recv, irecv, the `out` of the async forms) are taken as
///   `const at::Tensor&`, like LibTorch's `_out` functions: the handle is const, its data is not, so
///   a temporary or a view (`t.view(-1)`, `t[0]`) is accepted and the result reaches its base.
/// - `dst` / `src` are world ranks (as in torch.distributed and idist::broadcast), which must be
///   members of `group`; a rank outside [0, world size) or outside the group raises ValueError.
/// - Each call goes through the backend's own operation (MPI_Reduce_scatter_block, gloo::alltoall,
///   ncclSend / ncclRecv ...), the debug layer's fingerprints and the flight recorder.

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

// ---------------------------------------------------------------------------------------------
// reduce

/// Non-blocking reduce of `tensor` (same shape and dtype on every rank of `group`) into world rank
/// `dst`'s tensor, in place (torch.distributed.reduce with async_op=True). The other ranks' tensors
/// keep their values. The tensor is kept alive by the Work; dst's result is visible after wait().
/// @throws ValueError for an undefined tensor, an unsupported dtype, an op the dtype cannot take, or
///         `dst` outside [0, world size) or not a member of `group`.
Work reduce_async(const at::Tensor& tensor, int dst, ReduceOp op = ReduceOp::Sum, const Group& group = {});

/// Reduces `tensor` over `group` with `op` into world rank `dst`'s `tensor` (in place); the other
/// ranks' tensors keep their values. Mirrors torch.distributed.reduce.
/// @throws ValueError as reduce_async; TimeoutError after the timeout given at initialize().
void reduce(const at::Tensor& tensor, int dst, ReduceOp op = ReduceOp::Sum, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// gather

/// Non-blocking gather of `in` (same shape and dtype on every rank) into `out` on world rank `dst`:
/// `out` receives the group's tensors concatenated in group rank order and must hold group size *
/// in.numel() elements of in's dtype (typically shape (group size * in.size(0), ...)). `out` is not
/// used on the other ranks (pass an undefined tensor). Mirrors torch.distributed.gather (async_op).
/// @throws ValueError for an undefined `in`, an unsupported dtype, `dst` outside [0, world size) or
///         not a member of `group`; on `dst` for an undefined `out`, a dtype mismatch or a wrong
///         element count.
Work gather_async(const at::Tensor& in, const at::Tensor& out, int dst, const Group& group = {});

/// Gathers `tensor` (same shape and dtype on every rank) from every rank of `group` to world rank
/// `dst`. Returns, on `dst`, one tensor per group rank in group rank order, each of tensor's shape
/// and on tensor's device; on the other ranks (and outside the group) an empty vector. Mirrors
/// torch.distributed.gather.
/// @throws ValueError as gather_async; TimeoutError after the timeout.
std::vector<at::Tensor> gather(const at::Tensor& tensor, int dst, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// scatter

/// Non-blocking scatter from world rank `src`: on `src`, `in` holds group size * out.numel()
/// elements of out's dtype, and the i-th block of out.numel() elements goes to group rank i's `out`.
/// `in` is not used on the other ranks (pass an undefined tensor). Mirrors torch.distributed.scatter
/// (async_op) on one flat input.
/// @throws ValueError for an undefined `out`, an unsupported dtype, `src` outside [0, world size) or
///         not a member of `group`; on `src` for an undefined `in`, a dtype mismatch or a wrong element
///         count.
Work scatter_async(const at::Tensor& in, const at::Tensor& out, int src, const Group& group = {});

/// Scatters `chunks` from world rank `src`: `src` passes one tensor per group rank (same shape and
/// dtype), the others pass {}; group rank i returns a copy of chunks[i] (on `src`: on the chunk's
/// device; elsewhere on idist::device()). `src` first broadcasts the chunks' dtype and shape, so a
/// bad argument on `src` raises ValueError on every rank of the group. A rank outside `group` gets an
/// undefined tensor. Mirrors torch.distributed.scatter.
/// @throws ValueError when `src` is outside [0, world size) or not a member of `group`; on every rank
///         when `src` passed not one chunk per group rank, an undefined chunk, chunks of different
///         shapes or dtypes, an unsupported dtype or more than 16 dimensions; TimeoutError after the
///         timeout.
at::Tensor scatter(const std::vector<at::Tensor>& chunks, int src, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// reduce_scatter

/// Non-blocking reduce_scatter: `in` holds group size * out.numel() elements; `out` receives the
/// reduction with `op` over the group of block group rank (torch.distributed.reduce_scatter_tensor
/// with async_op=True).
/// @throws ValueError for undefined tensors, unsupported or different dtypes, a wrong element count
///         or an op the dtype cannot take.
Work reduce_scatter_async(const at::Tensor& in, const at::Tensor& out, ReduceOp op = ReduceOp::Sum,
                          const Group& group = {});

/// Reduces `input` (dimension 0 of size group size * k, same shape on every rank) over `group` with
/// `op` and returns this rank's k rows of the result: rows [group rank * k, (group rank + 1) * k),
/// shape (k, input.size(1), ...), on input's device. Mirrors torch.distributed.reduce_scatter_tensor.
/// A rank outside `group` gets `input` back.
/// @throws ValueError for an undefined or 0-dimensional input, a dimension 0 that is not a multiple
///         of the group size, an unsupported dtype or an op the dtype cannot take; TimeoutError after
///         the timeout.
at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op = ReduceOp::Sum, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// all_to_all

/// Non-blocking all_to_all of equal blocks: `in` and `out` hold the same number of elements, a
/// multiple of the group size; block j of `in` goes to group rank j, block i of `out` comes from group
/// rank i (torch.distributed.all_to_all_single with async_op=True).
/// @throws ValueError for undefined tensors, unsupported or different dtypes, or element counts that
///         differ or are not a multiple of the group size.
Work all_to_all_async(const at::Tensor& in, const at::Tensor& out, const Group& group = {});

/// Non-blocking all_to_all with split sizes along dimension 0: `in` sends input_split_sizes[j] rows to
/// group rank j, `out` receives output_split_sizes[i] rows from group rank i (a row: the elements of
/// one index of dimension 0; in and out have the same trailing dimensions). Mirrors
/// torch.distributed.all_to_all_single with split sizes and async_op=True.
/// @throws ValueError for undefined or 0-dimensional tensors, unsupported or different dtypes or
///         trailing shapes, a list without one entry per group rank, a negative entry, or a sum other
///         than the tensor's size(0).
Work all_to_all_async(const at::Tensor& in, const at::Tensor& out, const std::vector<std::int64_t>& output_split_sizes,
                      const std::vector<std::int64_t>& input_split_sizes, const Group& group = {});

/// Exchanges equal blocks: `input`'s dimension 0 has group size * k rows; rows [j * k, (j + 1) * k)
/// go to group rank j, and rows [i * k, (i + 1) * k) of the result (input's shape, dtype and device)
/// came from group rank i. Mirrors torch.distributed.all_to_all_single. A rank outside `group` gets
/// `input` back.
/// @throws ValueError for an undefined or 0-dimensional input, a dimension 0 that is not a multiple
///         of the group size or an unsupported dtype; TimeoutError after the timeout.
at::Tensor all_to_all(const at::Tensor& input, const Group& group = {});

/// Exchanges blocks of rows whose sizes differ: input_split_sizes[j] rows of `input` (in order) go to
/// group rank j, and the result holds output_split_sizes[i] rows from each group rank i in group rank
/// order (shape (sum(output_split_sizes), input.size(1), ...), input's dtype and device). Every rank's
/// output_split_sizes[i] must equal rank i's input_split_sizes for it. Mirrors
/// torch.distributed.all_to_all_single with output_split_sizes and input_split_sizes. A rank outside
/// `group` gets `input` back.
/// @throws ValueError for an undefined or 0-dimensional input, an unsupported dtype, a list without
///         one entry per group rank, a negative entry, or input_split_sizes not summing to
///         input.size(0); TimeoutError (or BackendError) when the ranks' sizes disagree.
at::Tensor all_to_all(const at::Tensor& input, const std::vector<std::int64_t>& output_split_sizes,
                      const std::vector<std::int64_t>& input_split_sizes, const Group& group = {});

// ---------------------------------------------------------------------------------------------
// point-to-point

/// Sends `tensor` to world rank `dst`, where the recv() (or irecv()) of the same `tag` from this
/// rank receives it; returns once `tensor` may be modified again (torch.distributed.send). Messages
/// of one tag between two ranks arrive in order; on nccl tags do not take part in matching (all
/// messages between two ranks match in issue order).
/// @throws ValueError for an undefined tensor, an unsupported dtype, `dst` outside [0, world size)
///         or this rank, or a negative tag (mpi: above MPI_TAG_UB); TimeoutError after the timeout.
void send(const at::Tensor& tensor, int dst, int tag = 0);

/// Receives into `tensor` (the sender's dtype and number of elements) the message of world rank `src`
/// sent with `tag` (torch.distributed.recv with an explicit source).
/// @throws ValueError as send() for `src`; TimeoutError after the timeout; BackendError when the
///         message is larger than `tensor`.
void recv(const at::Tensor& tensor, int src, int tag = 0);

/// Non-blocking send() (torch.distributed.isend): the message is posted at once; the Work completes
/// once `tensor` may be modified again. The Work keeps the tensor alive.
/// @throws ValueError as send().
Work isend(const at::Tensor& tensor, int dst, int tag = 0);

/// Non-blocking recv() (torch.distributed.irecv): the receive is posted at once; `tensor` holds the
/// message once the Work was waited for. The Work keeps the tensor alive.
/// @throws ValueError as recv().
Work irecv(const at::Tensor& tensor, int src, int tag = 0);

}  // namespace idist

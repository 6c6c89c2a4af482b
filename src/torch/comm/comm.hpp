#pragma once
// The tensor-communication layer: the one road from src/torch to the backend (private to
// idist_torch). Every tensor operation of the LibTorch layer (the public tensor collectives, the
// Reducer's default hook, SyncBatchNorm, ZeRO) comes through here; only comm.cpp reads the current
// ComputationModel. An operation stages its tensors on the device the backend reads (no copy for a
// contiguous tensor already there, see staging.hpp), issues the model's operation and finishes it:
// Completion::Blocking writes staged outputs back before returning; Completion::Async returns a Work
// whose continuations keep the staged tensors (and any counts) alive and write the outputs back.
// The single-tensor operations (all_reduce, broadcast, reduce, send, recv) check their tensor here
// (defined, a dtype idist carries; the message names the operation, as the public function is named);
// callers check the rest of their arguments first, so that their messages name the public function. Counts
// are read until an operation completes: an Async caller keeps them alive until then.
#include <cstddef>
#include <span>
#include <string_view>

#include <ATen/core/Tensor.h>

#include "idist/group.hpp"
#include "idist/op_type.hpp"
#include "idist/process_group.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"

namespace idist::detail::comm {

// --- The world as the current backend sees it ---

/// This process's world rank.
int rank();
/// The number of ranks in the world.
int world_size();
/// `group` resolved by the current backend: membership, this rank's position, the members.
const ProcessGroup& process_group(const Group& group);
/// Where the current backend reads tensors: the host, or idist::device() for nccl.
c10::Device device();
/// How the Reducer issues its buckets: Async where the backend progresses operations in the
/// background, else Blocking (nothing would overlap, and one bucket in flight bounds the backend's
/// scratch memory).
Completion bucket_completion();
/// @throws ValueError unless `src` is a world rank; `fn` names the function.
void check_src(int src, std::string_view fn);

// --- Operations in place on `t` ---

/// Sum (or `op`) of `t` over `group`, into `t` on every member.
Work all_reduce(const at::Tensor& t, ReduceOp op, const Group& group, Completion how);
/// World rank `src`'s `t` into `t` on every member.
Work broadcast(const at::Tensor& t, int src, const Group& group, Completion how);
/// The reduction of `t` over `group` into `t` on world rank `dst`.
Work reduce(const at::Tensor& t, int dst, ReduceOp op, const Group& group, Completion how);

// --- Operations from `in` into `out` (both contiguous of one dtype after staging) ---

/// Every member's `in`, in group rank order, into `out` (group size x in's elements).
Work all_gather(const at::Tensor& in, const at::Tensor& out, const Group& group, Completion how);
/// As all_gather with counts[r] elements from group rank r.
Work all_gather_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts, const Group& group,
                  Completion how);
/// Every member's `in` into `out` on world rank `dst`; `out` is undefined elsewhere.
Work gather(const at::Tensor& in, const at::Tensor& out, int dst, const Group& group, Completion how);
/// Block r of `in` on world rank `src` into `out` on group rank r; `in` is undefined elsewhere.
Work scatter(const at::Tensor& in, const at::Tensor& out, int src, const Group& group, Completion how);
/// The reduction of `in` over `group`, block r (out's elements) into `out` on group rank r.
Work reduce_scatter(const at::Tensor& in, const at::Tensor& out, ReduceOp op, const Group& group, Completion how);
/// As reduce_scatter with blocks of counts[r] elements.
Work reduce_scatter_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts, ReduceOp op,
                      const Group& group, Completion how);
/// Block r of every member's `in` into block (sender) of group rank r's `out`.
Work all_to_all(const at::Tensor& in, const at::Tensor& out, const Group& group, Completion how);
/// As all_to_all with out_counts[r] elements received from and in_counts[r] sent to group rank r.
Work all_to_all_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> out_counts,
                  std::span<const std::size_t> in_counts, const Group& group, Completion how);

// --- Point to point ---

/// `t` to world rank `dst` with `tag`.
Work send(const at::Tensor& t, int dst, int tag, Completion how);
/// From world rank `src` with `tag` into `t`.
Work recv(const at::Tensor& t, int src, int tag, Completion how);

}  // namespace idist::detail::comm

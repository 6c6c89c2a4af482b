#pragma once
/// @file
/// Tensor overloads of ignite.distributed's collectives: all_reduce, all_gather, broadcast (with
/// safe mode) and all_gather_tensors_with_shapes, plus their non-blocking forms.
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

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/group.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/work.hpp"

namespace idist {

namespace detail {

/// Where the current backend reads tensors: the host, or idist::device() for nccl.
inline c10::Device comm_device(const ComputationModel& m) { return to_torch_device(m.buffer_device()); }

/// "[2, 3, 4]", for messages (c10's own printing of a size list).
inline std::string shape_str(c10::IntArrayRef sizes) { return c10::str(sizes); }

/// Throws ValueError unless `t` is defined and has a supported dtype. `fn` names the collective.
inline DType checked_dtype(const at::Tensor& t, std::string_view fn) {
  if (!t.defined()) throw ValueError(format_message("{}: tensor is undefined; expected a defined tensor", fn));
  return to_dtype(t.scalar_type());
}

/// A tensor's data as the backend wants it: `buffer` is contiguous on the communication device;
/// `copied` says whether it is a staging copy that has to be written back into the user's tensor.
struct Staged {
  at::Tensor buffer;
  bool copied = false;
};

/// Stages `t` for a collective on device `dev` (no copy when it already qualifies).
inline Staged stage(const at::Tensor& t, c10::Device dev) {
  at::Tensor d = t.detach();  // shares storage; keeps the staging copy out of the autograd graph
  if (d.device() == dev && d.is_contiguous()) return {d, false};
  return {d.to(dev).contiguous(), true};
}

/// Adds to `w` the continuation that writes a staging copy back into `t` (or only keeps the
/// tensor alive until the Work completes when no copy was made).
inline Work& finish_into(Work& w, const at::Tensor& t, const Staged& s) {
  if (s.copied) {
    w.then([dst = t.detach(), src = s.buffer]() mutable {
      at::NoGradGuard no_grad;
      dst.copy_(src);
    });
  } else {
    w.then([keep = s.buffer] { (void)keep; });
  }
  return w;
}

/// Writes a staging copy back into the user's tensor after a blocking collective.
inline void copy_back(const at::Tensor& t, const Staged& s) {
  if (!s.copied) return;
  at::NoGradGuard no_grad;
  t.detach().copy_(s.buffer);
}

/// The end of an in-place collective on `s`, the staging of `t`: written back now (Blocking) or
/// when `w` is waited for (Async).
inline Work finish(Work w, const at::Tensor& t, const Staged& s, Completion how) {
  if (how == Completion::Blocking) {
    copy_back(t, s);
    return w;
  }
  return finish_into(w, t, s);
}

/// In-place all-reduce of `t` (any strided tensor), completed as `how` says.
inline Work all_reduce_tensor(const at::Tensor& t, ReduceOp op, const Group& group, Completion how) {
  ComputationModel& m = current_model();
  checked_dtype(t, to_string(OpType::AllReduce));
  const Staged s = stage(t, comm_device(m));
  return finish(m.all_reduce(tensor_buffer(s.buffer), op, group, how), t, s, how);
}

/// In-place broadcast of `t` from world rank `src`, completed as `how` says.
inline Work broadcast_tensor(const at::Tensor& t, int src, const Group& group, Completion how) {
  ComputationModel& m = current_model();
  check_src(m, src, to_string(OpType::Broadcast));
  checked_dtype(t, to_string(OpType::Broadcast));
  const Staged s = stage(t, comm_device(m));
  return finish(m.broadcast(tensor_buffer(s.buffer), src, group, how), t, s, how);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// all_reduce

/// Non-blocking in-place reduction of `t` over `group` (torch.distributed.all_reduce with
/// async_op=True). The tensor is kept alive by the Work; its new values are visible after wait().
/// @throws ValueError for an undefined tensor, an unsupported dtype or an op the dtype cannot take.
inline Work all_reduce_async(const at::Tensor& t, ReduceOp op = ReduceOp::Sum, const Group& group = {}) {
  return detail::all_reduce_tensor(t, op, group, Completion::Async);
}

/// Reduces `t` in place over `group` with `op` and returns it (same tensor object, same shape on
/// every rank). Mirrors ignite.distributed.all_reduce on a tensor.
/// @throws ValueError as all_reduce_async; TimeoutError after the timeout given at initialize().
inline at::Tensor all_reduce(at::Tensor t, ReduceOp op = ReduceOp::Sum, const Group& group = {}) {
  detail::all_reduce_tensor(t, op, group, Completion::Blocking);
  return t;
}

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
inline Work all_gather_async(const at::Tensor& in, const at::Tensor& out, const Group& group = {}) {
  ComputationModel& m = current_model();
  const DType dt = detail::checked_dtype(in, to_string(OpType::AllGather));
  if (!out.defined()) throw ValueError("all_gather_async: out is undefined; expected a defined tensor");
  if (out.scalar_type() != in.scalar_type())
    throw ValueError(detail::format_message("all_gather_async: out has dtype {}, expected the input's dtype {}",
                                            c10::toString(out.scalar_type()), c10::toString(in.scalar_type())));
  const ProcessGroup& pg = m.process_group(group);
  const bool member = pg.is_member();
  const std::int64_t n = member ? pg.size() : 1;
  if (out.numel() != in.numel() * n)
    throw ValueError(
        detail::format_message("all_gather_async: out has {} elements, expected {} (input elements times group size)",
                               out.numel(), in.numel() * n));
  (void)dt;
  if (!member) {
    at::NoGradGuard no_grad;
    out.detach().view_as(in).copy_(in);
    return Work{};
  }
  const c10::Device dev = detail::comm_device(m);
  detail::Staged src = detail::stage(in, dev);
  detail::Staged dst = detail::stage(out, dev);
  Work w = m.all_gather(ConstBuffer(detail::tensor_buffer(src.buffer)), detail::tensor_buffer(dst.buffer), group);
  w.then([keep = src.buffer] { (void)keep; });
  return detail::finish_into(w, out, dst);
}

/// Gathers `t` from every rank of `group` and returns the concatenation along dimension 0, in rank
/// order. The first dimension may differ between ranks (the shapes are exchanged first); the
/// other dimensions and the dtype must agree. A 0-dimensional tensor is treated as shape (1), so
/// the result has shape (group size). Mirrors ignite.distributed.all_gather on a tensor. The result
/// lives on t's device. A rank outside `group` gets `t` back.
/// @throws ValueError for an undefined tensor or unsupported dtype (before any communication), and
///         on every rank when the ranks' dtypes or trailing dimensions differ.
inline at::Tensor all_gather(const at::Tensor& t, const Group& group = {}) {
  ComputationModel& m = current_model();
  detail::checked_dtype(t, to_string(OpType::AllGather));
  const ProcessGroup& pg = m.process_group(group);
  if (!pg.is_member()) return t;
  const at::Tensor x = t.dim() == 0 ? t.reshape({1}) : t;

  // Exchange (scalar type, ndim, sizes...) so that every rank can size the output and check it.
  std::vector<std::int64_t> sig{std::int64_t(x.scalar_type()), x.dim()};
  for (auto s : x.sizes()) sig.push_back(s);
  const std::vector<std::int64_t> all = idist::all_gather(std::span<const std::int64_t>(sig), group);
  const std::size_t n = std::size_t(pg.size());
  std::vector<std::vector<std::int64_t>> shapes(n);
  std::vector<std::size_t> counts(n);
  std::size_t pos = 0;
  std::int64_t inner = 1;  // elements per index of dimension 0
  for (std::int64_t d = 1; d < x.dim(); ++d) inner *= x.size(d);
  for (std::size_t r = 0; r < n; ++r) {
    const auto st = c10::ScalarType(all[pos]);
    const auto nd = std::size_t(all[pos + 1]);
    shapes[r].assign(all.begin() + std::ptrdiff_t(pos + 2), all.begin() + std::ptrdiff_t(pos + 2 + nd));
    pos += 2 + nd;
    const bool same_tail =
        nd == std::size_t(x.dim()) && std::equal(shapes[r].begin() + 1, shapes[r].end(), x.sizes().begin() + 1);
    if (st != x.scalar_type() || !same_tail)
      throw ValueError(detail::format_message(
          "{}: every rank must pass the same dtype and the same sizes except the first dimension; group rank "
          "{} has {} {} but group rank {} has {} {}",
          to_string(OpType::AllGather), pg.rank(), c10::toString(x.scalar_type()), detail::shape_str(x.sizes()), r,
          c10::toString(st), detail::shape_str(shapes[r])));
    counts[r] = std::size_t(shapes[r][0] * inner);
  }
  std::vector<std::int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes[0] = 0;
  for (const auto& s : shapes) out_sizes[0] += s[0];

  const c10::Device dev = detail::comm_device(m);
  at::Tensor out = at::empty(out_sizes, x.options().device(dev));
  if (out.numel() == 0) return out.to(t.device());
  detail::Staged in = detail::stage(x, dev);
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; });
  if (equal)
    m.all_gather(ConstBuffer(detail::tensor_buffer(in.buffer)), detail::tensor_buffer(out), group,
                 Completion::Blocking);
  else
    m.all_gather_v(ConstBuffer(detail::tensor_buffer(in.buffer)), detail::tensor_buffer(out), counts, group,
                   Completion::Blocking);
  return out.to(t.device());
}

// ---------------------------------------------------------------------------------------------
// broadcast

/// Non-blocking in-place broadcast of `t` (same shape and dtype on every rank) from world rank `src`.
/// @throws ValueError for an undefined tensor, an unsupported dtype or src outside [0, world size).
inline Work broadcast_async(const at::Tensor& t, int src = 0, const Group& group = {}) {
  return detail::broadcast_tensor(t, src, group, Completion::Async);
}

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
inline at::Tensor broadcast(at::Tensor t, int src = 0, bool safe_mode = false) {
  ComputationModel& m = current_model();
  detail::check_src(m, src, to_string(OpType::Broadcast));
  const bool is_src = m.rank() == src;
  if (!safe_mode) {
    if (!t.defined()) {
      if (is_src) throw ValueError("broadcast: source data can not be an undefined tensor");
      throw ValueError("broadcast: safe_mode should be true if an undefined tensor is passed on a non-source rank");
    }
    detail::broadcast_tensor(t, src, Group{}, Completion::Blocking);
    return t;
  }
  // Header: (scalar type, ndim, sizes...). Every rank validates the dtype from it, so an
  // unsupported dtype on the source raises everywhere instead of leaving the others waiting.
  std::vector<std::byte> header;
  if (is_src && t.defined()) {
    std::vector<std::int64_t> h{std::int64_t(t.scalar_type()), t.dim()};
    for (auto s : t.sizes()) h.push_back(s);
    header.resize(h.size() * sizeof(std::int64_t));
    std::memcpy(header.data(), h.data(), header.size());
  }
  detail::broadcast_bytes(header, !is_src || t.defined(), src, to_string(OpType::Broadcast));
  std::vector<std::int64_t> h(header.size() / sizeof(std::int64_t));
  std::memcpy(h.data(), header.data(), header.size());
  const auto st = c10::ScalarType(h.at(0));
  to_dtype(st);
  const std::vector<std::int64_t> sizes(h.begin() + 2, h.end());
  at::Tensor target = t;
  if (!is_src && !(t.defined() && t.scalar_type() == st && t.sizes() == c10::IntArrayRef(sizes))) {
    const c10::Device dev = t.defined() ? t.device() : to_torch_device(idist::device());
    target = at::empty(sizes, at::TensorOptions().dtype(st).device(dev));
  }
  detail::broadcast_tensor(target, src, Group{}, Completion::Blocking);
  return target;
}

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
inline std::vector<at::Tensor> all_gather_tensors_with_shapes(const at::Tensor& t,
                                                              const std::vector<std::vector<std::int64_t>>& shapes,
                                                              const Group& group = {}) {
  ComputationModel& m = current_model();
  const ProcessGroup& pg = m.process_group(group);
  if (!pg.is_member()) return {t};
  const int me = pg.rank();
  const std::size_t n = std::size_t(pg.size());

  // Local validation, then agreement: a bad argument on one rank raises on all of them.
  std::string error;
  if (!t.defined()) {
    error = "tensor is undefined";
  } else if (t.scalar_type() == c10::ScalarType::Undefined) {
    error = "tensor has no dtype";
  } else if (shapes.size() != n) {
    error = detail::format_message("shapes has {} entries, expected one per rank of the group ({})", shapes.size(), n);
  } else {
    for (std::size_t i = 0; i < n && error.empty(); ++i) {
      if (shapes[i].size() != std::size_t(t.dim()))
        error = detail::format_message("shapes[{}] = {} has {} dimensions, expected the tensor's {}", i,
                                       detail::shape_str(shapes[i]), shapes[i].size(), t.dim());
      else if (std::any_of(shapes[i].begin(), shapes[i].end(), [](std::int64_t d) { return d < 0; }))
        error = detail::format_message("shapes[{}] = {} has a negative size", i, detail::shape_str(shapes[i]));
    }
    if (error.empty() && c10::IntArrayRef(shapes[std::size_t(me)]) != t.sizes())
      error = detail::format_message("the tensor's shape {} differs from shapes[{}] = {} (its entry for this rank)",
                                     detail::shape_str(t.sizes()), me, detail::shape_str(shapes[std::size_t(me)]));
  }
  if (error.empty()) {
    try {
      to_dtype(t.scalar_type());
    } catch (const ValueError& e) {
      error = e.what();
    }
  }
  const std::int32_t bad_rank = all_reduce(std::int32_t(error.empty() ? -1 : me), ReduceOp::Max, group);
  if (!error.empty()) throw ValueError(detail::format_message("all_gather_tensors_with_shapes: {}", error));
  if (bad_rank >= 0)
    throw ValueError(detail::format_message(
        "all_gather_tensors_with_shapes: group rank {} passed invalid arguments (see its error)", bad_rank));

  if (t.dim() == 0) {
    const at::Tensor all = all_gather(t, group);
    std::vector<at::Tensor> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(all[std::int64_t(i)]);
    return out;
  }
  std::vector<std::int64_t> max_shape(std::size_t(t.dim()), 0);
  for (const auto& s : shapes)
    for (std::size_t d = 0; d < s.size(); ++d) max_shape[d] = std::max(max_shape[d], s[d]);

  const c10::Device dev = detail::comm_device(m);
  at::Tensor padded = at::zeros(max_shape, t.options().device(dev));
  {
    at::NoGradGuard no_grad;
    at::Tensor region = padded;
    for (std::int64_t d = 0; d < t.dim(); ++d) region = region.narrow(d, 0, t.size(d));
    region.copy_(t.detach());
  }
  std::vector<std::int64_t> out_sizes = max_shape;
  out_sizes[0] *= std::int64_t(n);
  at::Tensor gathered = at::empty(out_sizes, padded.options());
  if (gathered.numel() > 0)
    m.all_gather(ConstBuffer(detail::tensor_buffer(padded)), detail::tensor_buffer(gathered), group,
                 Completion::Blocking);
  gathered = gathered.to(t.device());

  std::vector<at::Tensor> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    at::Tensor r = gathered.narrow(0, std::int64_t(i) * max_shape[0], shapes[i][0]);
    for (std::size_t d = 1; d < shapes[i].size(); ++d) r = r.narrow(std::int64_t(d), 0, shapes[i][d]);
    out.push_back(r);
  }
  return out;
}

}  // namespace idist

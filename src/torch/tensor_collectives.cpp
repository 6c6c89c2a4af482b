// ignite's tensor collectives (idist/torch/collectives.hpp): all_reduce, all_gather, broadcast, and
// all_gather_tensors_with_shapes, over the communication layer.
#include "idist/torch/collectives.hpp"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include <fmt/format.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/detail/collectives.hpp"
#include "torch/agree_on_error.hpp"
#include "torch/comm/comm.hpp"
#include "torch/comm/staging.hpp"

namespace idist {

namespace comm = detail::comm;

Work all_reduce_async(const at::Tensor& t, ReduceOp op, const Group& group) {
  return comm::all_reduce(t, op, group, Completion::Async);
}

at::Tensor all_reduce(at::Tensor t, ReduceOp op, const Group& group) {
  comm::all_reduce(t, op, group, Completion::Blocking);
  return t;
}

Work all_gather_async(const at::Tensor& in, const at::Tensor& out, const Group& group) {
  detail::checked_dtype(in, to_string(OpType::AllGather));
  if (!out.defined()) throw ValueError("all_gather_async: out is undefined; expected a defined tensor");
  if (out.scalar_type() != in.scalar_type())
    throw ValueError(fmt::format("all_gather_async: out has dtype {}, expected the input's dtype {}",
                                 c10::toString(out.scalar_type()), c10::toString(in.scalar_type())));
  const ProcessGroup& pg = comm::process_group(group);
  const bool member = pg.is_member();
  const std::int64_t n = member ? pg.size() : 1;
  if (out.numel() != in.numel() * n)
    throw ValueError(fmt::format("all_gather_async: out has {} elements, expected {} (input elements times group size)",
                                 out.numel(), in.numel() * n));
  if (!member) {
    at::NoGradGuard no_grad;
    out.detach().view_as(in).copy_(in);
    return Work{};
  }
  return comm::all_gather(in, out, group, Completion::Async);
}

at::Tensor all_gather(const at::Tensor& t, const Group& group) {
  detail::checked_dtype(t, to_string(OpType::AllGather));
  const ProcessGroup& pg = comm::process_group(group);
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
      throw ValueError(fmt::format(
          "{}: every rank must pass the same dtype and the same sizes except the first dimension; group rank "
          "{} has {} {} but group rank {} has {} {}",
          to_string(OpType::AllGather), pg.rank(), c10::toString(x.scalar_type()), detail::shape_str(x.sizes()), r,
          c10::toString(st), detail::shape_str(shapes[r])));
    counts[r] = std::size_t(shapes[r][0] * inner);
  }
  std::vector<std::int64_t> out_sizes(x.sizes().begin(), x.sizes().end());
  out_sizes[0] = 0;
  for (const auto& s : shapes) out_sizes[0] += s[0];

  at::Tensor out = at::empty(out_sizes, x.options().device(comm::device()));
  if (out.numel() == 0) return out.to(t.device());
  const bool equal = std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts[0]; });
  if (equal)
    comm::all_gather(x, out, group, Completion::Blocking);
  else
    comm::all_gather_v(x, out, counts, group, Completion::Blocking);
  return out.to(t.device());
}

namespace {

// In-place broadcast of `t` from world rank `src`, after the checks every form makes.
Work broadcast_tensor(const at::Tensor& t, int src, const Group& group, Completion how) {
  comm::check_src(src, to_string(OpType::Broadcast));
  return comm::broadcast(t, src, group, how);
}

}  // namespace

Work broadcast_async(const at::Tensor& t, int src, const Group& group) {
  return broadcast_tensor(t, src, group, Completion::Async);
}

at::Tensor broadcast(at::Tensor t, int src, bool safe_mode) {
  comm::check_src(src, to_string(OpType::Broadcast));
  const bool is_src = comm::rank() == src;
  if (!safe_mode) {
    if (!t.defined()) {
      const std::string_view op = to_string(OpType::Broadcast);
      if (is_src) throw ValueError(fmt::format("{}: source data can not be an undefined tensor", op));
      throw ValueError(
          fmt::format("{}: safe_mode should be true if an undefined tensor is passed on a non-source rank", op));
    }
    broadcast_tensor(t, src, Group{}, Completion::Blocking);
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
  broadcast_tensor(target, src, Group{}, Completion::Blocking);
  return target;
}

std::vector<at::Tensor> all_gather_tensors_with_shapes(const at::Tensor& t,
                                                       const std::vector<std::vector<std::int64_t>>& shapes,
                                                       const Group& group) {
  const ProcessGroup& pg = comm::process_group(group);
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
    error = fmt::format("shapes has {} entries, expected one per rank of the group ({})", shapes.size(), n);
  } else {
    for (std::size_t i = 0; i < n && error.empty(); ++i) {
      if (shapes[i].size() != std::size_t(t.dim()))
        error = fmt::format("shapes[{}] = {} has {} dimensions, expected the tensor's {}", i,
                            detail::shape_str(shapes[i]), shapes[i].size(), t.dim());
      else if (std::any_of(shapes[i].begin(), shapes[i].end(), [](std::int64_t d) { return d < 0; }))
        error = fmt::format("shapes[{}] = {} has a negative size", i, detail::shape_str(shapes[i]));
    }
    if (error.empty() && c10::IntArrayRef(shapes[std::size_t(me)]) != t.sizes())
      error = fmt::format("the tensor's shape {} differs from shapes[{}] = {} (its entry for this rank)",
                          detail::shape_str(t.sizes()), me, detail::shape_str(shapes[std::size_t(me)]));
  }
  if (error.empty()) {
    try {
      to_dtype(t.scalar_type());
    } catch (const ValueError& e) {
      error = e.what();
    }
  }
  detail::agree_on_error(
      error.empty() ? error : fmt::format("all_gather_tensors_with_shapes: {}", error), group, [](int bad) {
        return fmt::format("all_gather_tensors_with_shapes: group rank {} passed invalid arguments (see its error)",
                           bad);
      });

  if (t.dim() == 0) {
    const at::Tensor all = all_gather(t, group);
    std::vector<at::Tensor> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back(all[std::int64_t(i)]);
    return out;
  }
  std::vector<std::int64_t> max_shape(std::size_t(t.dim()), 0);
  for (const auto& s : shapes)
    for (std::size_t d = 0; d < s.size(); ++d) max_shape[d] = std::max(max_shape[d], s[d]);

  at::Tensor padded = at::zeros(max_shape, t.options().device(comm::device()));
  {
    at::NoGradGuard no_grad;
    at::Tensor region = padded;
    for (std::int64_t d = 0; d < t.dim(); ++d) region = region.narrow(d, 0, t.size(d));
    region.copy_(t.detach());
  }
  std::vector<std::int64_t> out_sizes = max_shape;
  out_sizes[0] *= std::int64_t(n);
  at::Tensor gathered = at::empty(out_sizes, padded.options());
  if (gathered.numel() > 0) comm::all_gather(padded, gathered, group, Completion::Blocking);
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

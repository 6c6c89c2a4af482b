// The tensor collectives beyond ignite's (idist/torch/collectives.hpp): reduce, gather, scatter,
// reduce_scatter and all_to_all, over the communication layer.
#include <array>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "idist/context.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/comm/comm.hpp"
#include "torch/comm/staging.hpp"

namespace idist {

namespace {

namespace comm = detail::comm;
using detail::checked_dtype;

// Throws ValueError unless `out` is defined and has `in`'s dtype; `fn` names the function.
void check_out(const at::Tensor& in, const at::Tensor& out, std::string_view fn) {
  if (!out.defined()) throw ValueError(fmt::format("{}: out is undefined; expected a defined tensor", fn));
  if (out.scalar_type() != in.scalar_type())
    throw ValueError(fmt::format("{}: out has dtype {}, expected the input's dtype {}", fn,
                                 c10::toString(out.scalar_type()), c10::toString(in.scalar_type())));
}

// The rows of dimension 0 of `t`, checked: `t` has at least one dimension and, when `blocks` > 0,
// a multiple of `blocks` rows.
std::int64_t rows_of(const at::Tensor& t, std::string_view fn, std::int64_t blocks) {
  if (t.dim() == 0)
    throw ValueError(fmt::format("{}: input is 0-dimensional; expected dimension 0 of group size * k rows", fn));
  if (blocks > 0 && t.size(0) % blocks != 0)
    throw ValueError(fmt::format("{}: input has dimension 0 of size {}, expected a multiple of the group size {}", fn,
                                 t.size(0), blocks));
  return t.size(0);
}

// Elements per row (index of dimension 0) of `t`.
std::size_t row_elements(const at::Tensor& t) {
  std::size_t n = 1;
  for (std::int64_t d = 1; d < t.dim(); ++d) n *= std::size_t(t.size(d));
  return n;
}

// Split sizes (rows) as element counts, checked against `n` group ranks and `rows` in total.
std::vector<std::size_t> split_counts(const std::vector<std::int64_t>& sizes, std::string_view name, std::size_t n,
                                      std::int64_t rows, std::size_t row, std::string_view fn) {
  if (sizes.size() != n)
    throw ValueError(
        fmt::format("{}: {} has {} entries, expected one per rank of the group ({})", fn, name, sizes.size(), n));
  std::vector<std::size_t> counts(n);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (sizes[i] < 0) throw ValueError(fmt::format("{}: {}[{}] is {}; expected a size >= 0", fn, name, i, sizes[i]));
    counts[i] = std::size_t(sizes[i]) * row;
    total += sizes[i];
  }
  if (rows >= 0 && total != rows)
    throw ValueError(
        fmt::format("{}: {} sums to {} rows, but the tensor has {}; expected equal", fn, name, total, rows));
  return counts;
}

Work reduce_tensor(const at::Tensor& t, int dst, ReduceOp op, const Group& group, Completion how) {
  return comm::reduce(t, dst, op, group, how);
}

Work gather_tensor(const at::Tensor& in, const at::Tensor& out, int dst, const Group& group, Completion how) {
  const std::string_view fn = to_string(OpType::Gather);
  checked_dtype(in, fn);
  if (comm::rank() != dst) return comm::gather(in, at::Tensor(), dst, group, how);
  check_out(in, out, fn);
  return comm::gather(in, out, dst, group, how);
}

Work scatter_tensor(const at::Tensor& in, const at::Tensor& out, int src, const Group& group, Completion how) {
  const std::string_view fn = to_string(OpType::Scatter);
  checked_dtype(out, fn);
  if (comm::rank() != src) return comm::scatter(at::Tensor(), out, src, group, how);
  if (!in.defined()) throw ValueError(fmt::format("{}: in is undefined on src; expected a defined tensor", fn));
  check_out(out, in, fn);
  return comm::scatter(in, out, src, group, how);
}

Work reduce_scatter_tensor(const at::Tensor& in, const at::Tensor& out, ReduceOp op, const Group& group,
                           Completion how) {
  const std::string_view fn = to_string(OpType::ReduceScatter);
  checked_dtype(in, fn);
  check_out(in, out, fn);
  return comm::reduce_scatter(in, out, op, group, how);
}

Work all_to_all_tensor(const at::Tensor& in, const at::Tensor& out, const Group& group, Completion how) {
  const std::string_view fn = to_string(OpType::AllToAll);
  checked_dtype(in, fn);
  check_out(in, out, fn);
  return comm::all_to_all(in, out, group, how);
}

Work all_to_all_v_tensor(const at::Tensor& in, const at::Tensor& out, const std::vector<std::int64_t>& out_splits,
                         const std::vector<std::int64_t>& in_splits, const Group& group, Completion how) {
  const std::string_view fn = to_string(OpType::AllToAll);
  checked_dtype(in, fn);
  check_out(in, out, fn);
  const ProcessGroup& pg = comm::process_group(group);
  if (!pg.is_member()) return Work{};
  if (in.dim() == 0 || out.dim() == 0)
    throw ValueError(fmt::format("{}: in and out need a dimension 0 to split; expected tensors of dimension >= 1", fn));
  if (in.sizes().slice(1) != out.sizes().slice(1))
    throw ValueError(fmt::format("{}: in has shape {} and out {}; expected the same sizes beyond dimension 0", fn,
                                 detail::shape_str(in.sizes()), detail::shape_str(out.sizes())));
  const std::size_t n = std::size_t(pg.size());
  const std::size_t row = row_elements(in);
  const std::vector<std::size_t> in_counts = split_counts(in_splits, "input_split_sizes", n, in.size(0), row, fn);
  const std::vector<std::size_t> out_counts = split_counts(out_splits, "output_split_sizes", n, out.size(0), row, fn);
  // The counts are read until the operation completes: the Work keeps them.
  auto counts = std::make_shared<std::array<std::vector<std::size_t>, 2>>();
  (*counts)[0] = out_counts;
  (*counts)[1] = in_counts;
  Work w = comm::all_to_all_v(in, out, (*counts)[0], (*counts)[1], group, how);
  if (how == Completion::Async) w.then([counts] { (void)counts; });
  return w;
}

}  // namespace

Work reduce_async(const at::Tensor& tensor, int dst, ReduceOp op, const Group& group) {
  return reduce_tensor(tensor, dst, op, group, Completion::Async);
}

void reduce(const at::Tensor& tensor, int dst, ReduceOp op, const Group& group) {
  reduce_tensor(tensor, dst, op, group, Completion::Blocking);
}

Work gather_async(const at::Tensor& in, const at::Tensor& out, int dst, const Group& group) {
  return gather_tensor(in, out, dst, group, Completion::Async);
}

std::vector<at::Tensor> gather(const at::Tensor& tensor, int dst, const Group& group) {
  checked_dtype(tensor, to_string(OpType::Gather));
  const int world = comm::world_size();
  if (dst < 0 || dst >= world)
    throw ValueError(
        fmt::format("{}: dst should be a rank in [0, {}), but given {}", to_string(OpType::Gather), world, dst));
  const ProcessGroup& pg = comm::process_group(group);
  if (!pg.is_member()) return {};
  const bool is_dst = comm::rank() == dst;
  at::Tensor out;
  if (is_dst) {
    std::vector<std::int64_t> sizes{pg.size()};
    sizes.insert(sizes.end(), tensor.sizes().begin(), tensor.sizes().end());
    out = at::empty(sizes, tensor.options().device(comm::device()));
  }
  gather_tensor(tensor, out, dst, group, Completion::Blocking);
  if (!out.defined()) return {};
  out = out.to(tensor.device());
  std::vector<at::Tensor> parts;
  parts.reserve(std::size_t(pg.size()));
  for (std::int64_t i = 0; i < pg.size(); ++i) parts.push_back(out[i]);
  return parts;
}

Work scatter_async(const at::Tensor& in, const at::Tensor& out, int src, const Group& group) {
  return scatter_tensor(in, out, src, group, Completion::Async);
}

at::Tensor scatter(const std::vector<at::Tensor>& chunks, int src, const Group& group) {
  const std::string_view fn = to_string(OpType::Scatter);
  comm::check_src(src, fn);
  const ProcessGroup& pg = comm::process_group(group);
  if (!pg.is_member()) return at::Tensor();
  const int root = pg.position_of(src);
  if (root < 0)
    throw ValueError(
        fmt::format("{}: src {} is not a member of group {}; expected a world rank of the group", fn, src, pg.name()));
  // The source's header: [status (0 = good), scalar type, ndim, sizes...], a fixed length so that one
  // broadcast carries it; a bad argument on the source makes every rank raise.
  constexpr std::size_t kMaxDims = 16;
  std::array<std::int64_t, 3 + kMaxDims> header{};
  std::string error;
  const bool is_src = comm::rank() == src;
  if (is_src) {
    const std::size_t n = std::size_t(pg.size());
    if (chunks.size() != n) {
      error = fmt::format("chunks has {} tensors, expected one per rank of the group ({})", chunks.size(), n);
    } else {
      for (std::size_t i = 0; i < n && error.empty(); ++i) {
        if (!chunks[i].defined())
          error = fmt::format("chunks[{}] is undefined", i);
        else if (chunks[i].scalar_type() != chunks[0].scalar_type() || chunks[i].sizes() != chunks[0].sizes())
          error = fmt::format("chunks[{}] is {} {} but chunks[0] is {} {}; expected the same dtype and shape", i,
                              c10::toString(chunks[i].scalar_type()), detail::shape_str(chunks[i].sizes()),
                              c10::toString(chunks[0].scalar_type()), detail::shape_str(chunks[0].sizes()));
      }
      if (error.empty() && std::size_t(chunks[0].dim()) > kMaxDims)
        error = fmt::format("chunks have {} dimensions, expected at most {}", chunks[0].dim(), kMaxDims);
      if (error.empty()) {
        try {
          to_dtype(chunks[0].scalar_type());
        } catch (const ValueError& e) {
          error = e.what();
        }
      }
    }
    header[0] = error.empty() ? 0 : 1;
    if (error.empty()) {
      header[1] = std::int64_t(chunks[0].scalar_type());
      header[2] = chunks[0].dim();
      for (std::int64_t d = 0; d < chunks[0].dim(); ++d) header[3 + std::size_t(d)] = chunks[0].size(d);
    }
  }
  if (pg.size() > 1)
    comm::broadcast(at::from_blob(header.data(), {std::int64_t(header.size())}, at::kLong), src, group,
                    Completion::Blocking);
  if (header[0] != 0) {
    if (is_src) throw ValueError(fmt::format("{}: {}", fn, error));
    throw ValueError(fmt::format("{}: src {} passed invalid chunks (see its error)", fn, src));
  }
  const auto st = c10::ScalarType(header[1]);
  const std::vector<std::int64_t> sizes(header.begin() + 3, header.begin() + 3 + header[2]);
  const c10::Device home = is_src ? chunks[0].device() : to_torch_device(idist::device());
  const c10::Device dev = comm::device();
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(st).device(dev));
  at::Tensor in;
  if (is_src) {
    std::vector<at::Tensor> staged;
    staged.reserve(chunks.size());
    for (const auto& c : chunks) staged.push_back(c.detach().to(dev));
    in = at::stack(staged);
  }
  scatter_tensor(in, out, src, group, Completion::Blocking);
  return out.to(home);
}

Work reduce_scatter_async(const at::Tensor& in, const at::Tensor& out, ReduceOp op, const Group& group) {
  return reduce_scatter_tensor(in, out, op, group, Completion::Async);
}

at::Tensor reduce_scatter(const at::Tensor& input, ReduceOp op, const Group& group) {
  const std::string_view fn = to_string(OpType::ReduceScatter);
  checked_dtype(input, fn);
  const ProcessGroup& pg = comm::process_group(group);
  if (!pg.is_member()) return input;
  const std::int64_t rows = rows_of(input, fn, pg.size());
  std::vector<std::int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[0] = rows / pg.size();
  at::Tensor out = at::empty(sizes, input.options().device(comm::device()));
  reduce_scatter_tensor(input, out, op, group, Completion::Blocking);
  return out.to(input.device());
}

Work all_to_all_async(const at::Tensor& in, const at::Tensor& out, const Group& group) {
  return all_to_all_tensor(in, out, group, Completion::Async);
}

Work all_to_all_async(const at::Tensor& in, const at::Tensor& out, const std::vector<std::int64_t>& output_split_sizes,
                      const std::vector<std::int64_t>& input_split_sizes, const Group& group) {
  return all_to_all_v_tensor(in, out, output_split_sizes, input_split_sizes, group, Completion::Async);
}

at::Tensor all_to_all(const at::Tensor& input, const Group& group) {
  const std::string_view fn = to_string(OpType::AllToAll);
  checked_dtype(input, fn);
  const ProcessGroup& pg = comm::process_group(group);
  if (!pg.is_member()) return input;
  rows_of(input, fn, pg.size());
  at::Tensor out = at::empty(input.sizes(), input.options().device(comm::device()));
  all_to_all_tensor(input, out, group, Completion::Blocking);
  return out.to(input.device());
}

at::Tensor all_to_all(const at::Tensor& input, const std::vector<std::int64_t>& output_split_sizes,
                      const std::vector<std::int64_t>& input_split_sizes, const Group& group) {
  const std::string_view fn = to_string(OpType::AllToAll);
  checked_dtype(input, fn);
  const ProcessGroup& pg = comm::process_group(group);
  if (!pg.is_member()) return input;
  rows_of(input, fn, 0);
  // Checked here too so that a bad list is refused before the output is sized from it.
  split_counts(output_split_sizes, "output_split_sizes", std::size_t(pg.size()), -1, 1, fn);
  std::vector<std::int64_t> sizes(input.sizes().begin(), input.sizes().end());
  sizes[0] = std::accumulate(output_split_sizes.begin(), output_split_sizes.end(), std::int64_t{0});
  at::Tensor out = at::empty(sizes, input.options().device(comm::device()));
  all_to_all_v_tensor(input, out, output_split_sizes, input_split_sizes, group, Completion::Blocking);
  return out.to(input.device());
}

}  // namespace idist

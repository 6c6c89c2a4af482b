// NCCLModel: the rooted reductions (ncclReduce), reduce_scatter (ncclReduceScatter; uneven blocks as
// grouped ncclReduce calls), and gather, scatter, all_to_all(v) and send / recv as ncclSend /
// ncclRecv, several in one NCCL group.
#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "nccl/nccl_model.hpp"
#include "nccl/nccl_types.hpp"

namespace idist::nccl_backend {

namespace {

// Runs `queue()` (ncclSend / ncclRecv calls through o.nccl_queued) inside one NCCL group.
template <class Queue>
void in_group(Op& o, Queue queue) {
  o.nccl_queued(ncclGroupStart());
  try {
    queue();
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  o.nccl(ncclGroupEnd());
}

}  // namespace

Work NCCLModel::reduce_rooted_or_scattered(const Reduction& r, Completion how) {
  const ReducePlan plan = reduction_for(r.in.dtype, r.reduce_op);
  if (plan.kind != ReducePlan::Kind::Native)
    throw BackendError(fmt::format("the nccl backend does not support {} of {} with {} (NCCL cannot reduce them)",
                                   to_string(r.op), to_string(r.in.dtype), to_string(r.reduce_op)));
  if (r.op == OpType::Reduce) {
    Buffer data = r.out;
    data.device = placement(r.op, "data", data.data, data.bytes(), data.device);
    if (data.count == 0) return Work{};
    Op o(r.op, comm_of(r.group), op_context());
    // Only the root receives; the others send, and their buffer is left as it was.
    const bool is_root = r.group.rank() == r.root;
    void* d = is_root ? o.inout(data) : const_cast<void*>(o.input(ConstBuffer(data)));
    o.nccl(ncclReduce(d, d, data.count, plan.type, plan.op, r.root, o.handle(), o.stream()));
    return o.finish(how);
  }
  if (r.op == OpType::ReduceScatterV) return reduce_scatter_v(r, plan, how);
  ConstBuffer in = r.in;
  Buffer out = r.out;
  in.device = placement(r.op, "in", in.data, in.bytes(), in.device);
  out.device = placement(r.op, "out", out.data, out.bytes(), out.device);
  if (out.count == 0) return Work{};
  Op o(r.op, comm_of(r.group), op_context());
  const void* din = o.input(in);
  void* dout = o.output(out);
  o.nccl(ncclReduceScatter(din, dout, out.count, plan.type, plan.op, o.handle(), o.stream()));
  return o.finish(how);
}

// NCCL has no reduce-scatter of uneven blocks: one ncclReduce per rank with a block, rooted at that
// rank, in one NCCL group. A rank that is not the root passes its block as the (unused) receive buffer.
Work NCCLModel::reduce_scatter_v(const Reduction& r, const ReducePlan& plan, Completion how) {
  ConstBuffer in = r.in;
  Buffer out = r.out;
  in.device = placement(r.op, "in", in.data, in.bytes(), in.device);
  if (out.count > 0) out.device = placement(r.op, "out", out.data, out.bytes(), out.device);
  if (in.count == 0) return Work{};
  Op o(r.op, comm_of(r.group), op_context());
  const auto* din = static_cast<const char*>(o.input(in));
  void* dout = out.count > 0 ? o.output(out) : nullptr;
  const std::size_t esize = dtype_size(in.dtype);
  const int me = r.group.rank();
  in_group(o, [&] {
    std::size_t offset = 0;
    for (std::size_t root = 0; root < r.counts.size(); ++root) {
      const std::size_t count = r.counts[root];
      if (count > 0) {
        const void* send = din + offset * esize;
        void* recv = int(root) == me ? dout : const_cast<void*>(send);
        o.nccl_queued(ncclReduce(send, recv, count, plan.type, plan.op, int(root), o.handle(), o.stream()));
      }
      offset += count;
    }
  });
  return o.finish(how);
}

Work NCCLModel::gather_to_root(const Gathering& g, Completion how) {
  ConstBuffer in = g.in;
  Buffer out = g.out;
  in.device = placement(g.op, "in", in.data, in.bytes(), in.device);
  if (in.count == 0) return Work{};
  const bool is_root = g.group.rank() == g.root;
  if (is_root) out.device = placement(g.op, "out", out.data, out.bytes(), out.device);
  Op o(g.op, comm_of(g.group), op_context());
  const void* din = o.input(in);
  const std::size_t bytes = in.bytes();
  if (!is_root) {
    in_group(o, [&] { o.nccl_queued(ncclSend(din, bytes, ncclUint8, g.root, o.handle(), o.stream())); });
    return o.finish(how);
  }
  auto* dout = static_cast<char*>(o.output(out));
  o.copy(dout + std::size_t(g.root) * bytes, din, bytes, cudaMemcpyDeviceToDevice);
  in_group(o, [&] {
    for (int r = 0; r < g.group.size(); ++r)
      if (r != g.root)
        o.nccl_queued(ncclRecv(dout + std::size_t(r) * bytes, bytes, ncclUint8, r, o.handle(), o.stream()));
  });
  return o.finish(how);
}

Work NCCLModel::exchange_blocks(const Distribution& d, Completion how) {
  const std::size_t n = std::size_t(d.group.size());
  const std::size_t me = std::size_t(d.group.rank());
  const std::size_t esize = dtype_size(d.out.dtype);
  // Elements sent to and received from each group rank, and where each block starts.
  std::vector<std::size_t> sends(n, 0), receives(n, 0);
  if (d.op == OpType::Scatter) {
    receives[std::size_t(d.root)] = d.out.count;
    if (int(me) == d.root) sends.assign(n, d.out.count);
  } else if (d.op == OpType::AllToAll) {
    sends.assign(n, d.in.count / n);
    receives.assign(n, d.out.count / n);
  } else {
    sends.assign(d.in_counts.begin(), d.in_counts.end());
    receives.assign(d.counts.begin(), d.counts.end());
  }
  ConstBuffer in = d.in;
  Buffer out = d.out;
  const bool sends_any = d.op != OpType::Scatter || int(me) == d.root;
  if (sends_any) in.device = placement(d.op, "in", in.data, in.bytes(), in.device);
  out.device = placement(d.op, "out", out.data, out.bytes(), out.device);
  if (in.count == 0 && out.count == 0) return Work{};
  Op o(d.op, comm_of(d.group), op_context());
  const auto* din = sends_any && in.count ? static_cast<const char*>(o.input(in)) : nullptr;
  auto* dout = out.count ? static_cast<char*>(o.output(out)) : nullptr;
  std::vector<std::size_t> send_at(n, 0), recv_at(n, 0);
  for (std::size_t i = 1; i < n; ++i) {
    send_at[i] = send_at[i - 1] + sends[i - 1];
    recv_at[i] = recv_at[i - 1] + receives[i - 1];
  }
  if (receives[me])
    o.copy(dout + recv_at[me] * esize, din + send_at[me] * esize, receives[me] * esize, cudaMemcpyDeviceToDevice);
  in_group(o, [&] {
    for (std::size_t r = 0; r < n; ++r) {
      if (r == me) continue;
      if (sends[r])
        o.nccl_queued(ncclSend(din + send_at[r] * esize, sends[r] * esize, ncclUint8, int(r), o.handle(), o.stream()));
      if (receives[r])
        o.nccl_queued(
            ncclRecv(dout + recv_at[r] * esize, receives[r] * esize, ncclUint8, int(r), o.handle(), o.stream()));
    }
  });
  return o.finish(how);
}

Work NCCLModel::do_point_to_point(const PointToPoint& p, Completion how) {
  Buffer data = p.data;
  data.device = placement(p.op, "data", data.data, data.bytes(), data.device);
  if (data.count == 0) return Work{};
  Op o(p.op, comm_of(p.group), op_context());
  if (p.op == OpType::Send) {
    const void* d = o.input(ConstBuffer(data));
    o.nccl(ncclSend(d, data.bytes(), ncclUint8, p.peer, o.handle(), o.stream()));
  } else {
    void* d = o.output(data);
    o.nccl(ncclRecv(d, data.bytes(), ncclUint8, p.peer, o.handle(), o.stream()));
  }
  return o.finish(how);
}

}  // namespace idist::nccl_backend

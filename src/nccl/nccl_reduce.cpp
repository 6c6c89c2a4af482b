// NCCLBackend's reductions: all_reduce (ncclAllReduce, or the host fallback for what NCCL cannot
// reduce), the rooted reduce (ncclReduce), reduce_scatter (ncclReduceScatter) and reduce_scatter_v
// (grouped ncclReduce calls); the last three only for what NCCL reduces natively.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <memory>

#include <fmt/format.h>

#include "backend_kit/host_reduce.hpp"
#include "backend_kit/op_family.hpp"
#include "idist/error.hpp"
#include "nccl/nccl_backend.hpp"
#include "nccl/nccl_group_calls.hpp"
#include "nccl/nccl_types.hpp"

namespace idist::nccl_backend {

namespace {

// The host fallback of all_reduce: gather every rank's row, reduce on the host in stream order, copy
// the result back into `d`.
void all_reduce_on_host(Op& op, void* d, std::size_t count, DType dtype, ReduceOp rop, int nranks) {
  const std::size_t bytes = count * dtype_size(dtype);
  void* rows = op.scratch(bytes * std::size_t(nranks));
  op.nccl(ncclAllGather(d, rows, bytes, ncclUint8, op.handle(), op.stream()));
  std::shared_ptr<void> host_rows = op.pinned(bytes * std::size_t(nranks));
  std::shared_ptr<void> host_out = op.pinned(bytes);
  op.copy(host_rows.get(), rows, bytes * std::size_t(nranks), cudaMemcpyDeviceToHost);
  op.host([host_rows, host_out, count, nranks, dtype, rop] {
    backend_kit::reduce_rows(host_out.get(), host_rows.get(), count, nranks, dtype, rop);
  });
  op.copy(d, host_out.get(), bytes, cudaMemcpyHostToDevice);
}

// NCCL's plan for the rooted and scattered reductions, which have no host fallback.
// @throws BackendError when NCCL cannot reduce the element type with the operator.
ReducePlan native_reduction(const Reduction& r) {
  const ReducePlan plan = reduction_for(r.in.dtype, r.reduce_op);
  if (plan.kind != ReducePlan::Kind::Native)
    throw BackendError(fmt::format("the nccl backend does not support {} of {} with {} (NCCL cannot reduce them)",
                                   to_string(r.op), to_string(r.in.dtype), to_string(r.reduce_op)));
  return plan;
}

}  // namespace

Work NCCLBackend::do_reduce(const Reduction& r, Completion how) {
  switch (r.op) {
    case OpType::AllReduce: return all_reduce(r, how);
    case OpType::Reduce: return reduce_to_root(r, native_reduction(r), how);
    case OpType::ReduceScatter: return reduce_scatter(r, native_reduction(r), how);
    case OpType::ReduceScatterV:
      return reduce_scatter_v(r, native_reduction(r), how);
    IDIST_OPTYPES_OUTSIDE_REDUCTION:
      break;
  }
  backend_kit::outside_family(r.op, backend_kit::OpFamily::Reduction);
}

Work NCCLBackend::all_reduce(const Reduction& r, Completion how) {
  const ReducePlan plan = reduction_for(r.out.dtype, r.reduce_op);
  Buffer data = r.out;
  data.device = placement(r.op, "data", data.data, data.bytes(), data.device);
  if (data.count == 0) return Work{};
  Op o(r.op, comm_of(r.group), op_context());
  void* d = o.inout(data);
  if (plan.kind == ReducePlan::Kind::Native)
    o.nccl(ncclAllReduce(d, d, data.count, plan.type, plan.op, o.handle(), o.stream()));
  else
    all_reduce_on_host(o, d, data.count, data.dtype, r.reduce_op, r.group.size());
  return o.finish(how);
}

Work NCCLBackend::reduce_to_root(const Reduction& r, const ReducePlan& plan, Completion how) {
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

Work NCCLBackend::reduce_scatter(const Reduction& r, const ReducePlan& plan, Completion how) {
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
Work NCCLBackend::reduce_scatter_v(const Reduction& r, const ReducePlan& plan, Completion how) {
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

}  // namespace idist::nccl_backend

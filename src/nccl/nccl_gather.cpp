// NCCLBackend's gatherings: all_gather (ncclAllGather of bytes), all_gather_v (one ncclBroadcast per
// rank, in one NCCL group) and the rooted gather (ncclSend to the root / ncclRecv from every rank, in
// one NCCL group).
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

#include "backend_kit/op_family.hpp"
#include "nccl/nccl_backend.hpp"
#include "nccl/nccl_group_calls.hpp"

namespace idist::nccl_backend {

Work NCCLBackend::do_gather(const Gathering& g, Completion how) {
  switch (g.op) {
    case OpType::AllGather: return all_gather(g, how);
    case OpType::AllGatherV: return all_gather_v(g, how);
    case OpType::Gather:
      return gather_to_root(g, how);
    IDIST_OPTYPES_OUTSIDE_GATHERING:
      break;
  }
  backend_kit::outside_family(g.op, backend_kit::OpFamily::Gathering);
}

template <class Issue>
Work NCCLBackend::gather_to_all(const Gathering& g, Completion how, Issue issue) {
  ConstBuffer in = g.in;
  Buffer out = g.out;
  in.device = placement(g.op, "in", in.data, in.bytes(), in.device);
  out.device = placement(g.op, "out", out.data, out.bytes(), out.device);
  if (out.count == 0) return Work{};
  Op o(g.op, comm_of(g.group), op_context());
  const void* din = o.input(in);
  issue(o, din, static_cast<char*>(o.output(out)));
  return o.finish(how);
}

Work NCCLBackend::all_gather(const Gathering& g, Completion how) {
  return gather_to_all(g, how, [&](Op& o, const void* din, char* dout) {
    // Data movement only: bytes serve every element type, int16 and bool included.
    o.nccl(ncclAllGather(din, dout, g.in.bytes(), ncclUint8, o.handle(), o.stream()));
  });
}

Work NCCLBackend::all_gather_v(const Gathering& g, Completion how) {
  return gather_to_all(g, how, [&](Op& o, const void* din, char* dout) {
    const std::size_t esize = dtype_size(g.in.dtype);
    // One broadcast per contributing rank, fused into one NCCL launch by the group.
    in_group(o, [&] {
      std::size_t offset = 0;
      for (std::size_t r = 0; r < g.counts.size(); ++r) {
        const std::size_t bytes = g.counts[r] * esize;
        if (bytes == 0) continue;
        const void* send = int(r) == g.group.rank() ? din : dout + offset;
        o.nccl_queued(ncclBroadcast(send, dout + offset, bytes, ncclUint8, int(r), o.handle(), o.stream()));
        offset += bytes;
      }
    });
  });
}

Work NCCLBackend::gather_to_root(const Gathering& g, Completion how) {
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

}  // namespace idist::nccl_backend

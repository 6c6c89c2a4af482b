// NCCLBackend's distributions: broadcast (ncclBroadcast of bytes), and scatter, all_to_all and
// all_to_all_v as ncclSend / ncclRecv of each block, in one NCCL group.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>
#include <vector>

#include "backend_kit/op_family.hpp"
#include "nccl/nccl_backend.hpp"
#include "nccl/nccl_group_calls.hpp"

namespace idist::nccl_backend {

Work NCCLBackend::do_distribute(const Distribution& d, Completion how) {
  const std::size_t n = std::size_t(d.group.size());
  switch (d.op) {
    case OpType::Broadcast: return broadcast(d, how);
    case OpType::Scatter: {
      // The root sends one block to every rank; only the root reads `in`.
      const bool is_root = d.group.rank() == d.root;
      std::vector<std::size_t> sends(n, 0), receives(n, 0);
      receives[std::size_t(d.root)] = d.out.count;
      if (is_root) sends.assign(n, d.out.count);
      return exchange_blocks(d, sends, receives, /*sends_any=*/is_root, how);
    }
    case OpType::AllToAll:
      return exchange_blocks(d, std::vector<std::size_t>(n, d.in.count / n),
                             std::vector<std::size_t>(n, d.out.count / n), /*sends_any=*/true, how);
    case OpType::AllToAllV:
      return exchange_blocks(d, std::vector<std::size_t>(d.in_counts.begin(), d.in_counts.end()),
                             std::vector<std::size_t>(d.counts.begin(), d.counts.end()), /*sends_any=*/true, how);
    IDIST_OPTYPES_OUTSIDE_DISTRIBUTION:
      break;
  }
  backend_kit::outside_family(d.op, backend_kit::OpFamily::Distribution);
}

Work NCCLBackend::broadcast(const Distribution& d, Completion how) {
  Buffer data = d.out;
  data.device = placement(d.op, "data", data.data, data.bytes(), data.device);
  if (data.count == 0) return Work{};
  Op o(d.op, comm_of(d.group), op_context());
  void* p = o.inout(data);
  o.nccl(ncclBroadcast(p, p, data.bytes(), ncclUint8, d.root, o.handle(), o.stream()));
  return o.finish(how);
}

Work NCCLBackend::exchange_blocks(const Distribution& d, const std::vector<std::size_t>& sends,
                                  const std::vector<std::size_t>& receives, bool sends_any, Completion how) {
  const std::size_t n = std::size_t(d.group.size());
  const std::size_t me = std::size_t(d.group.rank());
  const std::size_t esize = dtype_size(d.out.dtype);
  ConstBuffer in = d.in;
  Buffer out = d.out;
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

}  // namespace idist::nccl_backend

// NCCLBackend: send and recv as ncclSend / ncclRecv on the world's communicator.
#include <nccl.h>

#include "backend_kit/op_family.hpp"
#include "nccl/nccl_backend.hpp"

namespace idist::nccl_backend {

Work NCCLBackend::do_point_to_point(const PointToPoint& p, Completion how) {
  switch (p.op) {
    case OpType::Send: return transfer(p, /*sending=*/true, how);
    case OpType::Recv:
      return transfer(p, /*sending=*/false, how);
    IDIST_OPTYPES_OUTSIDE_POINT_TO_POINT:
      break;
  }
  backend_kit::outside_family(p.op, backend_kit::OpFamily::PointToPoint);
}

Work NCCLBackend::transfer(const PointToPoint& p, bool sending, Completion how) {
  Buffer data = p.data;
  data.device = placement(p.op, "data", data.data, data.bytes(), data.device);
  if (data.count == 0) return Work{};
  Op o(p.op, comm_of(p.group), op_context());
  if (sending) {
    const void* d = o.input(ConstBuffer(data));
    o.nccl(ncclSend(d, data.bytes(), ncclUint8, p.peer, o.handle(), o.stream()));
  } else {
    void* d = o.output(data);
    o.nccl(ncclRecv(d, data.bytes(), ncclUint8, p.peer, o.handle(), o.stream()));
  }
  return o.finish(how);
}

}  // namespace idist::nccl_backend

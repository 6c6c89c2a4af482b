// The tensor forms of send, recv, isend and irecv (idist/torch/collectives.hpp).
#include "idist/torch/collectives.hpp"
#include "torch/comm/comm.hpp"
#include "torch/comm/staging.hpp"

namespace idist {

namespace {

Work send_tensor(const at::Tensor& t, int dst, int tag, Completion how) {
  detail::checked_dtype(t, to_string(OpType::Send));
  return detail::comm::send(t, dst, tag, how);
}

Work recv_tensor(const at::Tensor& t, int src, int tag, Completion how) {
  detail::checked_dtype(t, to_string(OpType::Recv));
  return detail::comm::recv(t, src, tag, how);
}

}  // namespace

void send(const at::Tensor& tensor, int dst, int tag) { send_tensor(tensor, dst, tag, Completion::Blocking); }

void recv(const at::Tensor& tensor, int src, int tag) { recv_tensor(tensor, src, tag, Completion::Blocking); }

Work isend(const at::Tensor& tensor, int dst, int tag) { return send_tensor(tensor, dst, tag, Completion::Async); }

Work irecv(const at::Tensor& tensor, int src, int tag) { return recv_tensor(tensor, src, tag, Completion::Async); }

}  // namespace idist

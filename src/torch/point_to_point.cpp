// The tensor forms of send, recv, isend and irecv (idist/torch/collectives.hpp).
#include "idist/torch/collectives.hpp"
#include "torch/staging.hpp"

namespace idist {

namespace {

Work send_tensor(const at::Tensor& t, int dst, int tag, Completion how) {
  ComputationModel& m = current_model();
  detail::checked_dtype(t, to_string(OpType::Send));
  const detail::Staged s = detail::stage(t, detail::comm_device(m));
  Work w = m.send(ConstBuffer(detail::tensor_buffer(s.buffer)), dst, tag, how);
  if (how == Completion::Async) w.then([keep = s.buffer] { (void)keep; });
  return w;
}

Work recv_tensor(const at::Tensor& t, int src, int tag, Completion how) {
  ComputationModel& m = current_model();
  detail::checked_dtype(t, to_string(OpType::Recv));
  const detail::Staged s = detail::stage(t, detail::comm_device(m));
  return detail::finish(m.recv(detail::tensor_buffer(s.buffer), src, tag, how), t, s, how);
}

}  // namespace

void send(const at::Tensor& tensor, int dst, int tag) { send_tensor(tensor, dst, tag, Completion::Blocking); }

void recv(const at::Tensor& tensor, int src, int tag) { recv_tensor(tensor, src, tag, Completion::Blocking); }

Work isend(const at::Tensor& tensor, int dst, int tag) { return send_tensor(tensor, dst, tag, Completion::Async); }

Work irecv(const at::Tensor& tensor, int src, int tag) { return recv_tensor(tensor, src, tag, Completion::Async); }

}  // namespace idist

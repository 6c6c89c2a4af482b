// The tensor forms of send, recv, isend and irecv (idist/torch/collectives.hpp).
#include "idist/torch/collectives.hpp"
#include "torch/comm/comm.hpp"

namespace idist {

namespace comm = detail::comm;

void send(const at::Tensor& tensor, int dst, int tag) { comm::send(tensor, dst, tag, Completion::Blocking); }

void recv(const at::Tensor& tensor, int src, int tag) { comm::recv(tensor, src, tag, Completion::Blocking); }

Work isend(const at::Tensor& tensor, int dst, int tag) { return comm::send(tensor, dst, tag, Completion::Async); }

Work irecv(const at::Tensor& tensor, int src, int tag) { return comm::recv(tensor, src, tag, Completion::Async); }

}  // namespace idist

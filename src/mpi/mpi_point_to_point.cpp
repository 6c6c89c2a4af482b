// MPIBackend: send and recv on the backend's own duplicate of the world communicator.
#include <fmt/format.h>

#include "backend_kit/op_family.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_backend.hpp"

namespace idist::mpi_backend {

Work MPIBackend::do_point_to_point(const PointToPoint& p, Completion how) {
  health_->check(to_string(p.op), rank());
  if (p.tag > tag_ub_)
    throw ValueError(
        fmt::format("{}: tag should be at most {} (MPI_TAG_UB), but given {}", to_string(p.op), tag_ub_, p.tag));
  check_int_counts(p.op, {p.data.count});
  const MPI_Datatype type = types_.datatype(p.data.dtype);
  const int n = int(p.data.count);
  const MPI_Comm comm = p2p_comm_;
  switch (p.op) {
    case OpType::Send:
      return run_op(
          p.op, p.group, how, "MPI_Send", [&] { return MPI_Send(p.data.data, n, type, p.peer, p.tag, comm); },
          "MPI_Isend", [&](MPI_Request* q) { return MPI_Isend(p.data.data, n, type, p.peer, p.tag, comm, q); });
    case OpType::Recv:
      return run_op(
          p.op, p.group, how, "MPI_Recv",
          [&] { return MPI_Recv(p.data.data, n, type, p.peer, p.tag, comm, MPI_STATUS_IGNORE); }, "MPI_Irecv",
          [&](MPI_Request* q) { return MPI_Irecv(p.data.data, n, type, p.peer, p.tag, comm, q); });
    IDIST_OPTYPES_OUTSIDE_POINT_TO_POINT:
      break;
  }
  backend_kit::outside_family(p.op, backend_kit::OpFamily::PointToPoint);
}

}  // namespace idist::mpi_backend

// MPIBackend's distributions: broadcast (chunked beyond MPI's int counts), the rooted scatter,
// all_to_all and all_to_all_v, each one MPI call (blocking under the watchdog, or non-blocking and
// polled).
#include <cstddef>
#include <numeric>
#include <utility>
#include <vector>

#include "backend_kit/op_family.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi/mpi_backend_calls.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

Work MPIBackend::do_distribute(const Distribution& d, Completion how) {
  const MPI_Comm comm = healthy_comm(d.group, d.op);
  switch (d.op) {
    case OpType::Broadcast: return broadcast(d, comm, how);
    case OpType::Scatter: return scatter_from_root(d, comm, how);
    case OpType::AllToAll: return all_to_all(d, comm, how);
    case OpType::AllToAllV:
      return all_to_all_v(d, comm, how);
    IDIST_OPTYPES_OUTSIDE_DISTRIBUTION:
      break;
  }
  backend_kit::outside_family(d.op, backend_kit::OpFamily::Distribution);
}

Work MPIBackend::broadcast(const Distribution& d, MPI_Comm comm, Completion how) {
  const Buffer& data = d.out;
  const MPI_Datatype type = types_.datatype(data.dtype);
  if (how == Completion::Blocking && watchdog_ && data.count <= max_count_) {
    if (run_watched(d.op, d.group, "MPI_Bcast",
                    [&] { return MPI_Bcast(data.data, int(data.count), type, d.root, comm); }))
      return Work{};
  }
  return post_in_chunks(data, max_count_, "MPI_Ibcast", d.op, how, [&](void* p, int n, MPI_Request* request) {
    return MPI_Ibcast(p, n, type, d.root, comm, request);
  });
}

Work MPIBackend::scatter_from_root(const Distribution& d, MPI_Comm comm, Completion how) {
  check_int_counts(d.op, {d.out.count * std::size_t(d.group.size())});
  const MPI_Datatype type = types_.datatype(d.out.dtype);
  const int n = int(d.out.count);
  const int root = d.root;
  return run_op(
      d.op, d.group, how, "MPI_Scatter",
      [&] { return MPI_Scatter(d.in.data, n, type, d.out.data, n, type, root, comm); }, "MPI_Iscatter",
      [&](MPI_Request* q) { return MPI_Iscatter(d.in.data, n, type, d.out.data, n, type, root, comm, q); });
}

Work MPIBackend::all_to_all(const Distribution& d, MPI_Comm comm, Completion how) {
  const MPI_Datatype type = types_.datatype(d.out.dtype);
  check_int_counts(d.op, {d.in.count});
  const int k = int(d.in.count / std::size_t(d.group.size()));
  return run_op(
      d.op, d.group, how, "MPI_Alltoall", [&] { return MPI_Alltoall(d.in.data, k, type, d.out.data, k, type, comm); },
      "MPI_Ialltoall", [&](MPI_Request* q) { return MPI_Ialltoall(d.in.data, k, type, d.out.data, k, type, comm, q); });
}

Work MPIBackend::all_to_all_v(const Distribution& d, MPI_Comm comm, Completion how) {
  const MPI_Datatype type = types_.datatype(d.out.dtype);
  check_int_counts(d.op, {d.in.count, d.out.count});
  // Send counts, send displacements, receive counts, receive displacements: MPI reads them until the
  // operation completes, so the Work keeps them.
  const std::size_t n = d.in_counts.size();
  std::vector<int> ints(4 * n);
  for (std::size_t i = 0; i < n; ++i) {
    ints[i] = int(d.in_counts[i]);
    ints[2 * n + i] = int(d.counts[i]);
  }
  std::exclusive_scan(ints.begin(), ints.begin() + std::ptrdiff_t(n), ints.begin() + std::ptrdiff_t(n), 0);
  std::exclusive_scan(ints.begin() + std::ptrdiff_t(2 * n), ints.begin() + std::ptrdiff_t(3 * n),
                      ints.begin() + std::ptrdiff_t(3 * n), 0);
  const int* sc = ints.data();
  const int* sd = sc + n;
  const int* rc = sc + 2 * n;
  const int* rd = sc + 3 * n;
  return run_op(
      d.op, d.group, how, "MPI_Alltoallv",
      [&] { return MPI_Alltoallv(d.in.data, sc, sd, type, d.out.data, rc, rd, type, comm); }, "MPI_Ialltoallv",
      [&](MPI_Request* q) { return MPI_Ialltoallv(d.in.data, sc, sd, type, d.out.data, rc, rd, type, comm, q); },
      std::move(ints));
}

}  // namespace idist::mpi_backend

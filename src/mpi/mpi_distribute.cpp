// MPIModel: the rooted reductions, gathers and scatters, reduce_scatter and all_to_all(v), each one
// MPI call (blocking under the watchdog, or non-blocking and polled).
#include <numeric>
#include <vector>

#include "mpi/mpi_error.hpp"
#include "mpi/mpi_model.hpp"

namespace idist::mpi_backend {

Work MPIModel::reduce_to_root(const Reduction& r, MPI_Comm comm, Completion how) {
  const Buffer& data = r.out;
  check_int_counts(r.op, {data.count});
  const MPI_Datatype type = types_.datatype(data.dtype);
  const MPI_Op op = types_.op(data.dtype, r.reduce_op);
  const int n = int(data.count);
  const int root = r.root;
  // The root reduces in place; the others only send, so their buffers keep their values.
  const bool is_root = r.group.rank() == root;
  const void* send = is_root ? MPI_IN_PLACE : data.data;
  void* recv = is_root ? data.data : nullptr;
  return run_op(
      r.op, r.group, how, "MPI_Reduce", [&] { return MPI_Reduce(send, recv, n, type, op, root, comm); }, "MPI_Ireduce",
      [&](MPI_Request* q) { return MPI_Ireduce(send, recv, n, type, op, root, comm, q); });
}

Work MPIModel::reduce_scatter(const Reduction& r, MPI_Comm comm, Completion how) {
  check_int_counts(r.op, {r.in.count});
  const MPI_Datatype type = types_.datatype(r.in.dtype);
  const MPI_Op op = types_.op(r.in.dtype, r.reduce_op);
  const int n = int(r.out.count);
  return run_op(
      r.op, r.group, how, "MPI_Reduce_scatter_block",
      [&] { return MPI_Reduce_scatter_block(r.in.data, r.out.data, n, type, op, comm); }, "MPI_Ireduce_scatter_block",
      [&](MPI_Request* q) { return MPI_Ireduce_scatter_block(r.in.data, r.out.data, n, type, op, comm, q); });
}

Work MPIModel::reduce_scatter_v(const Reduction& r, MPI_Comm comm, Completion how) {
  check_int_counts(r.op, {r.in.count});
  const MPI_Datatype type = types_.datatype(r.in.dtype);
  const MPI_Op op = types_.op(r.in.dtype, r.reduce_op);
  const std::size_t n = r.counts.size();
  std::vector<int> counts(n);
  for (std::size_t i = 0; i < n; ++i) counts[i] = int(r.counts[i]);
  if (how == Completion::Blocking && blocking_collectives())
    return run_op(
        r.op, r.group, how, "MPI_Reduce_scatter",
        [&] { return MPI_Reduce_scatter(r.in.data, r.out.data, counts.data(), type, op, comm); }, "MPI_Ireduce_scatter",
        [&](MPI_Request* q) { return MPI_Ireduce_scatter(r.in.data, r.out.data, counts.data(), type, op, comm, q); },
        counts);
  const int me = r.group.rank();
  const auto* in = static_cast<const char*>(r.in.data);
  const std::size_t esize = dtype_size(r.in.dtype);
  std::vector<MPI_Request> requests;
  requests.reserve(n);
  std::size_t offset = 0;
  for (std::size_t root = 0; root < n; ++root) {
    if (counts[root] > 0) {
      MPI_Request request;
      int rc;
      {
        MpiCallGuard guard;
        rc = MPI_Ireduce(in + offset * esize, int(root) == me ? r.out.data : nullptr, counts[root], type, op, int(root),
                         comm, &request);
      }
      check(rc, "MPI_Ireduce");
      requests.push_back(request);
    }
    offset += r.counts[root];
  }
  return complete(make_work(std::move(requests), {}, "MPI_Ireduce", r.op), how);
}

Work MPIModel::gather_to_root(const Gathering& g, MPI_Comm comm, Completion how) {
  check_int_counts(g.op, {g.in.count * std::size_t(g.group.size())});
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  const int n = int(g.in.count);
  const int root = g.root;
  return run_op(
      g.op, g.group, how, "MPI_Gather", [&] { return MPI_Gather(g.in.data, n, type, g.out.data, n, type, root, comm); },
      "MPI_Igather",
      [&](MPI_Request* q) { return MPI_Igather(g.in.data, n, type, g.out.data, n, type, root, comm, q); });
}

Work MPIModel::scatter_from_root(const Distribution& d, MPI_Comm comm, Completion how) {
  check_int_counts(d.op, {d.out.count * std::size_t(d.group.size())});
  const MPI_Datatype type = types_.datatype(d.out.dtype);
  const int n = int(d.out.count);
  const int root = d.root;
  return run_op(
      d.op, d.group, how, "MPI_Scatter",
      [&] { return MPI_Scatter(d.in.data, n, type, d.out.data, n, type, root, comm); }, "MPI_Iscatter",
      [&](MPI_Request* q) { return MPI_Iscatter(d.in.data, n, type, d.out.data, n, type, root, comm, q); });
}

Work MPIModel::all_to_all(const Distribution& d, MPI_Comm comm, Completion how) {
  const MPI_Datatype type = types_.datatype(d.out.dtype);
  if (d.op == OpType::AllToAll) {
    check_int_counts(d.op, {d.in.count});
    const int k = int(d.in.count / std::size_t(d.group.size()));
    return run_op(
        d.op, d.group, how, "MPI_Alltoall", [&] { return MPI_Alltoall(d.in.data, k, type, d.out.data, k, type, comm); },
        "MPI_Ialltoall",
        [&](MPI_Request* q) { return MPI_Ialltoall(d.in.data, k, type, d.out.data, k, type, comm, q); });
  }
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

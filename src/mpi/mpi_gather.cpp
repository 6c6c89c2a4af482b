// MPIBackend's gatherings: all_gather (MPI_Allgather / MPI_Iallgather), all_gather_v (MPI_Iallgatherv,
// or one broadcast per rank beyond MPI's int counts) and the rooted gather.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "backend_kit/op_family.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi/mpi_backend_calls.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

Work MPIBackend::do_gather(const Gathering& g, Completion how) {
  const MPI_Comm comm = healthy_comm(g.group, g.op);
  switch (g.op) {
    case OpType::AllGather: return all_gather(g, comm, how);
    case OpType::AllGatherV: return complete(all_gather_v(g, comm), how);
    case OpType::Gather:
      return gather_to_root(g, comm, how);
    IDIST_OPTYPES_OUTSIDE_GATHERING:
      break;
  }
  backend_kit::outside_family(g.op, backend_kit::OpFamily::Gathering);
}

Work MPIBackend::all_gather(const Gathering& g, MPI_Comm comm, Completion how) {
  if (how == Completion::Blocking && watchdog_ && g.in.count <= max_count_) {
    const MPI_Datatype type = types_.datatype(g.in.dtype);
    const int n = int(g.in.count);
    if (run_watched(g.op, g.group, "MPI_Allgather",
                    [&] { return MPI_Allgather(g.in.data, n, type, g.out.data, n, type, comm); }))
      return Work{};
  }
  return complete(post_all_gather(g, comm), how);
}

Work MPIBackend::post_all_gather(const Gathering& g, MPI_Comm comm) {
  if (g.in.count > max_count_) {
    const std::vector<std::size_t> counts(std::size_t(g.group.size()), g.in.count);
    return all_gather_by_broadcasts(g, counts, comm);
  }
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Iallgather(g.in.data, int(g.in.count), type, g.out.data, int(g.in.count), type, comm, &request);
  }
  check(rc, "MPI_Iallgather");
  return make_work(request, "MPI_Iallgather", g.op);
}

Work MPIBackend::all_gather_v(const Gathering& g, MPI_Comm comm) {
  const std::span<const std::size_t> counts = g.counts;
  const std::size_t n = counts.size();
  const std::size_t total = g.out.count;  // sum(counts), checked by the front door
  // MPI-3 counts and displacements are ints: beyond that range, fall back to one broadcast per rank.
  if (total - counts.back() > max_count_ || *std::max_element(counts.begin(), counts.end()) > max_count_)
    return all_gather_by_broadcasts(g, counts, comm);

  std::vector<int> ints(2 * n);  // counts, then displacements; MPI reads them until completion
  std::size_t displ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ints[i] = int(counts[i]);
    ints[n + i] = int(displ);
    displ += counts[i];
  }
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Iallgatherv(g.in.data, int(g.in.count), type, g.out.data, ints.data(), ints.data() + n, type, comm,
                         &request);
  }
  check(rc, "MPI_Iallgatherv");
  return make_work(std::vector<MPI_Request>{request}, std::move(ints), "MPI_Iallgatherv", g.op);
}

Work MPIBackend::all_gather_by_broadcasts(const Gathering& g, std::span<const std::size_t> counts, MPI_Comm comm) {
  const std::size_t esize = dtype_size(g.in.dtype);
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  std::vector<std::size_t> displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), std::size_t{0});
  // This rank's block is the source of its own broadcasts.
  std::byte* mine = element_at(g.out.data, displs[std::size_t(g.group.rank())], esize);
  if (g.in.count && mine != g.in.data) std::memmove(mine, g.in.data, g.in.bytes());
  std::vector<MPI_Request> requests;
  MpiCallGuard guard;
  for (std::size_t root = 0; root < counts.size(); ++root) {
    for (std::size_t off = 0; off < counts[root]; off += max_count_) {
      const int n = int(std::min(max_count_, counts[root] - off));
      MPI_Request request;
      check(MPI_Ibcast(element_at(g.out.data, displs[root] + off, esize), n, type, int(root), comm, &request),
            "MPI_Ibcast");
      requests.push_back(request);
    }
  }
  return make_work(std::move(requests), {}, "MPI_Ibcast", g.op);
}

Work MPIBackend::gather_to_root(const Gathering& g, MPI_Comm comm, Completion how) {
  check_int_counts(g.op, {g.in.count * std::size_t(g.group.size())});
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  const int n = int(g.in.count);
  const int root = g.root;
  return run_op(
      g.op, g.group, how, "MPI_Gather", [&] { return MPI_Gather(g.in.data, n, type, g.out.data, n, type, root, comm); },
      "MPI_Igather",
      [&](MPI_Request* q) { return MPI_Igather(g.in.data, n, type, g.out.data, n, type, root, comm, q); });
}

}  // namespace idist::mpi_backend

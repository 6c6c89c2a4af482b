// MPIBackend's gatherings: all_gather (MPI_Allgather / MPI_Iallgather), all_gather_v (MPI_Iallgatherv),
// both as a direct exchange of the blocks for large blocks across nodes or beyond MPI's int counts,
// and the rooted gather.
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
    case OpType::AllGatherV: return all_gather_v(g, comm, how);
    case OpType::Gather:
      return gather_to_root(g, comm, how);
    IDIST_OPTYPES_OUTSIDE_GATHERING:
      break;
  }
  backend_kit::outside_family(g.op, backend_kit::OpFamily::Gathering);
}

Work MPIBackend::all_gather(const Gathering& g, MPI_Comm comm, Completion how) {
  if (g.in.count > max_count_ || (nnodes() > 1 && g.in.bytes() >= kExchangeMinBlockBytes)) {
    const std::vector<std::size_t> counts(std::size_t(g.group.size()), g.in.count);
    return all_gather_by_exchange(g, counts, comm, how);
  }
  if (how == Completion::Blocking && watchdog_) {
    const MPI_Datatype type = types_.datatype(g.in.dtype);
    const int n = int(g.in.count);
    if (run_watched(g.op, g.group, "MPI_Allgather",
                    [&] { return MPI_Allgather(g.in.data, n, type, g.out.data, n, type, comm); }))
      return Work{};
  }
  return post_all_gather(g, comm, how);
}

Work MPIBackend::post_all_gather(const Gathering& g, MPI_Comm comm, Completion how) {
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Iallgather(g.in.data, int(g.in.count), type, g.out.data, int(g.in.count), type, comm, &request);
  }
  check(rc, "MPI_Iallgather");
  return make_work(request, "MPI_Iallgather", g.op, how);
}

Work MPIBackend::all_gather_v(const Gathering& g, MPI_Comm comm, Completion how) {
  const std::span<const std::size_t> counts = g.counts;
  const std::size_t n = counts.size();
  const std::size_t total = g.out.count;  // sum(counts), checked by the front door
  const std::size_t largest = *std::max_element(counts.begin(), counts.end());
  // MPI-3 counts and displacements are ints: beyond that range, the exchange (which has no displacements).
  if (total - counts.back() > max_count_ || largest > max_count_ ||
      (nnodes() > 1 && largest * dtype_size(g.in.dtype) >= kExchangeMinBlockBytes))
    return all_gather_by_exchange(g, counts, comm, how);

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
  return make_work(std::vector<MPI_Request>{request}, std::move(ints), "MPI_Iallgatherv", g.op, how);
}

Work MPIBackend::all_gather_by_exchange(const Gathering& g, std::span<const std::size_t> counts, MPI_Comm comm,
                                        Completion how) {
  const std::size_t esize = dtype_size(g.in.dtype);
  const MPI_Datatype type = types_.datatype(g.in.dtype);
  const int n = int(counts.size());
  const int me = g.group.rank();
  std::vector<std::size_t> displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), std::size_t{0});
  std::byte* mine = element_at(g.out.data, displs[std::size_t(me)], esize);
  if (g.in.count && mine != g.in.data) std::memmove(mine, g.in.data, g.in.bytes());
  std::vector<MPI_Request> requests;
  // One block in messages of at most max_count_ elements; MPI matches them in posting order.
  const auto post = [&](std::byte* block, std::size_t count, int peer, bool send) {
    for (std::size_t off = 0; off < count; off += max_count_) {
      const int len = int(std::min(max_count_, count - off));
      MPI_Request request;
      std::byte* at = block + off * esize;
      check(send ? MPI_Isend(at, len, type, peer, kExchangeTag, comm, &request)
                 : MPI_Irecv(at, len, type, peer, kExchangeTag, comm, &request),
            send ? "MPI_Isend" : "MPI_Irecv");
      requests.push_back(request);
    }
  };
  // Every send before any receive. Over Open MPI's TCP transport a large message flows once its
  // receiver has answered the sender's rendezvous request, and a rank's answer queues behind the data
  // it is already sending to that peer. A rank that posted its receive first lets the peer start its
  // block before this rank's own request reaches it; the peer's answer then waits for that whole
  // block, and the two directions of the link carry the blocks one after the other
  // (docs/performance.md, "mpi's all-gather across hosts").
  MpiCallGuard guard;
  for (int k = 1; k < n; ++k) post(mine, counts[std::size_t(me)], (me + k) % n, true);
  for (int k = 1; k < n; ++k) {
    const int peer = (me - k + n) % n;
    post(element_at(g.out.data, displs[std::size_t(peer)], esize), counts[std::size_t(peer)], peer, false);
  }
  return make_work(std::move(requests), {}, "MPI_Isend / MPI_Irecv", g.op, how);
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

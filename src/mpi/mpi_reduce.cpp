// MPIBackend's reductions: all_reduce, the rooted reduce and reduce_scatter on one node (one MPI call
// each, blocking under the watchdog, or non-blocking and polled), reduce_scatter across nodes and
// reduce_scatter_v (one MPI_Ireduce per block).
#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include "backend_kit/op_family.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi/mpi_backend_calls.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

Work MPIBackend::do_reduce(const Reduction& r, Completion how) {
  const MPI_Comm comm = healthy_comm(r.group, r.op);
  switch (r.op) {
    case OpType::AllReduce: return all_reduce(r, comm, how);
    case OpType::Reduce: return reduce_to_root(r, comm, how);
    case OpType::ReduceScatter: return reduce_scatter(r, comm, how);
    case OpType::ReduceScatterV:
      return reduce_scatter_blocks(r, r.counts, comm, how);
    IDIST_OPTYPES_OUTSIDE_REDUCTION:
      break;
  }
  backend_kit::outside_family(r.op, backend_kit::OpFamily::Reduction);
}

Work MPIBackend::all_reduce(const Reduction& r, MPI_Comm comm, Completion how) {
  const Buffer& data = r.out;
  const MPI_Datatype type = types_.datatype(data.dtype);
  const MPI_Op mpi_op = types_.op(data.dtype, r.reduce_op);
  // Across nodes a large buffer waits on MPI_Iallreduce (below), which keeps the link busier than
  // Open MPI's blocking MPI_Allreduce does.
  const bool large_across_nodes = nnodes() > 1 && data.bytes() >= kPostedAllReduceMinBytes;
  if (how == Completion::Blocking && watchdog_ && (data.count <= max_count_ || blocking_chunk_) &&
      !large_across_nodes) {
    // One watched call; on one node in chunks of blocking_chunk_ (MpiSettings::blocking_chunk_bytes).
    const std::size_t limit = elements_per_call(blocking_chunk_, data.dtype);
    const std::size_t esize = dtype_size(data.dtype);
    if (run_watched(r.op, r.group, "MPI_Allreduce", [&] {
          auto* p = static_cast<char*>(data.data);
          for (std::size_t off = 0; off < data.count; off += limit) {
            const int n = int(std::min(limit, data.count - off));
            if (const int rc = MPI_Allreduce(MPI_IN_PLACE, p + off * esize, n, type, mpi_op, comm); rc != MPI_SUCCESS)
              return rc;
          }
          return MPI_SUCCESS;
        }))
      return Work{};
  }
  // With the progress thread, large all-reduces go out as several chunks in flight at once: for
  // fewer than 4 ranks libnbc reduces to rank 0 and then broadcasts, one link direction after the
  // other, and consecutive chunks let one chunk's broadcast share the wire with the next one's reduce.
  const std::size_t limit = elements_per_call(progress_chunk_, data.dtype);
  return post_in_chunks(data, limit, "MPI_Iallreduce", r.op, how, [&](void* p, int n, MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, p, n, type, mpi_op, comm, request);
  });
}

Work MPIBackend::reduce_to_root(const Reduction& r, MPI_Comm comm, Completion how) {
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

Work MPIBackend::reduce_scatter(const Reduction& r, MPI_Comm comm, Completion how) {
  if (nnodes() > 1) {
    const std::vector<std::size_t> counts(std::size_t(r.group.size()), r.out.count);
    return reduce_scatter_blocks(r, counts, comm, how);
  }
  check_int_counts(r.op, {r.in.count});
  const MPI_Datatype type = types_.datatype(r.in.dtype);
  const MPI_Op op = types_.op(r.in.dtype, r.reduce_op);
  const int n = int(r.out.count);
  return run_op(
      r.op, r.group, how, "MPI_Reduce_scatter_block",
      [&] { return MPI_Reduce_scatter_block(r.in.data, r.out.data, n, type, op, comm); }, "MPI_Ireduce_scatter_block",
      [&](MPI_Request* q) { return MPI_Ireduce_scatter_block(r.in.data, r.out.data, n, type, op, comm, q); });
}

Work MPIBackend::reduce_scatter_blocks(const Reduction& r, std::span<const std::size_t> blocks, MPI_Comm comm,
                                       Completion how) {
  check_int_counts(r.op, {r.in.count});
  const MPI_Datatype type = types_.datatype(r.in.dtype);
  const MPI_Op op = types_.op(r.in.dtype, r.reduce_op);
  const std::size_t n = blocks.size();
  std::vector<int> counts(n);
  for (std::size_t i = 0; i < n; ++i) counts[i] = int(blocks[i]);
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
    offset += blocks[root];
  }
  return make_work(std::move(requests), {}, "MPI_Ireduce", r.op, how);
}

}  // namespace idist::mpi_backend

#pragma once
// MPIBackend's templates shared by the files of the operation families (mpi_reduce.cpp, mpi_gather.cpp,
// mpi_distribute.cpp) and the model: a blocking MPI call under the watchdog, and non-blocking posts
// in chunks.
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "mpi/mpi_backend.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

/// The address of element `elements` of a buffer at `base` of `esize`-byte elements.
inline std::byte* element_at(void* base, std::size_t elements, std::size_t esize) {
  return static_cast<std::byte*>(base) + elements * esize;
}

template <class Post>
Work MPIBackend::post_in_chunks(const Buffer& data, std::size_t limit, const char* mpi_fn, OpType op, Completion how,
                                Post post) {
  if (data.count <= limit) [[likely]] {
    MPI_Request request;
    int rc;
    {
      MpiCallGuard guard;
      rc = post(data.data, int(data.count), &request);
    }
    check(rc, mpi_fn);
    return make_work(request, mpi_fn, op, how);
  }
  // More elements than an int counts (or than the chunk size): consecutive chunks, independent
  // since these operations work element by element.
  const std::size_t esize = dtype_size(data.dtype);
  std::vector<MPI_Request> requests;
  MpiCallGuard guard;
  for (std::size_t off = 0; off < data.count; off += limit) {
    MPI_Request request;
    check(post(element_at(data.data, off, esize), int(std::min(limit, data.count - off)), &request), mpi_fn);
    requests.push_back(request);
  }
  return make_work(std::move(requests), {}, mpi_fn, op, how);
}

// Blocking calls: MPI's blocking functions under the watchdog (when switched on). Buffers beyond
// MPI's int counts, and calls that find every watchdog slot taken, wait on the non-blocking call.
template <class Call>
bool MPIBackend::run_watched(OpType op, const ProcessGroup& group, const char* mpi_fn, Call call) {
  const Watchdog::Scope watched(*watchdog_, to_string(op).data(), static_cast<const MpiGroup&>(group).label.c_str());
  if (!watched) return false;
  int rc;
  {
    MpiCallGuard guard;
    rc = call();
  }
  check(rc, mpi_fn);
  return true;
}

}  // namespace idist::mpi_backend

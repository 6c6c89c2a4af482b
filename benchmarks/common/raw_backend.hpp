#pragma once
// The backend's own collectives, called directly on a communicator of the benchmark's own over the
// same ranks: the baseline the benchmarks compare idist against ("what the user would get by
// calling MPI / Gloo themselves").
#include <cstddef>
#include <memory>
#include <string>

#include "idist/computation_model.hpp"

namespace idist_bench {

/// Raw float32 collectives of one backend over idist's world (same ranks, same network address;
/// mpi: a duplicate of MPI_COMM_WORLD, gloo: a context connected through idist). Every call blocks
/// until the operation is complete on this rank. Destroy it before idist::finalize().
class RawBackend {
 public:
  virtual ~RawBackend() = default;
  /// The library call behind each op, for table headings ("MPI_Allreduce", "gloo::allreduce", ...).
  virtual std::string call_name(const std::string& op) const = 0;
  /// In-place sum of `count` floats over the world.
  virtual void all_reduce_sum(float* data, std::size_t count) = 0;
  /// Gathers `count` floats from every rank into `out` (count * world size floats, rank order).
  virtual void all_gather(const float* in, float* out, std::size_t count) = 0;
  /// Copies `count` floats of rank `root` to every rank.
  virtual void broadcast(float* data, std::size_t count, int root) = 0;
  /// Returns once every rank has entered it.
  virtual void barrier() = 0;
  /// Sums `in` (count * world size floats) over the world; `out` receives block rank (count floats).
  virtual void reduce_scatter_sum(const float* in, float* out, std::size_t count) = 0;
  /// Block j of `in` (count floats each, world size blocks) goes to rank j; block i of `out` comes
  /// from rank i.
  virtual void all_to_all(const float* in, float* out, std::size_t count) = 0;
};

/// Which library calls a RawBackend makes.
enum class RawKind {
  /// The blocking call a user would write: MPI_Allreduce / MPI_Allgather / MPI_Bcast / MPI_Barrier /
  /// MPI_Reduce_scatter_block / MPI_Alltoall; gloo::allreduce (ring) / allgather / broadcast / barrier /
  /// ReduceScatterHalvingDoubling / alltoall.
  Blocking,
  /// MPI only: the non-blocking call idist's mpi backend issues (MPI_Iallreduce, ...) followed by
  /// MPI_Wait. Tells apart idist's own overhead from the cost of MPI's non-blocking algorithms.
  NonBlocking,
};

/// The raw backend for the current idist model ("mpi" or "gloo"), or nullptr when there is none
/// (serial, nccl, a backend not compiled in, or a kind the backend lacks). Collective: every rank
/// calls it (gloo connects its context through idist).
std::unique_ptr<RawBackend> make_raw_backend(idist::ComputationModel& model, RawKind kind = RawKind::Blocking);

}  // namespace idist_bench

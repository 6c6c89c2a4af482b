// MPIBackend: setup, groups, barriers, and what the operation families share (Work, run_op).
#include "mpi/mpi_backend.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "backend_kit/cuda_probe.hpp"
#include "idist/error.hpp"
#include "mpi/exit_timer.hpp"
#include "mpi/mpi_backend_calls.hpp"
#include "mpi/mpi_error.hpp"
#include "mpi/mpi_monitored_barrier.hpp"
#include "mpi/mpi_work.hpp"
#include "mpi/single_copy.hpp"

namespace idist::mpi_backend {

MPIBackend::MPIBackend(std::chrono::milliseconds timeout, bool owns_mpi, int thread_level, const MpiSettings& settings)
    : Backend(timeout), owns_mpi_(owns_mpi), thread_level_(thread_level), max_count_(settings.max_count) {
  serialize_mpi_calls = thread_level < MPI_THREAD_MULTIPLE;
  int comm_rank = 0;
  int comm_size = 1;
  {
    MpiCallGuard guard;
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &world_comm_), "MPI_Comm_dup", world_rank);
    // Errors come back as codes (then BackendError) instead of aborting the job. Communicators
    // split from world_comm_ inherit this handler.
    check_mpi(MPI_Comm_set_errhandler(world_comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", world_rank);
    // Open MPI reports failures of non-blocking collectives found by MPI_Test through
    // MPI_COMM_WORLD's handler, not the request's communicator. When idist owns MPI it makes that
    // handler return too; an adopted context keeps the program's choice.
    if (owns_mpi_)
      check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", world_rank);
    check_mpi(MPI_Comm_rank(world_comm_, &comm_rank), "MPI_Comm_rank", world_rank);
    check_mpi(MPI_Comm_size(world_comm_, &comm_size), "MPI_Comm_size", world_rank);
  }
  {
    MpiCallGuard guard;
    check_mpi(MPI_Comm_dup(world_comm_, &p2p_comm_), "MPI_Comm_dup", comm_rank);
    int* ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(p2p_comm_, MPI_TAG_UB, &ub, &found);
    if (found && ub) tag_ub_ = *ub;
  }
  const NodeLayout node = measure_node_layout(world_comm_, comm_rank);
  set_layout({comm_rank, node.local_rank, comm_size, node.nproc_per_node, node.node_rank, node.nnodes});
  std::vector<int> all(static_cast<std::size_t>(comm_size));
  for (int r = 0; r < comm_size; ++r) all[std::size_t(r)] = r;
  auto world = std::make_shared<MpiGroup>(std::move(all), comm_rank, comm_size, id(), world_comm_,
                                          fmt::format("world (ranks 0-{})", comm_size - 1));
  set_world_group(world);
  groups_.push_back(std::move(world));
  types_.create(rank());
  // Below MPI_THREAD_MULTIPLE idist holds one lock around each MPI call; a blocking collective would
  // hold it until the peers arrive, and two threads of a rank calling collectives on different groups
  // would deadlock (each rank's lock held by the thread the other rank's thread waits for). The
  // polled calls release it between tests.
  if (settings.blocking_collectives && thread_level >= MPI_THREAD_MULTIPLE)
    watchdog_ = std::make_unique<Watchdog>(timeout, rank());
  // The progress thread pays when the wire is the bottleneck (across nodes); on one node the
  // transfers are memory copies that compete with backward for the same cores
  // (docs/performance.md). Its MPI_Test runs beside other threads' calls: MPI_THREAD_MULTIPLE only.
  // Every rank decides alike (the layout is global), though nothing requires it.
  const bool progress = settings.progress_thread.value_or(nnodes() > 1) && thread_level >= MPI_THREAD_MULTIPLE;
  if (progress) {
    progress_ = std::make_unique<ProgressThread>(rank(), health_, settings.progress_interval);
    if (world_size() < 4) progress_chunk_ = settings.progress_chunk_bytes;
  }
  // Chunks pay where Open MPI copies through its shared-memory buffers twice; with a single-copy
  // mechanism (CMA) the whole call is as fast as the raw one and chunks cost up to 12 %.
  // (The probe opens an MPI_T session: only when the setting is left to idist.)
  if (settings.blocking_chunk_bytes)
    blocking_chunk_ = *settings.blocking_chunk_bytes;
  else if (nnodes() == 1 && world_size() <= 4 && !shared_memory_single_copy())
    blocking_chunk_ = std::size_t(1) << 20;
}

Device MPIBackend::device() const {
  return backend_kit::cuda_device_count() > 0 ? Device{DeviceType::CUDA, local_rank()} : Device{};
}

void MPIBackend::set_local_rank(int local_rank) { set_layout_local_rank(local_rank); }

void MPIBackend::finalize() {
  if (finalized_) return;
  finalized_ = true;
  if (progress_) {
    // Collectives nobody waited for complete if the peers posted them too; those that do not by
    // the timeout are abandoned, which breaks the backend.
    if (const std::size_t left = progress_->drain(std::chrono::steady_clock::now() + timeout()))
      health_->mark(
          fmt::format("{} non-blocking collective(s) still pending at finalize() on rank {} after waiting {} ms", left,
                      rank(), timeout().count()));
    progress_.reset();
  }
  watchdog_.reset();  // no blocking call can be in flight while finalize() runs
  int mpi_finalized = 0;
  MPI_Finalized(&mpi_finalized);
  if (mpi_finalized) return;  // the program finalized MPI itself: its handles are gone already
  if (health_->broken()) abort_broken();
  groups_.front()->comm = MPI_COMM_NULL;  // the world's communicator is world_comm_, freed below
  release(groups_);                       // takes the MPI call lock itself
  MpiCallGuard guard;
  types_.release();
  MPI_Comm_free(&p2p_comm_);
  MPI_Comm_free(&world_comm_);
  if (!owns_mpi_) return;
  // Every rank arrives before any enters MPI_Finalize (exit_timer.hpp says why), both bounded.
  finalize_owned_mpi(rank(), std::max<std::chrono::milliseconds>(timeout(), std::chrono::seconds(10)));
}

void MPIBackend::abort_broken() const {
  // Peers that hung in the same collective reach their own timeout about now; aborting at once would
  // kill them before they report it (and write their flight recorders), so they get a grace period.
  // Half the timeout, so that it rarely ends together with a peer's watchdog abort (an mpirun under
  // load was seen to hang once when both came at the same moment).
  const auto grace = std::min<std::chrono::milliseconds>(timeout() / 2, std::chrono::seconds(5));
  std::fprintf(stderr,
               "idist: finalize() on rank %d: the mpi backend is unusable since an earlier failure: %s. MPI cannot "
               "cancel or free the collective left pending, and MPI_Finalize would crash or hang on it, so the job "
               "is ended instead (this rank exits with code 1 and the launcher ends the others) in %lld ms, once "
               "the other ranks could report.\n",
               rank(), health_->first_failure().c_str(), static_cast<long long>(grace.count()));
  std::fflush(stderr);
  std::this_thread::sleep_for(grace);
  abort_job(1);
}

// ---------------------------------------------------------------------------------------------
// groups

std::shared_ptr<ProcessGroup> MPIBackend::create_group(std::vector<int> sorted_ranks) {
  auto group = split_group(std::move(sorted_ranks), world_comm_, rank(), world_size(), id());
  groups_.push_back(group);
  return group;
}

MPI_Comm MPIBackend::healthy_comm(const ProcessGroup& group, OpType op) const {
  health_->check(to_string(op), rank());
  return static_cast<const MpiGroup&>(group).comm;
}

void MPIBackend::do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout,
                                      bool wait_all_ranks) {
  const auto& g = static_cast<const MpiGroup&>(group);
  mpi_monitored_barrier(g.comm, g.rank(), g.ranks(), g.monitored_barriers.fetch_add(1), timeout, wait_all_ranks);
}

// ---------------------------------------------------------------------------------------------
// operations

Work MPIBackend::finish(std::shared_ptr<MpiWork> polled, OpType op, Completion how) {
  Work work(std::move(polled), op, rank(), timeout());
  if (how == Completion::Async) return work;
  work.wait();
  return Work{};
}

Work MPIBackend::make_work(MPI_Request request, const char* mpi_fn, OpType op, Completion how) {
  if (progress_ && how == Completion::Async) [[unlikely]]
    return Work(progress_->track({request}, {}, mpi_fn), op, rank(), timeout());
  return finish(std::make_shared<MpiWork>(request, mpi_fn, rank(), health_), op, how);
}

Work MPIBackend::make_work(std::vector<MPI_Request> requests, std::vector<int> ints, const char* mpi_fn, OpType op,
                           Completion how) {
  if (progress_ && how == Completion::Async)
    return Work(progress_->track(std::move(requests), std::move(ints), mpi_fn), op, rank(), timeout());
  return finish(std::make_shared<MpiWork>(std::move(requests), std::move(ints), mpi_fn, rank(), health_), op, how);
}

std::size_t MPIBackend::elements_per_call(std::size_t chunk_bytes, DType dtype) const {
  return chunk_bytes ? std::min(max_count_, std::max<std::size_t>(1, chunk_bytes / dtype_size(dtype))) : max_count_;
}

Work MPIBackend::run_op(OpType op, const ProcessGroup& group, Completion how, const char* blocking_fn,
                        const std::function<int()>& blocking, const char* post_fn,
                        const std::function<int(MPI_Request*)>& post, std::vector<int> ints) {
  if (how == Completion::Blocking && watchdog_ && run_watched(op, group, blocking_fn, blocking)) return Work{};
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = post(&request);
  }
  check(rc, post_fn);
  return make_work(std::vector<MPI_Request>{request}, std::move(ints), post_fn, op, how);
}

void MPIBackend::check_int_counts(OpType op, std::initializer_list<std::size_t> counts) const {
  for (std::size_t c : counts)
    if (c > max_count_)
      throw BackendError(fmt::format("{} on rank {}: {} elements exceed the {} the mpi backend passes to one MPI call",
                                     to_string(op), rank(), c, max_count_));
}

Work MPIBackend::do_barrier(const ProcessGroup& group, Completion how) {
  const MPI_Comm comm = healthy_comm(group, OpType::Barrier);
  if (how == Completion::Blocking && watchdog_ &&
      run_watched(OpType::Barrier, group, "MPI_Barrier", [&] { return MPI_Barrier(comm); }))
    return Work{};
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Ibarrier(comm, &request);
  }
  check(rc, "MPI_Ibarrier");
  return make_work(request, "MPI_Ibarrier", OpType::Barrier, how);
}

}  // namespace idist::mpi_backend

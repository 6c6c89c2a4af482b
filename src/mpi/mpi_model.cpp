// MPIModel: setup, groups and the non-blocking collectives.
#include "mpi/mpi_model.hpp"
#include "mpi/monitored_barrier.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/collective_checks.hpp"
#include "core/cuda_probe.hpp"
#include "idist/error.hpp"
#include "mpi/error.hpp"
#include "mpi/exit_timer.hpp"
#include "mpi/work.hpp"

namespace idist::mpi_backend {

namespace {

std::byte* at(void* base, std::size_t elements, std::size_t esize) {
  return static_cast<std::byte*>(base) + elements * esize;
}

}  // namespace

MPIModel::MPIModel(std::chrono::milliseconds timeout, bool owns_mpi, int thread_level, const MpiSettings& settings)
    : ComputationModel(timeout), owns_mpi_(owns_mpi), thread_level_(thread_level), max_count_(settings.max_count) {
  serialize_mpi_calls = thread_level < MPI_THREAD_MULTIPLE;
  int comm_rank = 0;
  int comm_size = 1;
  {
    MpiCallGuard guard;
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &world_), "MPI_Comm_dup", world_rank);
    // Errors come back as codes (then BackendError) instead of aborting the job. Communicators
    // split from world_ inherit this handler.
    check_mpi(MPI_Comm_set_errhandler(world_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", world_rank);
    // Open MPI reports failures of non-blocking collectives found by MPI_Test through
    // MPI_COMM_WORLD's handler, not the request's communicator. When idist owns MPI it makes that
    // handler return too; an adopted context keeps the program's choice.
    if (owns_mpi_)
      check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", world_rank);
    check_mpi(MPI_Comm_rank(world_, &comm_rank), "MPI_Comm_rank", world_rank);
    check_mpi(MPI_Comm_size(world_, &comm_size), "MPI_Comm_size", world_rank);
  }
  const NodeLayout node = measure_node_layout(world_, comm_rank);
  set_layout({comm_rank, node.local_rank, comm_size, node.nproc_per_node, node.node_rank, node.nnodes});
  types_.create(rank());
  world_label_ = fmt::format("world (ranks 0-{})", world_size() - 1);
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
  blocking_chunk_ =
      settings.blocking_chunk_bytes.value_or(nnodes() == 1 && world_size() <= 4 ? std::size_t(1) << 20 : 0);
}

Device MPIModel::device() const {
  return core::cuda_device_count() > 0 ? Device{DeviceType::CUDA, local_rank()} : Device{};
}

void MPIModel::set_local_rank(int local_rank) { set_layout_local_rank(local_rank); }

void MPIModel::finalize() {
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
  release(groups_);  // takes the MPI call lock itself
  MpiCallGuard guard;
  types_.release();
  MPI_Comm_free(&world_);
  if (!owns_mpi_) return;
  // Every rank arrives before any enters MPI_Finalize (exit_timer.hpp says why), both bounded.
  finalize_owned_mpi(rank(), std::max<std::chrono::milliseconds>(timeout(), std::chrono::seconds(10)));
}

void MPIModel::abort_broken() const {
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

const GroupComm& MPIModel::group_comm(const Group& group) {
  if (const GroupComm* g = groups_.find(group.ranks())) return *g;
  return groups_.get_or_create(group.ranks(), normalize_group(group),
                               [&](const std::vector<int>& sorted) { return split_group(sorted, world_, rank()); });
}

std::optional<int> MPIModel::group_rank(const Group& group) {
  if (group.is_world()) return rank();
  const GroupComm& g = group_comm(group);
  if (g.rank < 0) return std::nullopt;
  return g.rank;
}

MPI_Comm MPIModel::member_comm(const Group& group, const char* fn) {
  if (group.is_world()) [[likely]]
    return world_;
  const GroupComm& g = group_comm(group);
  if (g.comm == MPI_COMM_NULL) core::throw_not_member(fn, rank(), group);
  return g.comm;
}

MPI_Comm MPIModel::healthy_comm(const Group& group, const char* fn) {
  health_->check(fn, rank());
  return member_comm(group, fn);
}

void MPIModel::do_monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  std::vector<int> members = normalize_group(group);
  const MPI_Comm comm = member_comm(group, "monitored_barrier");
  const int comm_rank = int(std::lower_bound(members.begin(), members.end(), rank()) - members.begin());
  std::uint64_t generation = 0;
  {
    std::lock_guard lock(monitored_mutex_);
    generation = monitored_generations_[members]++;
  }
  mpi_monitored_barrier(comm, comm_rank, members, generation, timeout, wait_all_ranks);
}

// ---------------------------------------------------------------------------------------------
// collectives

Work MPIModel::make_work(MPI_Request request, const char* mpi_fn, std::string_view op) {
  if (progress_) [[unlikely]]
    return Work(progress_->track({request}, {}, mpi_fn), op, rank(), timeout());
  return Work(std::make_shared<MpiWork>(request, mpi_fn, rank(), health_), op, rank(), timeout());
}

Work MPIModel::make_work(std::vector<MPI_Request> requests, std::vector<int> ints, const char* mpi_fn,
                         std::string_view op) {
  if (progress_) return Work(progress_->track(std::move(requests), std::move(ints), mpi_fn), op, rank(), timeout());
  return Work(std::make_shared<MpiWork>(std::move(requests), std::move(ints), mpi_fn, rank(), health_), op, rank(),
              timeout());
}

const char* MPIModel::group_label(const Group& group) {
  return group.is_world() ? world_label_.c_str() : group_comm(group).label.c_str();
}

MPIModel::ReduceCall MPIModel::prepare_all_reduce(const Buffer& data, ReduceOp op, const Group& group) {
  const MPI_Comm comm = healthy_comm(group, "all_reduce");
  return ReduceCall{comm, types_.datatype(data.dtype), types_.op(data.dtype, op)};
}

Work MPIModel::do_all_reduce(Buffer data, ReduceOp op, const Group& group) {
  const auto [comm, type, mpi_op] = prepare_all_reduce(data, op, group);
  // With the progress thread, large all-reduces go out as several chunks in flight at once: for
  // fewer than 4 ranks libnbc reduces to rank 0 and then broadcasts, one link direction after the
  // other, and consecutive chunks let one chunk's broadcast share the wire with the next one's reduce.
  const std::size_t limit = elements_per_call(progress_chunk_, data.dtype);
  return post_in_chunks(data, limit, "MPI_Iallreduce", "all_reduce", [&](void* p, int n, MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, p, n, type, mpi_op, comm, request);
  });
}

std::size_t MPIModel::elements_per_call(std::size_t chunk_bytes, DType dtype) const {
  return chunk_bytes ? std::min(max_count_, std::max<std::size_t>(1, chunk_bytes / dtype_size(dtype))) : max_count_;
}

template <class Post>
Work MPIModel::post_in_chunks(const Buffer& data, std::size_t limit, const char* mpi_fn, std::string_view op,
                              Post post) {
  if (data.count <= limit) [[likely]] {
    MPI_Request request;
    int rc;
    {
      MpiCallGuard guard;
      rc = post(data.data, int(data.count), &request);
    }
    check(rc, mpi_fn);
    return make_work(request, mpi_fn, op);
  }
  // More elements than an int counts (or than the chunk size): consecutive chunks, independent
  // since these collectives work element by element.
  const std::size_t esize = dtype_size(data.dtype);
  std::vector<MPI_Request> requests;
  MpiCallGuard guard;
  for (std::size_t off = 0; off < data.count; off += limit) {
    MPI_Request request;
    check(post(at(data.data, off, esize), int(std::min(limit, data.count - off)), &request), mpi_fn);
    requests.push_back(request);
  }
  return make_work(std::move(requests), {}, mpi_fn, op);
}

Work MPIModel::do_all_gather(ConstBuffer in, Buffer out, const Group& group) {
  const MPI_Comm comm = healthy_comm(group, "all_gather");
  if (in.count > max_count_) {
    const std::vector<std::size_t> counts(std::size_t(group_size(group)), in.count);
    return all_gather_by_broadcasts(in, out, counts, *group_rank(group), comm, "all_gather");
  }
  const MPI_Datatype type = types_.datatype(in.dtype);
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Iallgather(in.data, int(in.count), type, out.data, int(in.count), type, comm, &request);
  }
  check(rc, "MPI_Iallgather");
  return make_work(request, "MPI_Iallgather", "all_gather");
}

Work MPIModel::do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int me,
                               const Group& group) {
  const MPI_Comm comm = healthy_comm(group, "all_gather");
  const std::size_t n = counts.size();
  const std::size_t total = out.count;  // sum(counts), checked by the front door
  // MPI-3 counts and displacements are ints: beyond that range, fall back to one broadcast per rank.
  if (total - counts.back() > max_count_ || *std::max_element(counts.begin(), counts.end()) > max_count_)
    return all_gather_by_broadcasts(in, out, counts, me, comm, "all_gather");

  std::vector<int> ints(2 * n);  // counts, then displacements; MPI reads them until completion
  std::size_t displ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ints[i] = int(counts[i]);
    ints[n + i] = int(displ);
    displ += counts[i];
  }
  const MPI_Datatype type = types_.datatype(in.dtype);
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Iallgatherv(in.data, int(in.count), type, out.data, ints.data(), ints.data() + n, type, comm, &request);
  }
  check(rc, "MPI_Iallgatherv");
  return make_work(std::vector<MPI_Request>{request}, std::move(ints), "MPI_Iallgatherv", "all_gather");
}

Work MPIModel::all_gather_by_broadcasts(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int group_rank,
                                        MPI_Comm comm, std::string_view op) {
  const std::size_t esize = dtype_size(in.dtype);
  const MPI_Datatype type = types_.datatype(in.dtype);
  std::vector<std::size_t> displs(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), displs.begin(), std::size_t{0});
  // This rank's block is the source of its own broadcasts.
  std::byte* mine = at(out.data, displs[std::size_t(group_rank)], esize);
  if (in.count && mine != in.data) std::memmove(mine, in.data, in.bytes());
  std::vector<MPI_Request> requests;
  MpiCallGuard guard;
  for (std::size_t root = 0; root < counts.size(); ++root) {
    for (std::size_t off = 0; off < counts[root]; off += max_count_) {
      const int n = int(std::min(max_count_, counts[root] - off));
      MPI_Request request;
      check(MPI_Ibcast(at(out.data, displs[root] + off, esize), n, type, int(root), comm, &request), "MPI_Ibcast");
      requests.push_back(request);
    }
  }
  return make_work(std::move(requests), {}, "MPI_Ibcast", op);
}

Work MPIModel::do_broadcast(Buffer data, int, int root, const Group& group) {
  const MPI_Comm comm = healthy_comm(group, "broadcast");
  const MPI_Datatype type = types_.datatype(data.dtype);
  return post_in_chunks(data, max_count_, "MPI_Ibcast", "broadcast", [&](void* p, int n, MPI_Request* request) {
    return MPI_Ibcast(p, n, type, root, comm, request);
  });
}

Work MPIModel::do_barrier(const Group& group) {
  const MPI_Comm comm = healthy_comm(group, "barrier");
  MPI_Request request;
  int rc;
  {
    MpiCallGuard guard;
    rc = MPI_Ibarrier(comm, &request);
  }
  check(rc, "MPI_Ibarrier");
  return make_work(request, "MPI_Ibarrier", "barrier");
}

// ---------------------------------------------------------------------------------------------
// blocking collectives: MPI's blocking calls under the watchdog (when switched on). Buffers beyond
// MPI's int counts, and calls that find every watchdog slot taken, use the polled default.

template <class Call>
bool MPIModel::run_watched(const char* op, const Group& group, const char* mpi_fn, Call call) {
  const Watchdog::Scope watched(*watchdog_, op, group_label(group));
  if (!watched) return false;
  int rc;
  {
    MpiCallGuard guard;
    rc = call();
  }
  check(rc, mpi_fn);
  return true;
}

void MPIModel::do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) {
  if (watchdog_ && (data.count <= max_count_ || blocking_chunk_)) {
    const auto [comm, type, mpi_op] = prepare_all_reduce(data, op, group);
    // One watched call; on one node in chunks of blocking_chunk_ (MpiSettings::blocking_chunk_bytes).
    const std::size_t limit = elements_per_call(blocking_chunk_, data.dtype);
    const std::size_t esize = dtype_size(data.dtype);
    if (run_watched("all_reduce", group, "MPI_Allreduce", [&] {
          auto* p = static_cast<char*>(data.data);
          for (std::size_t off = 0; off < data.count; off += limit) {
            const int n = int(std::min(limit, data.count - off));
            if (const int rc = MPI_Allreduce(MPI_IN_PLACE, p + off * esize, n, type, mpi_op, comm); rc != MPI_SUCCESS)
              return rc;
          }
          return MPI_SUCCESS;
        }))
      return;
  }
  ComputationModel::do_all_reduce_blocking(data, op, group);
}

void MPIModel::do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) {
  if (watchdog_ && in.count <= max_count_) {
    const MPI_Comm comm = healthy_comm(group, "all_gather");
    const MPI_Datatype type = types_.datatype(in.dtype);
    if (run_watched("all_gather", group, "MPI_Allgather",
                    [&] { return MPI_Allgather(in.data, int(in.count), type, out.data, int(in.count), type, comm); }))
      return;
  }
  ComputationModel::do_all_gather_blocking(in, out, group);
}

void MPIModel::do_broadcast_blocking(Buffer data, int src, int root, const Group& group) {
  if (watchdog_ && data.count <= max_count_) {
    const MPI_Comm comm = healthy_comm(group, "broadcast");
    const MPI_Datatype type = types_.datatype(data.dtype);
    if (run_watched("broadcast", group, "MPI_Bcast",
                    [&] { return MPI_Bcast(data.data, int(data.count), type, root, comm); }))
      return;
  }
  ComputationModel::do_broadcast_blocking(data, src, root, group);
}

void MPIModel::do_barrier_blocking(const Group& group) {
  if (watchdog_) {
    const MPI_Comm comm = healthy_comm(group, "barrier");
    if (run_watched("barrier", group, "MPI_Barrier", [&] { return MPI_Barrier(comm); })) return;
  }
  ComputationModel::do_barrier_blocking(group);
}

}  // namespace idist::mpi_backend

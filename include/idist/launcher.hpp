#pragma once
/// @file
/// The launcher of ignite.distributed: spawn() starts worker processes on this node, each inside an
/// initialized distributed context; Parallel either spawns them or, for programs started by mpirun,
/// srun or a torchrun-style launcher, only initializes the backend around the user's function.
///
/// How workers are started: fork(). Each worker is a copy of the calling process at the moment of
/// the call, so
/// - the callable and its arguments are copied into every worker (by the fork itself: they need not
///   be copyable, and each worker may consume its copy, e.g. move out of it);
/// - call spawn() (or Parallel::run()) early: before creating threads, before touching CUDA and
///   before running LibTorch operations (a forked child inherits neither threads nor a usable CUDA
///   context, and OpenMP thread pools that already ran do not survive fork);
/// - the parent must be serial (no backend initialized) when it spawns;
/// - workers run fn, finalize, and end with _exit(): the parent's static destructors and atexit
///   handlers do not run in them; stdout / stderr are flushed first.
/// Workers are killed when the spawning thread dies (PR_SET_PDEATHSIG). When a worker throws, exits
/// non-zero or is killed by a signal, the others receive SIGTERM, then SIGKILL after a grace period,
/// every worker is reaped, and spawn() throws SpawnError naming the failed rank and the reason.
///
///     void train(int local_rank, const Config& cfg) { ... idist::all_reduce(...) ... }
///     idist::spawn("gloo", train, cfg, idist::SpawnOptions{.nproc_per_node = 4});
///
///     idist::Parallel parallel("gloo", {.nproc_per_node = 2});
///     parallel.run(train, cfg);

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"

namespace idist {

/// Options of spawn(). Mirrors the keyword arguments of ignite.distributed.spawn for the native
/// backends (nproc_per_node, nnodes, node_rank, master_addr, master_port, init_method, timeout).
struct SpawnOptions {
  /// Worker processes started on this node; must be >= 1.
  int nproc_per_node = 1;
  /// Nodes taking part; the world size is nnodes * nproc_per_node. Must be >= 1.
  int nnodes = 1;
  /// Index of this node in [0, nnodes); worker i of this node gets rank node_rank * nproc_per_node + i.
  int node_rank = 0;
  /// Address of node 0 (rank 0 serves the rendezvous store there) for the "env://" init method.
  /// Unset: the MASTER_ADDR environment variable, else 127.0.0.1 (ignite's spawn defaults).
  std::optional<std::string> master_addr{};
  /// Port of the rendezvous store on node 0 for "env://". Unset: the MASTER_PORT environment
  /// variable, else 2222 (ignite's spawn defaults).
  std::optional<int> master_port{};
  /// "env://" (default: MASTER_ADDR / MASTER_PORT as above), "tcp://host:port" or "file:///path".
  std::string init_method = "env://";
  /// InitOptions::timeout of every worker: bounds the rendezvous and each collective.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// After a worker failed, how long the others get between SIGTERM and SIGKILL.
  std::chrono::milliseconds kill_grace = std::chrono::seconds(3);
  /// Pin each worker to its own share of the CPUs this process may run on, as mpirun's
  /// `--bind-to core` does: the allowed CPUs (sched_getaffinity), in order, split into nproc_per_node
  /// equal contiguous sets, worker i taking set i (leftover CPUs stay unused). Nothing is pinned when
  /// there are fewer CPUs than workers, or when the environment variable IDIST_SPAWN_BIND is "0"
  /// (Parallel takes this default; the variable is its switch). Not in ignite, whose workers are
  /// Python processes left to the scheduler.
  bool bind_cores = true;
};

/// Options of Parallel. Mirrors ignite.distributed.Parallel's arguments; an unset field is Python's
/// None. Setting nproc_per_node makes Parallel::run() spawn workers; otherwise Parallel only
/// initializes the backend (the program was started by mpirun, srun or a torchrun-style launcher).
struct ParallelOptions {
  /// Worker processes to spawn on this node; unset: do not spawn.
  std::optional<int> nproc_per_node{};
  /// Number of nodes (default 1 when spawning).
  std::optional<int> nnodes{};
  /// This node's index; required when nnodes > 1.
  std::optional<int> node_rank{};
  /// Address of node 0; with nnodes > 1, this and master_port, or init_method, must be given (ignite's
  /// rule). Unset when spawning: MASTER_ADDR, else 127.0.0.1 (see SpawnOptions).
  std::optional<std::string> master_addr{};
  /// Port on node 0 (see master_addr). Unset when spawning: MASTER_PORT, else 2222.
  std::optional<int> master_port{};
  /// "env://", "tcp://host:port" or "file:///path"; unset: "env://".
  std::optional<std::string> init_method{};
  /// Timeout of the rendezvous and of every collective; unset: 30 minutes.
  std::optional<std::chrono::milliseconds> timeout{};
};

/// Failure of a spawned worker, thrown by spawn() in the launching process.
class SpawnError : public Error {
 public:
  /// `rank`: global rank of the worker that failed first; `local_rank` its index on this node.
  SpawnError(const std::string& what, int rank, int local_rank) : Error(what), rank_(rank), local_rank_(local_rank) {}
  /// Global rank of the worker that failed first.
  int rank() const noexcept { return rank_; }
  /// Local rank (index on this node) of that worker.
  int local_rank() const noexcept { return local_rank_; }

 private:
  int rank_;
  int local_rank_;
};

namespace detail {

/// Checks spawn's arguments as ignite does. @throws ValueError (see spawn()).
void check_spawn_options(std::string_view backend, const SpawnOptions& opts);

/// `opts` with master_addr and master_port filled as ignite's spawn does for "env://": the given
/// value, else the MASTER_ADDR / MASTER_PORT environment variables, else 127.0.0.1 / 2222.
/// @throws ValueError when MASTER_PORT is not an integer.
SpawnOptions with_master_defaults(SpawnOptions opts);

/// The readable name of a C++ type (abi::__cxa_demangle), for log lines and failure reports.
std::string demangled_name(const std::type_info& type);

/// The name of ignite's Parallel logger, for log_info(): "distributed.launcher.Parallel".
inline constexpr std::string_view kParallelLogger = "distributed.launcher.Parallel";

/// Forks opts.nproc_per_node workers; worker i sets RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
/// MASTER_PORT (and OMP_NUM_THREADS unless set; IDIST_STORE_TOKEN, the TCP store's per-job secret: the
/// caller's when set, else a random one for a one-node launch, none for several nodes), initializes `backend`, runs
/// task(i), finalizes and exits. Returns when all exited successfully. @throws ValueError, SpawnError.
void spawn_workers(std::string_view backend, const std::function<void(int)>& task, const SpawnOptions& opts);

/// True when the last type of Args is SpawnOptions (false for an empty pack).
template <class... Args>
struct last_is_spawn_options : std::false_type {};
template <class First, class... Rest>
struct last_is_spawn_options<First, Rest...>
    : std::is_same<std::remove_cvref_t<std::tuple_element_t<sizeof...(Rest), std::tuple<First, Rest...>>>,
                   SpawnOptions> {};

template <class Fn, class Tuple, std::size_t... I>
void spawn_with(std::string_view backend, Fn& fn, Tuple& args, const SpawnOptions& opts, std::index_sequence<I...>) {
  // Runs in a forked worker with its own copy of `fn` and `args`: forwarding (moving out of an
  // rvalue argument) consumes only that worker's copy.
  const std::function<void(int)> task = [&fn, &args](int local_rank) {
    std::invoke(fn, local_rank, std::forward<std::tuple_element_t<I, Tuple>>(std::get<I>(args))...);
  };
  spawn_workers(backend, task, opts);
}

}  // namespace detail

/// Spawns opts.nproc_per_node worker processes on this node; each initializes `backend` (rank
/// node_rank * nproc_per_node + local_rank of a world of nnodes * nproc_per_node), calls
/// `fn(local_rank, args...)` and finalizes. Returns when every worker succeeded.
/// Mirrors ignite.distributed.spawn(backend, fn, args, nproc_per_node=..., ...).
///
///     idist::spawn("gloo", train, cfg);                                     // one worker
///     idist::spawn("gloo", train, cfg, idist::SpawnOptions{.nproc_per_node = 4});
///
/// The last argument is taken as the SpawnOptions when it is one. See the file comment for how
/// workers are created (fork) and what that implies.
/// The master address and port default to MASTER_ADDR / MASTER_PORT, then 127.0.0.1 / 2222, as in
/// ignite's spawn (so two launches with node_rank 0 and 1 on one machine form one world, as in
/// ignite's tests).
/// @throws ValueError for an unknown backend ("Backend should be one of ..."), for "mpi" (spawning
///         is not possible: launch with mpirun), for nproc_per_node / nnodes < 1, node_rank outside
///         [0, nnodes), a master port outside [1, 65535] or a MASTER_PORT that is not a number, or
///         when a backend is already initialized in this process; SpawnError when a worker fails
///         (its rank and exception text, exit status or signal).
template <class Fn, class... Args>
void spawn(std::string_view backend, Fn&& fn, Args&&... args) {
  auto all = std::forward_as_tuple(std::forward<Args>(args)...);
  if constexpr (detail::last_is_spawn_options<Args...>::value) {
    const SpawnOptions opts = std::get<sizeof...(Args) - 1>(all);
    detail::spawn_with(backend, fn, all, opts, std::make_index_sequence<sizeof...(Args) - 1>{});
  } else {
    detail::spawn_with(backend, fn, all, SpawnOptions{}, std::make_index_sequence<sizeof...(Args)>{});
  }
}

/// spawn() with designated-initializer options and no extra arguments:
/// `idist::spawn("gloo", train, {.nproc_per_node = 2})`, calling train(local_rank).
template <class Fn>
void spawn(std::string_view backend, Fn&& fn, const SpawnOptions& opts) {
  std::tuple<> none;
  detail::spawn_with(backend, fn, none, opts, std::index_sequence<>{});
}

/// Distributed launcher, the C++ form of ignite's `with idist.Parallel(...) as parallel:` block.
///
/// - backend unset: serial; run(fn, args...) calls fn(0, args...). Setting any option is an error.
/// - backend and nproc_per_node set: run() spawns nproc_per_node workers (see spawn()).
/// - backend set, nproc_per_node unset: the constructor initializes the backend in this process
///   (ranks from mpirun / srun / torchrun-style variables), run() calls fn(get_local_rank(), ...),
///   and the destructor finalizes it.
///
///     idist::Parallel parallel("gloo", {.nproc_per_node = 2});
///     parallel.run(training, config);
class Parallel {
 public:
  /// Checks the arguments as ignite does and, when not spawning, initializes `backend`. Logs on rank 0
  /// as ignite's Parallel.__enter__ does: "Initialized processing group with backend: '<b>'", or,
  /// when spawning, "Initialized distributed launcher with backend: '<b>'" and the spawn parameters.
  /// @throws ValueError: "Unknown backend '<b>'. Available backends: ...", "If backend is None,
  ///         argument '<name>' should be also None, but given <value>", "Argument nproc_per_node
  ///         should positive, but given <n>", "Argument nnodes should positive, ...", "If number of
  ///         nodes larger than one, arguments node_rank should be given", "Argument node_rank should
  ///         be between 0 and <nnodes-1>, but given <r>", "If number of nodes larger than one,
  ///         arguments master_addr and master_port or init_method should be specified, ...";
  ///         whatever initialize() throws.
  explicit Parallel(std::optional<std::string> backend = std::nullopt, ParallelOptions opts = {});
  /// Finalizes the backend when the constructor initialized it, after logging "Finalized processing
  /// group with backend: '<b>'" on rank 0 (errors are reported on stderr).
  ~Parallel();
  Parallel(const Parallel&) = delete;
  Parallel& operator=(const Parallel&) = delete;

  /// Runs fn(local_rank, args...) in the distributed context: in spawned workers, or here.
  /// Mirrors ignite's Parallel.run, including its log lines on rank 0 ("Spawn function '<fn>' in N
  /// processes" or "- Run '<fn>' in N processes", then "End of run"; see log_info()).
  /// @throws SpawnError when a spawned worker fails; what fn throws.
  template <class Fn, class... Args>
  void run(Fn&& fn, Args&&... args) {
    const std::string name = detail::demangled_name(typeid(fn));
    if (spawn_) {
      log_info(detail::kParallelLogger,
               detail::format_message("Spawn function '{}' in {} processes", name, spawn_->nproc_per_node));
      auto all = std::forward_as_tuple(std::forward<Args>(args)...);
      detail::spawn_with(*backend_, fn, all, *spawn_, std::index_sequence_for<Args...>{});
    } else {
      log_info(detail::kParallelLogger, detail::format_message("- Run '{}' in {} processes", name, get_world_size()));
      std::invoke(std::forward<Fn>(fn), backend_ ? get_local_rank() : 0, std::forward<Args>(args)...);
    }
    log_info(detail::kParallelLogger, "End of run");
  }

  /// The backend given (std::nullopt for serial).
  const std::optional<std::string>& backend() const noexcept { return backend_; }
  /// The spawn parameters when run() spawns, else std::nullopt.
  const std::optional<SpawnOptions>& spawn_options() const noexcept { return spawn_; }

 private:
  std::optional<std::string> backend_;
  std::optional<SpawnOptions> spawn_;
  bool initialized_ = false;
};

}  // namespace idist

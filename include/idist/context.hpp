#pragma once
/// @file
/// Configuration functions of ignite.distributed.utils: initialize / finalize a backend and query
/// the distributed configuration. All of them dispatch to the current ComputationModel.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idist/computation_model.hpp"
#include "idist/debug.hpp"
#include "idist/types.hpp"

namespace idist {

/// Options of initialize(). Mirrors the keyword arguments ignite's initialize() forwards to
/// torch.distributed.init_process_group.
struct InitOptions {
  /// Bound on the rendezvous and on every later wait (collectives, barriers). Default 30 minutes.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// Where the gloo and nccl backends rendezvous: "env://" (MASTER_ADDR / MASTER_PORT),
  /// "tcp://host:port" or "file:///path". Ignored by mpi.
  std::string init_method = "env://";
  /// This process's rank; -1 = discover from the environment (docs/launching.md). Ignored by mpi.
  int rank = -1;
  /// Number of processes; -1 = discover from the environment. Ignored by mpi.
  int world_size = -1;
  /// This process's local rank; -1 = discover. Ignored by mpi (which measures it).
  int local_rank = -1;
  /// mpi only: how idist's blocking collectives (all_reduce, all_gather, broadcast, barrier and the
  /// calls built on them) run. true (the default): MPI's blocking functions (MPI_Allreduce, ...),
  /// the raw call's speed; a blocking MPI call cannot be interrupted, so a watchdog thread keeps the
  /// timeout: past it, the rank prints the collective, rank, group and elapsed time and ends the
  /// job (it exits with code 124 and the launcher ends the other ranks), PyTorch's policy for hung
  /// NCCL collectives. false: non-blocking calls polled to the deadline, which raise a catchable
  /// TimeoutError, but cost more than the blocking call (Open MPI's libnbc; docs/performance.md).
  /// std::nullopt: the environment variable IDIST_MPI_BLOCKING (1 or 0; it applies to an adopted
  /// MPI context as well), else true. Blocking calls need MPI_THREAD_MULTIPLE (what idist asks
  /// for): a program that initialized MPI at a lower thread level gets the polled calls, whose lock
  /// around each MPI call is released between polls.
  /// Non-blocking calls (all_reduce_async, auto_model's buckets) are the non-blocking MPI calls
  /// either way.
  std::optional<bool> mpi_blocking_collectives{};
  /// mpi only: a background thread that progresses non-blocking collectives (MPI_Test every 500 us
  /// while any is in flight; IDIST_MPI_PROGRESS_INTERVAL_US), so that auto_model's bucket
  /// all-reduces overlap backward. With fewer
  /// than 4 ranks it posts all-reduces above 4 MiB as 4 MiB chunks in flight together
  /// (IDIST_MPI_PROGRESS_CHUNK_BYTES; 0 = whole). Needs
  /// MPI_THREAD_MULTIPLE (idist asks for it). std::nullopt: the environment variable
  /// IDIST_MPI_PROGRESS_THREAD (1, 0 or auto), else auto: on when the world spans several nodes, off
  /// on one node, where transfers are memory copies that would compete with backward for the cores
  /// (docs/performance.md).
  std::optional<bool> mpi_progress_thread{};
  /// Collective checks and recording (see DebugLevel); std::nullopt: the environment variable
  /// IDIST_DISTRIBUTED_DEBUG (OFF, INFO or DETAIL), else Off. An invalid variable raises ValueError.
  std::optional<DebugLevel> debug{};
};

/// Initializes the distributed configuration with `backend` (one of available_backends()).
/// Mirrors ignite.distributed.initialize. "mpi" calls MPI_Init_thread unless MPI is already
/// initialized, in which case the existing MPI context is adopted.
/// @throws ValueError for an unknown backend (listing the available ones), when a backend is
///         already initialized, or for an invalid IDIST_LOG_LEVEL (see log_level()); TimeoutError
///         when the rendezvous does not complete within opts.timeout; BackendError when the backend
///         fails to start.
void initialize(std::string_view backend, const InitOptions& opts = {});

/// Tears down the current backend, restores environment variables it set, and returns to the
/// serial model. Mirrors ignite.distributed.finalize. A no-op when serial.
void finalize();

/// Synchronizes idist with the distributed context that exists now; for programs that create or
/// destroy a context themselves (their own MPI_Init / MPI_Finalize). Mirrors
/// ignite.distributed.sync(temporary):
/// - serial: a context created outside idist (today: an initialized, not finalized MPI) is adopted
///   and becomes the current model; without one, idist stays serial;
/// - an adopted context that the program has torn down since (MPI_Finalize): idist returns to serial
///   without calling MPI (ignite: no context found, the serial model again);
/// - a model of initialize(), or an adopted context still alive: kept as it is (ignite re-creates a
///   model of the same context; idist keeps the one it has, so nothing is collective).
///
/// `temporary` is ignite's flag: while serial, every query (get_rank(), backend(), the collectives
/// ...) first looks for such a context itself, as a temporary sync. An explicit sync (false, the
/// default) that finds a context turns that per-query lookup off until finalize() or initialize():
/// the program has said when its context changes, so a later return to serial through sync() stays
/// serial without a probe on every query. sync(true) adopts alike but leaves the lookup on.
/// Collective when it adopts (the adopted model duplicates MPI_COMM_WORLD).
/// @throws BackendError when adopting fails (an MPI call fails).
void sync(bool temporary = false);

/// The current backend: std::nullopt when serial, else "mpi", "gloo" or "nccl".
/// Mirrors ignite.distributed.backend.
std::optional<std::string> backend();

/// The current computation model's name: "serial", or "native-dist" for every backend (mpi, gloo,
/// nccl), as ignite names its _NativeDistModel whatever the torch.distributed backend; backend()
/// tells them apart. Mirrors ignite.distributed.model_name.
std::string model_name();

/// Backends compiled into this build, in the order "nccl", "gloo", "mpi".
/// Mirrors ignite.distributed.available_backends.
std::vector<std::string> available_backends();

/// One computation model class idist can run programs under: ignite's registered computation model
/// classes (_SerialModel, _NativeDistModel), described by the two class attributes programs read.
struct ComputationModelInfo {
  /// The class's name, which model_name() returns while one of its models is current: "serial" or
  /// "native-dist".
  std::string name;
  /// The backends the class serves (ignite's available_backends class attribute): none for
  /// "serial"; those of "nccl", "gloo", "mpi" compiled into this build for "native-dist".
  std::vector<std::string> backends;
};

/// The computation models of this build, serial first, then native-dist when a distributed backend
/// is compiled in (has_native_dist_support()). Their backends, in this order, are
/// available_backends(). Mirrors ignite.distributed.registered_computation_models (a tuple of
/// classes in ignite; idist's backends are not classes a program could use, hence descriptors).
std::vector<ComputationModelInfo> registered_computation_models();

/// Rank of this process in [0, get_world_size()); 0 when serial. Mirrors ignite's get_rank.
int get_rank();
/// Rank of this process on its node; 0 when serial. Mirrors ignite's get_local_rank.
int get_local_rank();
/// Number of processes; 1 when serial. Mirrors ignite's get_world_size.
int get_world_size();
/// Number of processes per node; 1 when serial. Mirrors ignite's get_nproc_per_node.
int get_nproc_per_node();
/// Index of this node; 0 when serial. Mirrors ignite's get_node_rank.
int get_node_rank();
/// Number of nodes; 1 when serial. Mirrors ignite's get_nnodes.
int get_nnodes();

/// The device of this rank: "cuda:<local rank>" for nccl, and for gloo / mpi when a CUDA device is
/// usable, else "cpu". Mirrors ignite.distributed.device.
Device device();

/// This host's name. Mirrors ignite.distributed.hostname.
std::string hostname();

/// Hints this process's local rank. Mirrors ignite.distributed.set_local_rank: the hint is kept for
/// the rest of the process (ignite's ComputationModel._ext_local_rank), so it may be given before the
/// context exists:
/// - a context created outside idist (the program's own MPI_Init) takes it when adopted, in place
///   of the measured local rank; a context already current takes it at once;
/// - initialize("gloo" / "nccl") uses it when the environment gives no local rank (explicit ranks
///   without LOCAL_RANK, PMI without MPI_LOCALRANKID), instead of guessing from host names;
///   InitOptions::local_rank and the launcher's variables (LOCAL_RANK, SLURM_LOCALID, ...) win;
/// - initialize("mpi") measures the local rank exactly and ignores it; the serial model stays at 0.
/// @throws ValueError for a negative local_rank; at initialize(), ValueError when the hint is not
///         below the world size.
void set_local_rank(int local_rank);

/// True when this build has a native distributed backend (gloo, mpi or nccl), i.e. when
/// available_backends() is not empty. Mirrors ignite.distributed.has_native_dist_support.
bool has_native_dist_support();
/// Always false: idist has no XLA / TPU backend. Mirrors ignite.distributed.has_xla_support.
bool has_xla_support();
/// Always false: idist has no Horovod backend. Mirrors ignite.distributed.has_hvd_support.
bool has_hvd_support();

/// Logs the configuration on rank 0 (distributed configuration, backend, device, hostname, world
/// size, rank, local rank, num processes per_node, num nodes, node rank), one INFO line each as
/// logger "distributed" (logging.hpp: stderr unless a sink is set), e.g. `idist.distributed INFO:
/// distributed configuration: native-dist`, plus "network interface" (name, address and why) on
/// backends that choose one (gloo, nccl), and "launcher" (torchrun with its run id, restart count and
/// store, slurm, mpirun, env or none). Mirrors ignite.distributed.show_config.
void show_config();

/// The current computation model (never null: serial when nothing was initialized). Advanced use:
/// issuing collectives on raw buffers, or writing layers such as the LibTorch one.
ComputationModel& current_model();

}  // namespace idist

#pragma once
/// @file
/// Rank discovery for the gloo and nccl backends, and the store each init method opens.
///
/// Sources, first match wins (the order docs/launching.md gives, with ignite's SLURM rules):
/// 1. explicit InitOptions: rank and world_size (both or neither), local_rank optional;
/// 2. SLURM, when SLURM_JOB_ID is set: SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS / SLURM_JOB_NODELIST /
///    SLURM_JOB_NUM_NODES, with ignite's consistency rules against torchrun variables defined in the job
///    (see setup_ddp_vars_from_slurm_env);
/// 3. torchrun variables RANK / LOCAL_RANK / WORLD_SIZE: all three or none;
/// 4. Open MPI: OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE (+ OMPI_COMM_WORLD_LOCAL_RANK,
///    OMPI_COMM_WORLD_LOCAL_SIZE);
/// 5. PMI (MPICH / Intel MPI / Hydra): PMI_RANK / PMI_SIZE (+ MPI_LOCALRANKID, MPI_LOCALNRANKS);
/// 6. none of them: a single process (rank 0 of 1), as ignite's defaults.
/// SLURM is looked at before the torchrun variables because ignite's rules decide what RANK & co mean
/// inside a SLURM job (a torchrun launched by srun, or enroot's hook); elsewhere the order is the contract's.
/// Deviation from ignite: explicit rank / world_size inside a SLURM job are accepted (ignite raises), so
/// that spawn / Parallel work inside an allocation with every init method.
///
/// Under torchrun (TORCHELASTIC_* variables), GROUP_RANK and GROUP_WORLD_SIZE give node_rank and nnodes
/// (checked against ignite's rank / nproc where every node runs LOCAL_WORLD_SIZE workers), and with
/// TORCHELASTIC_USE_AGENT_STORE=True the rendezvous of "env://" goes through the store torchrun's agent
/// serves at MASTER_ADDR:MASTER_PORT (open_store()).
///
/// MASTER_ADDR defaults to 127.0.0.1 and MASTER_PORT to 15000 (SLURM: first host of the node list and
/// 15000 + last four digits of SLURM_JOB_ID, unless torchrun variables give them). "tcp://host:port"
/// overrides both.
///
/// nproc_per_node / nnodes / node_rank follow ignite: nproc_per_node = max local rank + 1 over all
/// ranks, nnodes = world_size / nproc_per_node, node_rank = rank / nproc_per_node. The maximum needs
/// every rank's local rank, so discover() fills them exactly only when it can (a single process,
/// LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS); otherwise `topology_exact` is false and
/// the backend calls exchange_topology() once its store is open. Where a source gives no local rank
/// (explicit options without one, PMI without MPI_LOCALRANKID, Open MPI without its local rank), the
/// hint of idist::set_local_rank() is taken; without one, exchange_topology() derives local and node
/// ranks from the host names, as ignite's _compute_local_rank_via_hostname does (ranks of one host
/// must be contiguous).

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idist/context.hpp"
#include "launch/launcher_info.hpp"
#include "store/store.hpp"

namespace idist::rendezvous {

/// Environment variables, name -> value (ignite's functions take os.environ the same way).
using Environ = std::map<std::string, std::string>;

/// A copy of this process's environment.
Environ current_environ();

/// Where this process sits in the world, and where the world meets.
struct WorldInfo {
  int rank = 0;                           ///< global rank in [0, world_size)
  int world_size = 1;                     ///< number of processes
  int local_rank = 0;                     ///< rank on this node (provisional when !local_rank_known)
  int nproc_per_node = 1;                 ///< processes per node (provisional when !topology_exact)
  int node_rank = 0;                      ///< index of this node (provisional when !topology_exact)
  int nnodes = 1;                         ///< number of nodes (provisional when !topology_exact)
  std::string master_addr = "127.0.0.1";  ///< where rank 0 serves the TCP store
  int master_port = 15000;                ///< port of the TCP store
  /// Which source matched: "options", "slurm", "env", "openmpi", "pmi" or "default".
  std::string source = "default";
  /// False when the source gave no local rank: exchange_topology() computes it from host names.
  bool local_rank_known = true;
  /// True when nproc_per_node / nnodes / node_rank are final; else call exchange_topology().
  bool topology_exact = true;
  /// True when nproc_per_node came from the environment (LOCAL_WORLD_SIZE & co) rather than a maximum.
  bool nproc_from_env = false;
  /// torchrun's variables, when torchrun's agent started this process.
  std::optional<launch::TorchElasticVars> torchelastic;
  /// True when "env://" rendezvouses through torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True and
  /// the master address and port are torchrun's MASTER_ADDR / MASTER_PORT): every rank is its client.
  bool agent_store = false;
  /// Warnings ignite would issue (e.g. torchrun variables ignored in a SLURM job); also printed to stderr.
  std::vector<std::string> warnings;

  /// The six numbers the computation model holds.
  WorldLayout layout() const { return {rank, local_rank, world_size, nproc_per_node, node_rank, nnodes}; }
};

/// Discovers rank, world size, local rank and the master address from `opts` and this process's
/// environment (see the file comment for the order). Mirrors ignite's _NativeDistModel.setup_env_vars.
/// @throws ValueError naming the variable / argument, its value and what was expected: rank without
///         world_size, out-of-range or non-integer values, a partial set of RANK / LOCAL_RANK / WORLD_SIZE
///         (naming the missing ones), SLURM variables missing or inconsistent with torchrun variables, a bad
///         SLURM_JOB_NODELIST, an unknown init_method scheme or a malformed "tcp://host:port".
WorldInfo discover(const InitOptions& opts);
/// discover() on a given environment (tests, or a launcher preparing a worker's environment), with the
/// hint of idist::set_local_rank(): used when no source gives a local rank, before exchange_topology()
/// would guess it from host names.
WorldInfo discover(const InitOptions& opts, const Environ& env, std::optional<int> local_rank_hint = std::nullopt);

/// Expands a SLURM compressed host list: "node[18-19,1-16,21-22]" -> node1..node16, node18, node19,
/// node21, node22 (each bracket's numbers sorted and de-duplicated, leading zeros kept as in
/// "machine2-[009-11]vm1"); comma-separated entries are expanded in order, spaces are ignored, one
/// bracket per host name. Mirrors ignite's _expand_hostlist.
/// @throws ValueError "hostlist invalid : <nodelist>" for an empty or malformed bracket ("x[]").
std::vector<std::string> expand_hostlist(std::string_view nodelist);

/// What ignite's _setup_ddp_vars_from_slurm_env returns: the torchrun variables implied by a SLURM job.
struct DdpVars {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::vector<std::string> warnings;  ///< "We detected the following env variables: ..." when ignored
};

/// Ignite's rules for torchrun variables inside a SLURM job (`env` must hold the SLURM variables):
/// - RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT all defined: with SLURM_JOB_NUM_NODES > 1
///   they must equal SLURM_PROCID / SLURM_LOCALID / SLURM_NTASKS (enroot's hook); on one node they must be
///   >= them (torch.distributed.launch inside a 1-task allocation) and win; MASTER_* are taken as given.
/// - only some of them defined: they are ignored, with ignite's warning.
/// - none: SLURM values; master address = first host of SLURM_JOB_NODELIST, master port = 15000 + the last
///   four digits of SLURM_JOB_ID.
/// @throws ValueError when a SLURM variable is missing or not an integer, when torchrun variables are
///         inconsistent ("Environment variable defined for PyTorch Distributed context is inconsistent with
///         equivalent SLURM env variable. ..."), or when the node list yields no host
///         ("No hostname detected in SLURM_JOB_NODELIST by ignite (nodelist=...)").
DdpVars setup_ddp_vars_from_slurm_env(const Environ& env);

/// Opens the store named by opts.init_method: "env://" (default) -> TCPStore at
/// info.master_addr:info.master_port, "tcp://host:port" -> TCPStore there (served by rank 0 in both),
/// "file:///path" -> FileStore in directory /path. Every call bounded by opts.timeout.
/// With info.agent_store, "env://" is instead a client of torchrun's agent store (a c10d TCPStore) on
/// every rank, under torch's key prefix for the attempt ("/worker/attempt_<restart count>") and a
/// prefix of its own per initialization of this process; every rank first joins (store::join_world()).
/// @throws ValueError for an unknown scheme; what the stores' constructors and the join throw.
std::shared_ptr<store::Store> open_store(const InitOptions& opts, const WorldInfo& info);

/// Completes `info` as ignite's _setup_attrs does, through `store`: every rank publishes its local rank
/// and host name under "idist/topology/<rank>", rank 0 computes nproc_per_node = max local rank + 1
/// (or the hostname heuristic for ranks without a local rank) and publishes the result, which every rank
/// reads. A no-op when info.topology_exact && info.local_rank_known. Collective: every rank calls it once.
/// @throws TimeoutError naming the ranks that never published within `timeout`; ValueError when local ranks
///         guessed from host names collide (the ranks of a host were not contiguous).
void exchange_topology(store::Store& store, WorldInfo& info, std::chrono::milliseconds timeout);

/// Fills nproc_per_node, nnodes and node_rank from nproc (ignite: nnodes = world / nproc, node = rank / nproc).
void set_nproc_per_node(WorldInfo& info, int nproc);

}  // namespace idist::rendezvous

#pragma once
// Which launcher started this process, read from the variables it exports: torchrun (TORCHELASTIC_*),
// SLURM, Open MPI's mpirun, a PMI launcher, or a parent that exported RANK / WORLD_SIZE (idist::spawn,
// a script). For show_config() and for the rendezvous, which uses torchrun's agent store.
#include <map>
#include <optional>
#include <string>

namespace idist::launch {

/// What torchrun (torch.distributed.elastic's agent) tells its workers.
struct TorchElasticVars {
  std::string run_id;                   ///< TORCHELASTIC_RUN_ID ("none" for a static rendezvous)
  int restart_count = 0;                ///< TORCHELASTIC_RESTART_COUNT: 0 for the first attempt
  int max_restarts = 0;                 ///< TORCHELASTIC_MAX_RESTARTS
  bool use_agent_store = false;         ///< TORCHELASTIC_USE_AGENT_STORE == "True": the agent serves MASTER_PORT
  std::optional<int> group_rank;        ///< GROUP_RANK: this node's rank among the agents
  std::optional<int> group_world_size;  ///< GROUP_WORLD_SIZE: the number of agents (nodes)
};

/// torchrun's variables, or nullopt when neither TORCHELASTIC_RUN_ID nor TORCHELASTIC_USE_AGENT_STORE is
/// set. As torch, the agent store is used only for the exact value "True", and then
/// TORCHELASTIC_RESTART_COUNT must be set.
/// @throws ValueError naming the variable when a count is not an integer >= 0 (or GROUP_RANK is not in
///         [0, GROUP_WORLD_SIZE)), or TORCHELASTIC_RESTART_COUNT is missing with the agent store.
std::optional<TorchElasticVars> torchelastic_vars(const std::map<std::string, std::string>& env);

/// The key prefix torch's workers use on the agent store: "/worker/attempt_<restart count>"
/// (torch.distributed.rendezvous._create_c10d_store).
std::string agent_store_prefix(const TorchElasticVars& vars);

/// One line naming the launcher, e.g. "torchrun (run id none, restart 1 of 3, agent store)",
/// "slurm (job 42, step 0)", "mpirun (Open MPI)", "env (RANK, WORLD_SIZE: idist::spawn or another parent)",
/// "none (a single process)". `rendezvous` says whether the current backend rendezvoused through a store
/// (gloo, nccl): then the torchrun line says which store. Never throws: malformed torchrun variables are
/// named in the line.
std::string describe_launcher(const std::map<std::string, std::string>& env, bool rendezvous);

}  // namespace idist::launch

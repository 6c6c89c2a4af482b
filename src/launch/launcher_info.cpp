#include "launch/launcher_info.hpp"

#include <charconv>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::launch {

namespace {

const std::string* find(const std::map<std::string, std::string>& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

std::optional<int> count(const std::map<std::string, std::string>& env, const std::string& name) {
  const auto* v = find(env, name);
  if (!v) return std::nullopt;
  int out = 0;
  const auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (v->empty() || ec != std::errc() || ptr != v->data() + v->size() || out < 0)
    throw ValueError(fmt::format("{} should be an integer >= 0, got '{}'", name, *v));
  return out;
}

}  // namespace

std::optional<TorchElasticVars> torchelastic_vars(const std::map<std::string, std::string>& env) {
  const auto* run_id = find(env, "TORCHELASTIC_RUN_ID");
  const auto* agent_store = find(env, "TORCHELASTIC_USE_AGENT_STORE");
  if (!run_id && !agent_store) return std::nullopt;
  TorchElasticVars vars;
  vars.run_id = run_id ? *run_id : "";
  vars.use_agent_store = agent_store && *agent_store == "True";
  const auto restarts = count(env, "TORCHELASTIC_RESTART_COUNT");
  if (vars.use_agent_store && !restarts)
    throw ValueError(
        "TORCHELASTIC_USE_AGENT_STORE is True but TORCHELASTIC_RESTART_COUNT is not set: both come from torchrun, "
        "which names the agent store's keys of each attempt by the restart count");
  vars.restart_count = restarts.value_or(0);
  vars.max_restarts = count(env, "TORCHELASTIC_MAX_RESTARTS").value_or(0);
  vars.group_rank = count(env, "GROUP_RANK");
  vars.group_world_size = count(env, "GROUP_WORLD_SIZE");
  if (vars.group_rank && vars.group_world_size && *vars.group_rank >= *vars.group_world_size)
    throw ValueError(fmt::format("GROUP_RANK should be in [0, {}) (GROUP_WORLD_SIZE = {}), got {}",
                                 *vars.group_world_size, *vars.group_world_size, *vars.group_rank));
  return vars;
}

std::string agent_store_prefix(const TorchElasticVars& vars) {
  return fmt::format("/worker/attempt_{}", vars.restart_count);
}

std::string describe_launcher(const std::map<std::string, std::string>& env, bool rendezvous) {
  std::optional<TorchElasticVars> te;
  try {
    te = torchelastic_vars(env);
  } catch (const ValueError& e) {
    return fmt::format("torchrun (its variables are malformed: {})", e.what());
  }
  if (te) {
    std::string store;
    if (rendezvous) store = te->use_agent_store ? ", agent store" : ", idist's store at MASTER_PORT";
    return fmt::format("torchrun (run id {}, restart {} of {}{})", te->run_id.empty() ? "?" : te->run_id,
                       te->restart_count, te->max_restarts, store);
  }
  if (const auto* job = find(env, "SLURM_JOB_ID")) {
    const auto* step = find(env, "SLURM_STEP_ID");
    return step ? fmt::format("slurm (job {}, step {})", *job, *step) : fmt::format("slurm (job {})", *job);
  }
  if (find(env, "OMPI_COMM_WORLD_RANK")) return "mpirun (Open MPI)";
  if (find(env, "PMI_RANK")) return "PMI (MPICH / Intel MPI / Hydra)";
  if (find(env, "RANK") && find(env, "WORLD_SIZE")) return "env (RANK, WORLD_SIZE: idist::spawn or another parent)";
  return "none (a single process)";
}

}  // namespace idist::launch

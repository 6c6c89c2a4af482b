// ignite's _setup_ddp_vars_from_slurm_env: the torchrun variables a SLURM job implies, and the rules for
// torchrun variables that are already defined inside the job.
#include <array>
#include <cstdio>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/env_parse.hpp"

namespace idist::rendezvous {

namespace {
using detail::lookup;
using detail::parse_int;

constexpr std::array<const char*, 6> kSlurmVars = {"SLURM_JOB_ID", "SLURM_PROCID",       "SLURM_LOCALID",
                                                   "SLURM_NTASKS", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES"};
constexpr std::array<const char*, 5> kPthVars = {"RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

std::string describe_vars(const std::array<std::pair<const char*, std::string>, 3>& vars) {
  std::string out = "{";
  for (std::size_t i = 0; i < vars.size(); ++i)
    out += fmt::format("{}'{}': {}", i ? ", " : "", vars[i].first, vars[i].second);
  return out + "}";
}
}  // namespace

DdpVars setup_ddp_vars_from_slurm_env(const Environ& env) {
  for (const char* name : kSlurmVars)
    if (!lookup(env, name))
      throw ValueError(fmt::format("SLURM distributed configuration is missing '{}' in env variables", name));

  DdpVars vars;
  vars.rank = parse_int("SLURM_PROCID", *lookup(env, "SLURM_PROCID"));
  vars.local_rank = parse_int("SLURM_LOCALID", *lookup(env, "SLURM_LOCALID"));
  vars.world_size = parse_int("SLURM_NTASKS", *lookup(env, "SLURM_NTASKS"));
  const int nnodes = parse_int("SLURM_JOB_NUM_NODES", *lookup(env, "SLURM_JOB_NUM_NODES"));

  std::vector<std::string> defined, missing;
  for (const char* name : kPthVars) (lookup(env, name) ? defined : missing).push_back(name);

  bool have_master = false;
  if (missing.empty()) {
    // torchrun variables inside a SLURM job: enroot's hook (must equal SLURM's) or torch.distributed.launch
    // inside a one-node allocation (may only add processes: each >= SLURM's, and then they win).
    const std::array<std::pair<const char*, const char*>, 3> pairs = {
        {{"RANK", "SLURM_PROCID"}, {"LOCAL_RANK", "SLURM_LOCALID"}, {"WORLD_SIZE", "SLURM_NTASKS"}}};
    std::array<int*, 3> slurm_values = {&vars.rank, &vars.local_rank, &vars.world_size};
    const auto slurm_desc = describe_vars({{{"RANK", fmt::to_string(vars.rank)},
                                            {"LOCAL_RANK", fmt::to_string(vars.local_rank)},
                                            {"WORLD_SIZE", fmt::to_string(vars.world_size)}}});
    const auto pth_desc = describe_vars({{{"RANK", *lookup(env, "RANK")},
                                          {"LOCAL_RANK", *lookup(env, "LOCAL_RANK")},
                                          {"WORLD_SIZE", *lookup(env, "WORLD_SIZE")}}});
    std::array<int, 3> pth_values{};
    for (std::size_t i = 0; i < pairs.size(); ++i)
      pth_values[i] = parse_int(pairs[i].first, *lookup(env, pairs[i].first));
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      const int slurm = *slurm_values[i];
      const int pth = pth_values[i];
      if (nnodes > 1 && pth != slurm)
        throw ValueError(fmt::format(
            "Environment variable defined for PyTorch Distributed context is inconsistent with equivalent SLURM env "
            "variable. {}: {} vs {} ({})\nSLURM vars: {}\nPTH vars: {}",
            pairs[i].first, pth, slurm, pairs[i].second, slurm_desc, pth_desc));
      if (nnodes <= 1 && pth < slurm)
        throw ValueError(fmt::format(
            "Environment variable defined for PyTorch Distributed context is inconsistent with equivalent SLURM env "
            "variable. We expect that {}: {} >= {} ({})\nSLURM vars: {}\nPTH vars: {}",
            pairs[i].first, pth, slurm, pairs[i].second, slurm_desc, pth_desc));
    }
    for (std::size_t i = 0; i < pairs.size(); ++i) *slurm_values[i] = pth_values[i];
    vars.master_addr = *lookup(env, "MASTER_ADDR");
    vars.master_port = detail::parse_port("MASTER_PORT", *lookup(env, "MASTER_PORT"));
    have_master = true;
  } else if (!defined.empty()) {
    std::string found, absent;
    for (const auto& name : defined)
      found += fmt::format("{}('{}', '{}')", found.empty() ? "" : ", ", name, *lookup(env, name));
    for (const auto& name : missing) absent += fmt::format("{}'{}'", absent.empty() ? "" : ", ", name);
    vars.warnings.push_back(fmt::format(
        "We detected the following env variables: [{}],\nbut will not take them into account as the following env "
        "vars are missing:[{}],\n",
        found, absent));
  }

  if (!have_master) {
    const auto nodelist = *lookup(env, "SLURM_JOB_NODELIST");
    const auto hosts = expand_hostlist(nodelist);
    if (hosts.empty())
      throw ValueError(fmt::format("No hostname detected in SLURM_JOB_NODELIST by idist (nodelist={})", nodelist));
    vars.master_addr = hosts.front();
    // Same port on every process of the job: 15000 + the last four digits of the job id.
    const auto job_id = *lookup(env, "SLURM_JOB_ID");
    const auto tail = job_id.size() > 4 ? job_id.substr(job_id.size() - 4) : job_id;
    const int digits = parse_int("SLURM_JOB_ID (last four digits)", tail);
    if (digits < 0) throw ValueError(fmt::format("SLURM_JOB_ID should end with digits, got '{}'", job_id));
    vars.master_port = 15000 + digits;
  }
  return vars;
}

}  // namespace idist::rendezvous

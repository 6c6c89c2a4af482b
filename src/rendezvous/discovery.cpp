// Rank discovery: which source describes this process (see discovery.hpp for the order) and the checks
// ignite makes on each.
#include "rendezvous/discovery.hpp"

#include <cstdio>

#include <fmt/format.h>

#include "core/local_rank_hint.hpp"
#include "idist/error.hpp"
#include "launch/environment.hpp"
#include "rendezvous/env_parse.hpp"
#include "rendezvous/init_method.hpp"

namespace idist::rendezvous {

namespace {
using detail::get_int;
using detail::lookup;
using detail::parse_int;

// Reads a group of variables that must be defined together; nullopt when none is.
// @throws ValueError naming the missing ones when only some are.
std::optional<std::vector<int>> read_together(const Environ& env, const std::vector<std::string>& names,
                                              const std::string& what) {
  std::vector<std::string> missing;
  for (const auto& n : names)
    if (!lookup(env, n)) missing.push_back(n);
  if (missing.size() == names.size()) return std::nullopt;
  if (!missing.empty()) {
    std::string all, absent;
    for (const auto& n : names) all += fmt::format("{}'{}'", all.empty() ? "" : ", ", n);
    for (const auto& n : missing) absent += fmt::format("{}'{}'", absent.empty() ? "" : ", ", n);
    throw ValueError(
        fmt::format("{} should define env variables [{}] (all or none), but [{}] are missing", what, all, absent));
  }
  std::vector<int> values;
  for (const auto& n : names) values.push_back(parse_int(n, *lookup(env, n)));
  return values;
}

void check_ranks(const WorldInfo& info, const std::string& rank_name, const std::string& world_name,
                 const std::string& local_name) {
  if (info.world_size < 1) throw ValueError(fmt::format("{} should be >= 1, got {}", world_name, info.world_size));
  if (info.rank < 0 || info.rank >= info.world_size)
    throw ValueError(fmt::format("{} should be in [0, {}) ({} = {}), got {}", rank_name, info.world_size, world_name,
                                 info.world_size, info.rank));
  if (info.local_rank_known && (info.local_rank < 0 || info.local_rank >= info.world_size))
    throw ValueError(fmt::format("{} should be in [0, {}) ({} = {}), got {}", local_name, info.world_size, world_name,
                                 info.world_size, info.local_rank));
}

// A per-node process count given by the environment (LOCAL_WORLD_SIZE & co).
void take_nproc(WorldInfo& info, const Environ& env, const std::string& name) {
  const auto nproc = get_int(env, name);
  if (!nproc) return;
  if (*nproc < 1 || *nproc > info.world_size)
    throw ValueError(fmt::format("{} should be in [1, {}] (the world size), got {}", name, info.world_size, *nproc));
  if (info.local_rank_known && info.local_rank >= *nproc)
    throw ValueError(fmt::format("{} = {} should be larger than the local rank {}", name, *nproc, info.local_rank));
  info.nproc_per_node = *nproc;
  info.nproc_from_env = true;
}

// The variables an MPI launcher (Open MPI's mpirun, a PMI launcher) exports for each process.
struct MpiLauncherVars {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;  // may be absent (local rank then unknown, taken as 0)
  const char* local_size;  // may be absent
};

// `values` holds the rank and size read together from `vars.rank` and `vars.size`.
void take_mpi_launcher(WorldInfo& info, const Environ& env, const std::vector<int>& values,
                       const MpiLauncherVars& vars) {
  info.source = vars.source;
  info.rank = values[0];
  info.world_size = values[1];
  const auto local = get_int(env, vars.local_rank);
  info.local_rank = local.value_or(0);
  info.local_rank_known = local.has_value();
  check_ranks(info, vars.rank, vars.size, vars.local_rank);
  take_nproc(info, env, vars.local_size);
}

// torchrun numbers its agents (nodes): GROUP_RANK of GROUP_WORLD_SIZE. Where every node runs
// LOCAL_WORLD_SIZE workers these are ignite's rank / nproc and world / nproc, and must agree; where nodes
// run different numbers, ignite's formulas do not describe the job and torchrun's numbers are taken.
void take_group_rank(WorldInfo& info) {
  const auto& te = *info.torchelastic;
  if (!te.group_rank || !te.group_world_size || !info.nproc_from_env) return;
  const int group = *te.group_rank;
  const int groups = *te.group_world_size;
  if (groups > info.world_size)
    throw ValueError(fmt::format("GROUP_WORLD_SIZE should be <= WORLD_SIZE ({}), got {}", info.world_size, groups));
  const int nproc = info.nproc_per_node;
  if (groups * nproc == info.world_size && info.rank / nproc != group)
    throw ValueError(fmt::format(
        "GROUP_RANK = {} disagrees with RANK / LOCAL_WORLD_SIZE = {} / {} = {} (GROUP_WORLD_SIZE * LOCAL_WORLD_SIZE = "
        "WORLD_SIZE = {}: every node runs LOCAL_WORLD_SIZE workers); are these torchrun variables of one job?",
        group, info.rank, nproc, info.rank / nproc, info.world_size));
  info.node_rank = group;
  info.nnodes = groups;
}

// The agent's store is at torchrun's MASTER_ADDR:MASTER_PORT; "tcp://" or another master means idist's own.
bool uses_agent_store(const WorldInfo& info, const Environ& env, detail::InitMethod::Kind kind) {
  if (!info.torchelastic || !info.torchelastic->use_agent_store || kind != detail::InitMethod::Kind::Env) return false;
  const auto addr = lookup(env, "MASTER_ADDR");
  const auto port = lookup(env, "MASTER_PORT");
  return addr && port && *addr == info.master_addr && detail::parse_port("MASTER_PORT", *port) == info.master_port;
}
}  // namespace

Environ current_environ() { return launch::snapshot(); }

void set_nproc_per_node(WorldInfo& info, int nproc) {
  if (nproc < 1) throw ValueError(fmt::format("nproc_per_node should be >= 1, got {}", nproc));
  info.nproc_per_node = nproc;
  info.nnodes = std::max(1, info.world_size / nproc);
  info.node_rank = info.rank / nproc;
  info.topology_exact = true;
}

WorldInfo discover(const InitOptions& opts) { return discover(opts, current_environ(), core::local_rank_hint()); }

WorldInfo discover(const InitOptions& opts, const Environ& env, std::optional<int> local_rank_hint) {
  const auto method = detail::parse_init_method(opts.init_method);
  WorldInfo info;
  if (const auto addr = lookup(env, "MASTER_ADDR"); addr && !addr->empty()) info.master_addr = *addr;
  if (const auto port = lookup(env, "MASTER_PORT")) info.master_port = detail::parse_port("MASTER_PORT", *port);
  info.torchelastic = launch::torchelastic_vars(env);

  for (const auto& [name, value] : {std::pair{"rank", opts.rank}, std::pair{"world_size", opts.world_size},
                                    std::pair{"local_rank", opts.local_rank}})
    if (value < -1) throw ValueError(fmt::format("{} should be >= 0 (or -1 to discover it), got {}", name, value));

  if (opts.rank >= 0 || opts.world_size >= 0) {
    if (opts.rank < 0 || opts.world_size < 0)
      throw ValueError(fmt::format("Both rank and world_size should be provided, but given rank={} and world_size={}",
                                   opts.rank, opts.world_size));
    info.source = "options";
    info.rank = opts.rank;
    info.world_size = opts.world_size;
    const auto local = get_int(env, "LOCAL_RANK");
    info.local_rank = local.value_or(0);
    info.local_rank_known = local.has_value();
    check_ranks(info, "rank", "world_size", "LOCAL_RANK");
    take_nproc(info, env, "LOCAL_WORLD_SIZE");
  } else if (lookup(env, "SLURM_JOB_ID")) {
    auto vars = setup_ddp_vars_from_slurm_env(env);
    info.source = "slurm";
    info.rank = vars.rank;
    info.world_size = vars.world_size;
    info.local_rank = vars.local_rank;
    info.master_addr = vars.master_addr;
    info.master_port = vars.master_port;
    info.warnings = std::move(vars.warnings);
    check_ranks(info, "SLURM_PROCID (or RANK)", "SLURM_NTASKS (or WORLD_SIZE)", "SLURM_LOCALID (or LOCAL_RANK)");
  } else if (auto v = read_together(env, {"RANK", "LOCAL_RANK", "WORLD_SIZE"}, "PyTorch distributed configuration")) {
    info.source = "env";
    info.rank = (*v)[0];
    info.local_rank = (*v)[1];
    info.world_size = (*v)[2];
    check_ranks(info, "RANK", "WORLD_SIZE", "LOCAL_RANK");
    take_nproc(info, env, "LOCAL_WORLD_SIZE");
  } else if (auto v = read_together(env, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, "Open MPI configuration")) {
    take_mpi_launcher(info, env, *v,
                      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                       "OMPI_COMM_WORLD_LOCAL_SIZE"});
  } else if (auto v = read_together(env, {"PMI_RANK", "PMI_SIZE"}, "PMI configuration")) {
    take_mpi_launcher(info, env, *v, {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"});
  }

  if (opts.local_rank >= 0) {  // an explicit local rank beats every source
    if (opts.local_rank >= info.world_size)
      throw ValueError(
          fmt::format("local_rank should be in [0, {}) (the world size), got {}", info.world_size, opts.local_rank));
    if (info.nproc_from_env && opts.local_rank >= info.nproc_per_node)
      throw ValueError(fmt::format("local_rank should be smaller than the {} processes per node, got {}",
                                   info.nproc_per_node, opts.local_rank));
    info.local_rank = opts.local_rank;
    info.local_rank_known = true;
  }

  // ignite's order for a missing local rank: LOCAL_RANK, then the set_local_rank() hint, then host names.
  if (!info.local_rank_known && local_rank_hint && info.world_size > 1) {
    if (*local_rank_hint >= info.world_size)
      throw ValueError(fmt::format("set_local_rank: the local rank hint {} should be in [0, {}) (the world size)",
                                   *local_rank_hint, info.world_size));
    info.local_rank = *local_rank_hint;
    info.local_rank_known = true;
  }

  if (method.kind == detail::InitMethod::Kind::Tcp) {
    info.master_addr = method.host;
    info.master_port = method.port;
  }

  if (info.world_size == 1) {
    info.local_rank = 0;
    info.local_rank_known = true;
    set_nproc_per_node(info, 1);
  } else if (info.nproc_from_env) {
    set_nproc_per_node(info, info.nproc_per_node);
    if (info.source == "env" && info.torchelastic) take_group_rank(info);
  } else {
    // Provisional single-node layout until exchange_topology() has every rank's local rank.
    info.nproc_per_node = info.world_size;
    info.nnodes = 1;
    info.node_rank = 0;
    info.topology_exact = false;
  }

  info.agent_store = uses_agent_store(info, env, method.kind);
  for (const auto& w : info.warnings) std::fprintf(stderr, "idist warning: %s\n", w.c_str());
  return info;
}

}  // namespace idist::rendezvous

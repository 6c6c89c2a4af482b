// ignite's argument checks for spawn and Parallel. Messages keep ignite's wording (including "should
// positive" and Python's None for an argument not given) so that users can search for them.
#include "launcher/argument_checks.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "launch/launcher_env.hpp"

namespace idist {

namespace launcher {

std::string quoted_backends() {
  std::string s;
  for (const auto& b : available_backends()) s += fmt::format("{}'{}'", s.empty() ? "" : ", ", b);
  return fmt::format("[{}]", s);
}

bool is_available(std::string_view backend) {
  const auto names = available_backends();
  return std::find(names.begin(), names.end(), backend) != names.end();
}

namespace {

template <class T>
std::string py(const std::optional<T>& v) {
  return v ? fmt::format("{}", *v) : "None";
}

void check_counts(int nproc_per_node, int nnodes, int node_rank) {
  if (nproc_per_node < 1)
    throw ValueError(fmt::format("Argument nproc_per_node should positive, but given {}", nproc_per_node));
  if (nnodes < 1) throw ValueError(fmt::format("Argument nnodes should positive, but given {}", nnodes));
  if (node_rank >= nnodes || node_rank < 0)
    throw ValueError(fmt::format("Argument node_rank should be between 0 and {}, but given {}", nnodes - 1, node_rank));
}

// Parallel's rule (ignite's _setup_spawn_params): several nodes need the master's address and port, or
// an init_method; an explicit "env://" counts, its address and port then coming from the environment.
void check_multi_node_master(int nnodes, const std::optional<std::string>& master_addr,
                             const std::optional<int>& master_port, const std::optional<std::string>& init_method) {
  const bool rendezvous_given = (master_addr && master_port) || init_method;
  if (nnodes > 1 && !rendezvous_given)
    throw ValueError(
        fmt::format("If number of nodes larger than one, arguments master_addr and master_port or init_method should "
                    "be specified, but given master_addr={}, master_port={} and init_method={}.",
                    py(master_addr), py(master_port), py(init_method)));
}

}  // namespace

SpawnOptions setup_spawn_params(std::string_view backend, const ParallelOptions& opts) {
  const int nproc = *opts.nproc_per_node;
  if (nproc < 1) throw ValueError(fmt::format("Argument nproc_per_node should positive, but given {}", nproc));
  const int nnodes = opts.nnodes.value_or(1);
  if (nnodes < 1) throw ValueError(fmt::format("Argument nnodes should positive, but given {}", nnodes));
  if (!opts.node_rank && nnodes > 1)
    throw ValueError("If number of nodes larger than one, arguments node_rank should be given");
  const int node_rank = opts.node_rank.value_or(0);
  check_counts(nproc, nnodes, node_rank);
  check_multi_node_master(nnodes, opts.master_addr, opts.master_port, opts.init_method);
  SpawnOptions s;
  s.nproc_per_node = nproc;
  s.nnodes = nnodes;
  s.node_rank = node_rank;
  s.master_addr = opts.master_addr;
  s.master_port = opts.master_port;
  if (opts.init_method) s.init_method = *opts.init_method;
  if (opts.timeout) s.timeout = *opts.timeout;
  detail::check_spawn_options(backend, s);
  return s;
}

}  // namespace launcher

namespace detail {

void check_spawn_options(std::string_view backend, const SpawnOptions& opts) {
  if (backend == "mpi")
    throw ValueError(
        "spawn: the mpi backend cannot be spawned: MPI processes must be started by an MPI launcher. Run the "
        "program with mpirun (e.g. `mpirun -np 4 ./app`) and call idist::initialize(\"mpi\") or use "
        "idist::Parallel(\"mpi\") without nproc_per_node");
  if (!launcher::is_available(backend))
    throw ValueError(fmt::format("Backend should be one of {}, but given '{}'", launcher::quoted_backends(), backend));
  launcher::check_counts(opts.nproc_per_node, opts.nnodes, opts.node_rank);
  if (opts.master_port && (*opts.master_port < 1 || *opts.master_port > 65535))
    throw ValueError(
        fmt::format("Argument master_port should be between 1 and 65535, but given {}", *opts.master_port));
  if (opts.timeout.count() <= 0)
    throw ValueError(fmt::format("Argument timeout should be positive, but given {} ms", opts.timeout.count()));
}

SpawnOptions with_master_defaults(SpawnOptions opts) {
  if (!opts.master_addr) opts.master_addr = launch::spawn_master_addr();
  if (!opts.master_port) opts.master_port = launch::spawn_master_port();
  return opts;
}

}  // namespace detail

}  // namespace idist

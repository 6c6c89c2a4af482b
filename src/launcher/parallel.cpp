// Parallel: ignite's launcher context manager as an RAII object, with its log lines.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "launcher/argument_checks.hpp"

namespace idist {

namespace detail {

std::string demangled_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? out.get() : type.name();
}

}  // namespace detail

namespace {

// ignite's "- Parameters to spawn processes:" block: the parameters given, one per line.
std::string spawn_parameters(const SpawnOptions& s) {
  std::string text = "- Parameters to spawn processes: \n\tnproc_per_node: " + std::to_string(s.nproc_per_node) +
                     "\n\tnnodes: " + std::to_string(s.nnodes) + "\n\tnode_rank: " + std::to_string(s.node_rank);
  if (s.master_addr) text += "\n\tmaster_addr: " + *s.master_addr;
  if (s.master_port) text += "\n\tmaster_port: " + std::to_string(*s.master_port);
  return text + "\n\tinit_method: " + s.init_method;
}

}  // namespace

Parallel::Parallel(std::optional<std::string> backend, ParallelOptions opts) : backend_(std::move(backend)) {
  if (backend_) {
    if (!launcher::is_available(*backend_))
      throw ValueError("Unknown backend '" + *backend_ + "'. Available backends: " + launcher::quoted_backends());
  } else {
    const auto reject = [](const char* name, const std::string& value) {
      throw ValueError(std::string("If backend is None, argument '") + name + "' should be also None, but given " + value);
    };
    if (opts.nproc_per_node) reject("nproc_per_node", std::to_string(*opts.nproc_per_node));
    if (opts.nnodes) reject("nnodes", std::to_string(*opts.nnodes));
    if (opts.node_rank) reject("node_rank", std::to_string(*opts.node_rank));
    if (opts.master_addr) reject("master_addr", *opts.master_addr);
    if (opts.master_port) reject("master_port", std::to_string(*opts.master_port));
    if (opts.init_method) reject("init_method", *opts.init_method);
    if (opts.timeout) reject("timeout", std::to_string(opts.timeout->count()) + " ms");
    return;
  }
  if (opts.nproc_per_node) {
    spawn_ = launcher::setup_spawn_params(*backend_, opts);
    log_info(detail::kParallelLogger, "Initialized distributed launcher with backend: '" + *backend_ + "'");
    log_info(detail::kParallelLogger, spawn_parameters(*spawn_));
    return;
  }
  // Started by mpirun / srun / a torchrun-style launcher: initialize here (ignite's __enter__).
  InitOptions init;
  if (opts.init_method) init.init_method = *opts.init_method;
  if (opts.timeout) init.timeout = *opts.timeout;
  initialize(*backend_, init);
  initialized_ = true;
  log_info(detail::kParallelLogger, "Initialized processing group with backend: '" + *backend_ + "'");
}

Parallel::~Parallel() {
  if (!initialized_) return;
  try {
    log_info(detail::kParallelLogger, "Finalized processing group with backend: '" + *backend_ + "'");
    finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist::Parallel: finalize failed: %s\n", e.what());
  }
}

}  // namespace idist

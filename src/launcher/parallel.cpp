// Parallel: ignite's launcher context manager as an RAII object.
#include <cstdio>

#include "launcher/argument_checks.hpp"

namespace idist {

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
    return;
  }
  // Started by mpirun / srun / a torchrun-style launcher: initialize here (ignite's __enter__).
  InitOptions init;
  if (opts.init_method) init.init_method = *opts.init_method;
  if (opts.timeout) init.timeout = *opts.timeout;
  initialize(*backend_, init);
  initialized_ = true;
}

Parallel::~Parallel() {
  if (!initialized_) return;
  try {
    finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist::Parallel: finalize failed: %s\n", e.what());
  }
}

}  // namespace idist

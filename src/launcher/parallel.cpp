// Parallel: ignite's launcher context manager as an RAII object, with its log lines.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

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
  std::string text =
      fmt::format("- Parameters to spawn processes: \n\tnproc_per_node: {}\n\tnnodes: {}\n\tnode_rank: {}",
                  s.nproc_per_node, s.nnodes, s.node_rank);
  if (s.master_addr) text += fmt::format("\n\tmaster_addr: {}", *s.master_addr);
  if (s.master_port) text += fmt::format("\n\tmaster_port: {}", *s.master_port);
  return text + fmt::format("\n\tinit_method: {}", s.init_method);
}

}  // namespace

Parallel::Parallel(std::optional<std::string> backend, ParallelOptions opts) : backend_(std::move(backend)) {
  if (backend_) {
    if (!launcher::is_available(*backend_))
      throw ValueError(
          fmt::format("Unknown backend '{}'. Available backends: {}", *backend_, launcher::quoted_backends()));
  } else {
    const auto reject = [](const char* name, const auto& value) {
      throw ValueError(fmt::format("If backend is None, argument '{}' should be also None, but given {}", name, value));
    };
    if (opts.nproc_per_node) reject("nproc_per_node", *opts.nproc_per_node);
    if (opts.nnodes) reject("nnodes", *opts.nnodes);
    if (opts.node_rank) reject("node_rank", *opts.node_rank);
    if (opts.master_addr) reject("master_addr", *opts.master_addr);
    if (opts.master_port) reject("master_port", *opts.master_port);
    if (opts.init_method) reject("init_method", *opts.init_method);
    if (opts.timeout) reject("timeout", fmt::format("{} ms", opts.timeout->count()));
    return;
  }
  if (opts.nproc_per_node) {
    spawn_ = launcher::setup_spawn_params(*backend_, opts);
    log_info(detail::kParallelLogger, fmt::format("Initialized distributed launcher with backend: '{}'", *backend_));
    log_info(detail::kParallelLogger, spawn_parameters(*spawn_));
    return;
  }
  // Started by mpirun / srun / a torchrun-style launcher: initialize here (ignite's __enter__).
  InitOptions init;
  if (opts.init_method) init.init_method = *opts.init_method;
  if (opts.timeout) init.timeout = *opts.timeout;
  initialize(*backend_, init);
  initialized_ = true;
  log_info(detail::kParallelLogger, fmt::format("Initialized processing group with backend: '{}'", *backend_));
}

Parallel::~Parallel() {
  if (!initialized_) return;
  try {
    log_info(detail::kParallelLogger, fmt::format("Finalized processing group with backend: '{}'", *backend_));
    finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist::Parallel: finalize failed: %s\n", e.what());
  }
}

}  // namespace idist

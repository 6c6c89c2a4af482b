// fashion_mnist: the main job of idist. A small CNN trained on Fashion-MNIST, data-parallel over the
// ranks of any idist backend, through idist::auto_dataloader / auto_model / auto_optim.
//
//   mpirun -np 2 build/examples/fashion_mnist/fashion_mnist --backend mpi --epochs 1
//   build/examples/fashion_mnist/fashion_mnist --backend gloo --nproc-per-node 2 --checkpoint-dir ckpt
//
// Rank 0 prints progress lines on stderr and, at the end, one JSON line on stdout:
//   {"world_size": 2, "epochs": 1, ..., "train_loss": ..., "train_accuracy": ..., "test_accuracy": ...}
#include <algorithm>
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <idist/idist.hpp>

#include "options.hpp"
#include "training.hpp"

namespace fashion_mnist {
namespace {

// A backend this build of idist lacks is refused with the reason, before anything starts.
void check_backend_is_built(const std::string& backend) {
  if (backend == "serial") return;
  const std::vector<std::string> built = idist::available_backends();
  if (std::find(built.begin(), built.end(), backend) != built.end()) return;
  throw idist::ValueError(fmt::format("--backend {}: this build of idist has no {} backend{} (built: {})", backend,
                                      backend,
                                      backend == "nccl" ? "; it needs the CUDA runtime and NCCL when idist is built, "
                                                          "and NVIDIA GPUs to run"
                                                        : "",
                                      built.empty() ? "none" : fmt::format("{}", fmt::join(built, ", "))));
}

// Runs train() in the configuration the command line asks for: in workers started by idist::Parallel
// (--nproc-per-node, or ignite's multi-node form: every node runs the same command with its
// --node-rank), or here (serial, or one rank of a job started by mpirun / a torchrun-style launcher).
int run(const Options& o) {
  check_backend_is_built(o.backend);
  const auto timeout = std::chrono::milliseconds(std::int64_t(o.timeout * 1000));
  if (launches_workers(o)) {
    if (o.backend == "serial")
      throw idist::ValueError(
          "--nproc-per-node, --nnodes, --node-rank, --master-addr and --master-port start workers through "
          "idist::Parallel: give --backend gloo or nccl (for mpi, start the ranks with mpirun)");
#if IDIST_HAVE_GLOO || IDIST_HAVE_NCCL
    // Parallel forks the workers (ignite's Parallel with nproc_per_node, nnodes, node_rank, master_addr,
    // master_port); nothing of LibTorch has run in this process yet.
    idist::Parallel parallel(o.backend, {.nproc_per_node = o.nproc_per_node.value_or(1),
                                         .nnodes = o.nnodes,
                                         .node_rank = o.node_rank,
                                         .master_addr = o.master_addr,
                                         .master_port = o.master_port,
                                         .init_method = std::nullopt,  // env://, with the master given above
                                         .timeout = timeout});
    parallel.run([&o](int /*local_rank*/) { train(o); });
    return 0;
#else
    throw idist::ValueError(
        "starting workers needs the gloo or nccl backend, which this build of idist does not "
        "have; launch the ranks with mpirun instead (--backend mpi)");
#endif
  }
  if (o.backend != "serial") idist::initialize(o.backend, idist::InitOptions{.timeout = timeout});
  train(o);
  // Only on success: finalize is collective, and a failed rank must not wait in it for the others.
  idist::finalize();
  return 0;
}

}  // namespace
}  // namespace fashion_mnist

int main(int argc, char** argv) {
  fashion_mnist::Options options;
  if (auto code = fashion_mnist::parse_options(argc, argv, options)) return *code;
  try {
    return fashion_mnist::run(options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fashion_mnist: error: {}\n", e.what());
    idist::elastic::record_error(e);  // under torchrun: the root cause in its failure summary
    return 1;
  }
}

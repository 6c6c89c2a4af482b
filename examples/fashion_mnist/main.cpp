// fashion_mnist: the main job of idist. A small CNN trained on Fashion-MNIST, data-parallel over the
// ranks of any idist backend, through idist::auto_dataloader / auto_model / auto_optim.
//
//   mpirun -np 2 build/examples/fashion_mnist/fashion_mnist --backend mpi --epochs 1
//
// Rank 0 prints progress lines on stderr and, at the end, one JSON line on stdout:
//   {"world_size": 2, "epochs": 1, "train_seconds": ..., "images_per_s": ..., "test_accuracy": ...}
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <span>

#include <fmt/format.h>
#include <torch/torch.h>

#include <idist/idist.hpp>

#include "dataset.hpp"
#include "net.hpp"
#include "options.hpp"
#include "progress.hpp"
#include "threads.hpp"

namespace fashion_mnist {
namespace {

// Accuracy of `model` on `test`, each rank scoring its own contiguous shard; the correct / total
// counts are summed over the ranks with all_reduce.
double evaluate(Net& model, const FashionMnist& test, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model.eval();
  const std::int64_t n = test.images().size(0);
  const std::int64_t rank = idist::get_rank();
  const std::int64_t world = idist::get_world_size();
  const std::int64_t begin = n * rank / world;
  const std::int64_t end = n * (rank + 1) / world;
  constexpr std::int64_t kChunk = 1000;
  std::array<std::int64_t, 2> counts{0, end - begin};  // correct, total
  for (std::int64_t i = begin; i < end; i += kChunk) {
    const std::int64_t j = std::min(end, i + kChunk);
    const torch::Tensor logits = model.forward(test.images().slice(0, i, j).to(device));
    counts[0] += logits.argmax(1).eq(test.targets().slice(0, i, j).to(device)).sum().item<std::int64_t>();
  }
  idist::all_reduce(std::span<std::int64_t>(counts));
  return counts[1] > 0 ? double(counts[0]) / double(counts[1]) : 0.0;
}

// The learning rate at `progress` in [0, 1) of the whole run: constant, or decayed linearly to 0
// (annealing the rate gains about 2 points of test accuracy after one epoch over a constant one).
double learning_rate(const Options& o, double progress) {
  return o.lr_schedule == LrSchedule::Linear ? o.lr * (1.0 - progress) : o.lr;
}

void set_lr(torch::optim::SGD& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
}

// Trains and evaluates on the current idist configuration; returns the process's exit code.
int train(const Options& o) {
  const int rank = idist::get_rank();
  const int world = idist::get_world_size();
  const std::optional<int> threads = default_intra_op_threads(idist::get_nproc_per_node());
  if (threads) torch::set_num_threads(*threads);
  torch::manual_seed(o.seed);
  idist::show_config();

  const torch::Device device = idist::to_torch_device(idist::device());
  FashionMnist train_set(o.data_dir, FashionMnist::Mode::Train, o.limit);
  const FashionMnist test_set(o.data_dir, FashionMnist::Mode::Test);
  const std::int64_t n_train = std::int64_t(*train_set.size());

  // auto_dataloader divides the global batch and the workers among the ranks and shards the data
  // with a DistributedSampler (ignite's rules).
  auto loader = idist::auto_dataloader(train_set.map(torch::data::transforms::Stack<>()),
                                       idist::DataLoaderOptions{.batch_size = std::size_t(o.batch_size),
                                                                .num_workers = std::size_t(o.num_workers),
                                                                .shuffle = true,
                                                                .drop_last = true});
  auto model = idist::auto_model(std::make_shared<Net>());
  auto optimizer = idist::auto_optim(std::make_shared<torch::optim::SGD>(
      model->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum)));

  const auto steps = std::int64_t(loader.size().value());
  const auto local_batch = std::int64_t(loader.options().batch_size);
  if (rank == 0)
    fmt::print(stderr,
               "fashion_mnist: {} training / {} test images, global batch {} ({} per rank x {} ranks), "
               "{} steps per epoch, {} intra-op thread(s) per rank\n",
               n_train, *test_set.size(), local_batch * world, local_batch, world, steps, torch::get_num_threads());

  Progress progress(o.epochs, steps, local_batch * world,
                    std::chrono::milliseconds(std::int64_t(o.log_every * 1000)), rank == 0);
  double accuracy = 0.0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    loader.set_epoch(epoch);
    model->train();
    idist::barrier();  // start the clock together
    progress.start_epoch(epoch + 1);
    std::int64_t step = 0;
    for (auto& batch : loader) {
      const torch::Tensor data = batch.data.to(device);
      const torch::Tensor target = batch.target.to(device);
      optimizer->zero_grad();
      const torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(data), target);
      loss.backward();  // auto_model has averaged the gradients over the ranks when this returns
      set_lr(*optimizer, learning_rate(o, double(epoch * steps + step) / double(o.epochs * steps)));
      optimizer->step();
      progress.step(++step, loss.item<double>());
    }
    progress.end_epoch();
    accuracy = evaluate(*model, test_set, device);
    if (rank == 0) fmt::print(stderr, "epoch {}/{}: test accuracy {:.4f}\n", epoch + 1, o.epochs, accuracy);
  }

  if (rank == 0) {
    const double seconds = progress.train_seconds();
    fmt::print("{{\"world_size\": {}, \"backend\": \"{}\", \"epochs\": {}, \"batch_size\": {}, \"train_images\": {}, "
               "\"threads_per_rank\": {}, \"train_seconds\": {:.3f}, \"images_per_s\": {:.1f}, \"test_accuracy\": {:.4f}}}\n",
               world, idist::backend().value_or("serial"), o.epochs, local_batch * world, n_train,
               torch::get_num_threads(), seconds, seconds > 0 ? double(progress.images_done()) / seconds : 0.0,
               accuracy);
    std::fflush(stdout);
  }
  return 0;
}

// Runs train() in the configuration the command line asks for: here (serial, or one rank of a job
// started by mpirun / a torchrun-style launcher), or in --nproc-per-node workers spawned here.
int run(const Options& o) {
  const auto timeout = std::chrono::milliseconds(std::int64_t(o.timeout * 1000));
  if (o.nproc_per_node) {
#if IDIST_HAVE_GLOO || IDIST_HAVE_NCCL
    // idist::spawn forks the workers; nothing of LibTorch has run in this process yet.
    idist::spawn(o.backend, [&o](int /*local_rank*/) { train(o); },
                 idist::SpawnOptions{.nproc_per_node = *o.nproc_per_node, .timeout = timeout});
    return 0;
#else
    throw idist::ValueError(fmt::format(
        "--nproc-per-node {}: spawning workers needs the gloo backend, which this build of idist does not have; "
        "launch the ranks with mpirun instead (--backend mpi)",
        *o.nproc_per_node));
#endif
  }
  if (o.backend != "serial") idist::initialize(o.backend, idist::InitOptions{.timeout = timeout});
  const int code = train(o);
  // Only on success: finalize is collective, and a failed rank must not wait in it for the others.
  idist::finalize();
  return code;
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
    return 1;
  }
}

#include "training.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <torch/torch.h>

#include <idist/idist.hpp>

#include "checkpoint.hpp"
#include "dataset.hpp"
#include "metrics.hpp"
#include "net.hpp"
#include "progress.hpp"
#include "threads.hpp"

namespace fashion_mnist {
namespace {

using TestLoader = idist::DataLoader<decltype(std::declval<FashionMnist>().map(torch::data::transforms::Stack<>()))>;

// The test split through a DistributedSampler without shuffling: each rank scores the unpadded part of
// its share, so the ranks together count every test image exactly once.
TestLoader make_test_loader(const FashionMnist& test) {
  auto sampler =
      std::make_shared<idist::DistributedSampler>(*test.size(), std::nullopt, std::nullopt, /*shuffle=*/false);
  return idist::auto_dataloader(
      FashionMnist(test).map(torch::data::transforms::Stack<>()),
      {.batch_size = std::size_t(1000 * idist::get_world_size()), .shuffle = false, .sampler = std::move(sampler)});
}

// Accuracy of `model` over the whole test split (correct / total summed over the ranks).
double evaluate(Net& model, TestLoader& loader, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model.eval();
  const auto& sampler = static_cast<const idist::DistributedSampler&>(loader.sampler());
  const auto keep = std::int64_t(sampler.unpadded_size());
  std::array<std::int64_t, 2> counts{0, 0};  // correct, total
  for (auto& batch : loader) {
    const std::int64_t n = std::min(batch.data.size(0), keep - counts[1]);  // padding repeats come last
    if (n <= 0) break;
    const torch::Tensor logits = model.forward(batch.data.slice(0, 0, n).to(device));
    counts[0] += logits.argmax(1).eq(batch.target.slice(0, 0, n).to(device)).sum().item<std::int64_t>();
    counts[1] += n;
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

// Warns (rank 0) about options that differ from the checkpoint's: the command line's values are used.
void report_differences(const CheckpointState& saved, const Options& o) {
  const CheckpointState now = state_of(o, saved.epoch, saved.world_size);
  std::string diff;
  const auto note = [&](const char* flag, auto was, auto is) {
    if (was != is) diff += fmt::format("{}{} {} (checkpoint: {})", diff.empty() ? "" : ", ", flag, is, was);
  };
  note("--seed", saved.seed, now.seed);
  note("--lr", saved.lr, now.lr);
  note("--momentum", saved.momentum, now.momentum);
  note("--lr-schedule", int(saved.lr_schedule), int(now.lr_schedule));
  note("--epochs", saved.epochs, now.epochs);
  note("--batch-size", saved.batch_size, now.batch_size);
  note("--limit", saved.limit, now.limit);
  if (!diff.empty() && idist::get_rank() == 0)
    fmt::print(stderr, "fashion_mnist: warning: resuming with {}; the run will differ from an uninterrupted one\n",
               diff);
}

// idist's device, refused with the remedy when it is a GPU this LibTorch cannot use (a CPU-only build
// on a machine with GPUs), before anything is loaded.
torch::Device training_device() {
  const torch::Device device = idist::to_torch_device(idist::device());
  if (!device.is_cuda() || torch::cuda::is_available()) return device;
  const bool nccl = idist::backend() == std::optional<std::string>("nccl");
  throw idist::ValueError(
      fmt::format("idist's device is {}, but this LibTorch has no CUDA support (a CPU-only "
                  "build): use a CUDA build of LibTorch{}",
                  device.str(), nccl ? "" : ", or hide the GPUs with CUDA_VISIBLE_DEVICES="));
}

}  // namespace

void train(const Options& o) {
  const int rank = idist::get_rank();
  const int world = idist::get_world_size();
  if (const auto threads = default_intra_op_threads(idist::get_nproc_per_node())) torch::set_num_threads(*threads);
  torch::manual_seed(o.seed);
  idist::show_config();

  const torch::Device device = training_device();
  FashionMnist train_set(o.data_dir, FashionMnist::Mode::Train, o.limit);
  const FashionMnist test_set(o.data_dir, FashionMnist::Mode::Test);
  const std::int64_t n_train = std::int64_t(*train_set.size());

  // Shuffled with seed + epoch at any world size, so that a resumed run sees the same order.
  auto train_sampler = std::make_shared<idist::DistributedSampler>(std::size_t(n_train), std::nullopt, std::nullopt,
                                                                   /*shuffle=*/true, o.seed);
  // auto_dataloader divides the global batch and the workers among the ranks (ignite's rules).
  auto loader = idist::auto_dataloader(train_set.map(torch::data::transforms::Stack<>()),
                                       {.batch_size = std::size_t(o.batch_size),
                                        .num_workers = std::size_t(o.num_workers),
                                        .drop_last = true,
                                        .sampler = train_sampler});
  TestLoader test_loader = make_test_loader(test_set);

  auto net = std::make_shared<Net>(/*batch_norm=*/o.sync_bn);
  std::optional<LoadedCheckpoint> checkpoint;
  if (o.resume) {
    checkpoint = load_newest_checkpoint(o.checkpoint_dir);
    if (checkpoint->state.epoch >= o.epochs)
      throw idist::ValueError(fmt::format("--resume: {} has completed epoch {}, nothing is left of --epochs {}",
                                          checkpoint->path.string(), checkpoint->state.epoch, o.epochs));
    net->load(checkpoint->model);  // before auto_model, which broadcasts rank 0's weights
    report_differences(checkpoint->state, o);
  }
  auto model = idist::auto_model(net, {.sync_bn = o.sync_bn});
  if (o.comm_hook == "allreduce") idist::register_comm_hook(model, idist::comm_hooks::allreduce());
  if (o.comm_hook == "fp16") idist::register_comm_hook(model, idist::comm_hooks::fp16_compress());
  if (o.comm_hook == "bf16") idist::register_comm_hook(model, idist::comm_hooks::bf16_compress());
  if (o.comm_hook == "powersgd")
    idist::register_comm_hook(model, idist::comm_hooks::powersgd({.matrix_approximation_rank = o.powersgd_rank,
                                                                  .start_powersgd_iter = o.powersgd_start}));
  auto optimizer = idist::auto_optim(
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(o.momentum)));
  if (checkpoint) optimizer->load(checkpoint->optimizer);  // the momentum buffers
  const int first_epoch = checkpoint ? checkpoint->state.epoch + 1 : 1;
  const int last_epoch = o.stop_after_epoch > 0 ? std::min(o.stop_after_epoch, o.epochs) : o.epochs;
  if (last_epoch < first_epoch)
    throw idist::ValueError(fmt::format("--stop-after-epoch {}: the checkpoint has completed epoch {} already",
                                        o.stop_after_epoch, first_epoch - 1));

  const auto steps = std::int64_t(loader.size().value());
  const auto local_batch = std::int64_t(loader.options().batch_size);
  if (rank == 0) {
    if (checkpoint)
      fmt::print(stderr, "fashion_mnist: resuming from {} (epoch {} done, written by {} rank(s))\n",
                 checkpoint->path.string(), checkpoint->state.epoch, checkpoint->state.world_size);
    fmt::print(stderr,
               "fashion_mnist: {} training / {} test images, global batch {} ({} per rank x {} ranks), "
               "{} steps per epoch, {} intra-op thread(s) per rank\n",
               n_train, *test_set.size(), local_batch * world, local_batch, world, steps, torch::get_num_threads());
  }

  Progress progress(o.epochs, first_epoch, steps, local_batch * world,
                    std::chrono::milliseconds(std::int64_t(o.log_every * 1000)), rank == 0);
  double accuracy = 0.0;
  for (int epoch = first_epoch; epoch <= last_epoch; ++epoch) {
    loader.set_epoch(std::uint64_t(epoch - 1));
    model->train();
    idist::barrier();  // start the clock together
    progress.start_epoch(epoch);
    std::int64_t step = 0;
    for (auto& batch : loader) {
      const torch::Tensor data = batch.data.to(device);
      const torch::Tensor target = batch.target.to(device);
      optimizer->zero_grad();
      const torch::Tensor logits = model->forward(data);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
      loss.backward();  // auto_model has averaged the gradients over the ranks when this returns
      set_lr(*optimizer, learning_rate(o, double((epoch - 1) * steps + step) / double(o.epochs * steps)));
      optimizer->step();
      const auto [global, print] = reduce_step(step_totals(loss.detach(), logits.detach(), target), progress.due());
      progress.step(++step, global, print);
    }
    progress.end_epoch();
    accuracy = evaluate(*model, test_loader, device);
    if (rank == 0) {
      fmt::print(stderr, "epoch {}/{}: test accuracy {:.4f}\n", epoch, o.epochs, accuracy);
      if (!o.checkpoint_dir.empty())
        fmt::print(stderr, "fashion_mnist: wrote {}\n",
                   save_checkpoint(o.checkpoint_dir, state_of(o, epoch, world), *model, *optimizer).string());
    }
  }

  if (rank == 0) {
    const double seconds = progress.train_seconds();
    const Totals& last = progress.epoch_totals();
    fmt::print(
        "{{\"world_size\": {}, \"backend\": \"{}\", \"epochs\": {}, \"first_epoch\": {}, \"last_epoch\": {}, "
        "\"batch_size\": {}, \"train_images\": {}, \"threads_per_rank\": {}, \"train_seconds\": {:.3f}, "
        "\"images_per_s\": {:.1f}, \"train_loss\": {:.6f}, \"train_accuracy\": {:.6f}, \"test_accuracy\": {:.4f}, "
        "\"comm_hook\": \"{}\", \"weights_digest\": \"{}\", \"sync_bn\": {}}}\n",
        world, idist::backend().value_or("serial"), o.epochs, first_epoch, last_epoch, local_batch * world, n_train,
        torch::get_num_threads(), seconds, seconds > 0 ? double(progress.images_done()) / seconds : 0.0,
        last.mean_loss(), last.accuracy(), accuracy, o.comm_hook, weights_digest(*model), o.sync_bn);
    std::fflush(stdout);
  }
}

}  // namespace fashion_mnist

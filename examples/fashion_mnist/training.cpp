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

#include "dataset.hpp"
#include "metrics.hpp"
#include "net.hpp"
#include "optimizer.hpp"
#include "progress.hpp"
#include "resume_state.hpp"
#include "threads.hpp"
#include "timing.hpp"

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

void set_lr(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
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

// The example's checkpoint handler: model (parameters and buffers), optimizer (SGD's momentum buffers
// or Adam's moments; with --zero, Checkpoint gathers the shards on the rank that saves) and the training
// loader's position, the newest two files kept (so that a damaged newest one has a
// predecessor). A fresh run wants an empty directory; a resuming one continues in it.
template <class Loader>
std::unique_ptr<idist::Checkpoint> open_checkpoint(const Options& o, const std::shared_ptr<Net>& model,
                                                   const std::shared_ptr<torch::optim::Optimizer>& optimizer,
                                                   const Loader& loader) {
  if (o.checkpoint_dir.empty()) return nullptr;
  const bool resuming = o.resume || o.auto_resume;
  try {
    return std::make_unique<idist::Checkpoint>(
        o.checkpoint_dir,
        std::vector<idist::CheckpointItem>{{"model", model}, {"optimizer", optimizer}, {"loader", loader}},
        idist::CheckpointOptions{.n_saved = 2, .require_empty = !resuming});
  } catch (const idist::ValueError& e) {
    if (resuming || std::string(e.what()).find("require_empty") == std::string::npos) throw;
    throw idist::ValueError(
        fmt::format("--checkpoint-dir {} holds checkpoints already: pass --auto-resume to continue "
                    "from them, or choose an empty directory ({})",
                    o.checkpoint_dir, e.what()));
  }
}

}  // namespace

void train(const Options& o) {
  const int rank = idist::get_rank();
  const int world = idist::get_world_size();
  StartupTiming timing(o.print_timing, rank);
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
  auto model = idist::auto_model(net, {.sync_bn = o.sync_bn});
  if (o.comm_hook == "allreduce") idist::register_comm_hook(model, idist::comm_hooks::allreduce());
  if (o.comm_hook == "fp16") idist::register_comm_hook(model, idist::comm_hooks::fp16_compress());
  if (o.comm_hook == "bf16") idist::register_comm_hook(model, idist::comm_hooks::bf16_compress());
  if (o.comm_hook == "powersgd")
    idist::register_comm_hook(model, idist::comm_hooks::powersgd({.matrix_approximation_rank = o.powersgd_rank,
                                                                  .start_powersgd_iter = o.powersgd_start}));
  auto optimizer = idist::auto_optim(make_optimizer(o, model->parameters()));
  if (o.zero && o.zero_stage == 2 && idist::get_world_size() > 1)
    idist::register_comm_hook(model, dynamic_cast<idist::ZeroRedundancyOptimizer&>(*optimizer).reduce_scatter_hook());

  // Every rank loads the same checkpoint (rank 0 reads it and broadcasts it): weights and buffers by
  // copy into the model auto_model prepared, the optimizer state (with --zero each rank keeps its
  // shard's), the loader's position in its epoch.
  const std::unique_ptr<idist::Checkpoint> checkpoint = open_checkpoint(o, model, optimizer, loader);
  std::optional<idist::LoadedCheckpoint> loaded;
  timing.loading();
  if (checkpoint && (o.resume || o.auto_resume)) {
    loaded = checkpoint->load_latest();
    if (!loaded && o.resume)
      throw idist::ValueError(
          fmt::format("--resume: no checkpoint_<iteration>.pt in {} (on rank 0)", o.checkpoint_dir));
    if (loaded) report_differences(*loaded, o);
  }
  timing.loaded();
  const TrainingPoint start = loaded ? training_point(*loaded) : TrainingPoint{};
  const int first_epoch = start.epoch_finished() ? start.epoch + 1 : start.epoch;
  const std::int64_t first_step = first_epoch == start.epoch ? start.epoch_step : 0;
  if (first_epoch > o.epochs)
    throw idist::ValueError(fmt::format("--resume: {} has completed epoch {}, nothing is left of --epochs {}",
                                        loaded->path.string(), start.epoch, o.epochs));
  const int last_epoch = o.stop_after_epoch > 0 ? std::min(o.stop_after_epoch, o.epochs) : o.epochs;
  if (last_epoch < first_epoch)
    throw idist::ValueError(fmt::format("--stop-after-epoch {}: the checkpoint has completed epoch {} already",
                                        o.stop_after_epoch, first_epoch - 1));

  const auto steps = std::int64_t(loader.size().value());
  const auto local_batch = std::int64_t(loader.options().batch_size);
  if (rank == 0) {
    if (loaded)
      fmt::print(stderr, "fashion_mnist: resuming from {} (epoch {}, step {} of {}; written by {} rank(s))\n",
                 loaded->path.string(), start.epoch, start.epoch_step, start.epoch_steps, loaded->world_size);
    else if (o.auto_resume)
      fmt::print(stderr, "fashion_mnist: --auto-resume: no checkpoint in {}, starting fresh\n", o.checkpoint_dir);
    fmt::print(stderr,
               "fashion_mnist: {} training / {} test images, global batch {} ({} per rank x {} ranks), "
               "{} steps per epoch, {} intra-op thread(s) per rank\n",
               n_train, *test_set.size(), local_batch * world, local_batch, world, steps, torch::get_num_threads());
  }
  const auto save = [&](const TrainingPoint& point, std::int64_t iteration) {
    checkpoint->save(checkpoint_state(o, point, iteration));
  };

  Progress progress(o.epochs, first_epoch, steps, local_batch * world,
                    std::chrono::milliseconds(std::int64_t(o.log_every * 1000)), rank == 0);
  double accuracy = start.test_accuracy;
  std::int64_t stopped_at = 0;
  for (int epoch = first_epoch; epoch <= last_epoch && stopped_at == 0; ++epoch) {
    loader.set_epoch(std::uint64_t(epoch - 1));  // in the resumed epoch, keeps the loader's restored position
    model->train();
    idist::barrier();  // start the clock together
    std::int64_t step = epoch == first_epoch ? first_step : 0;
    if (step > 0)
      progress.resume_epoch(epoch, step, start.epoch_totals);
    else
      progress.start_epoch(epoch);
    for (auto& batch : loader) {
      const torch::Tensor data = batch.data.to(device);
      const torch::Tensor target = batch.target.to(device);
      optimizer->zero_grad();
      const torch::Tensor logits = model->forward(data);
      const torch::Tensor loss = torch::nn::functional::cross_entropy(logits, target);
      loss.backward();  // auto_model has averaged the gradients over the ranks when this returns
      set_lr(*optimizer, learning_rate(o, double((epoch - 1) * steps + step) / double(o.epochs * steps)));
      optimizer->step();
      progress.step(++step, step_totals(loss.detach(), logits.detach(), target));
      timing.step_done();
      const std::int64_t iteration = (epoch - 1) * steps + step;
      // Mid-epoch checkpoints; the epoch's last step is saved after its evaluation below.
      if (checkpoint && o.checkpoint_every_steps > 0 && iteration % o.checkpoint_every_steps == 0 && step < steps) {
        progress.sync(step);  // the epoch's totals so far, over all ranks
        save({.epoch = epoch, .epoch_step = step, .epoch_steps = steps, .epoch_totals = progress.epoch_totals()},
             iteration);
      }
      if (o.stop_after_steps > 0 && iteration >= o.stop_after_steps) {
        progress.sync(step);
        stopped_at = iteration;
        break;
      }
    }
    if (stopped_at > 0) break;
    progress.end_epoch();
    accuracy = evaluate(*model, test_loader, device);
    if (rank == 0) fmt::print(stderr, "epoch {}/{}: test accuracy {:.4f}\n", epoch, o.epochs, accuracy);
    if (checkpoint)
      save({.epoch = epoch,
            .epoch_step = step,
            .epoch_steps = steps,
            .epoch_totals = progress.epoch_totals(),
            .test_accuracy = accuracy},
           std::int64_t(epoch) * steps);
  }
  if (checkpoint) {
    checkpoint->wait();  // the last checkpoint is on disk (a failed write is raised here, on every rank)
    if (rank == 0 && checkpoint->last_checkpoint())
      fmt::print(stderr, "fashion_mnist: last checkpoint {}\n", checkpoint->last_checkpoint()->string());
  }
  const std::string digest = agreed_weights_digest(*model);

  if (rank == 0) {
    const double seconds = progress.train_seconds();
    const Totals& last = progress.epoch_totals();
    fmt::print(
        "{{\"world_size\": {}, \"backend\": \"{}\", \"epochs\": {}, \"first_epoch\": {}, \"last_epoch\": {}, "
        "\"batch_size\": {}, \"train_images\": {}, \"threads_per_rank\": {}, \"train_seconds\": {:.3f}, "
        "\"images_per_s\": {:.1f}, \"train_loss\": {:.6f}, \"train_accuracy\": {:.6f}, \"test_accuracy\": {:.4f}, "
        "\"comm_hook\": \"{}\", \"weights_digest\": \"{}\", \"sync_bn\": {}, \"resumed_iteration\": {}, "
        "\"stopped_at_iteration\": {}}}\n",
        world, idist::backend().value_or("serial"), o.epochs, first_epoch, last_epoch, local_batch * world, n_train,
        torch::get_num_threads(), seconds, seconds > 0 ? double(progress.images_done()) / seconds : 0.0,
        last.mean_loss(), last.accuracy(), accuracy, o.comm_hook, digest, o.sync_bn, loaded ? loaded->iteration : 0,
        stopped_at);
    std::fflush(stdout);
  }
}

}  // namespace fashion_mnist

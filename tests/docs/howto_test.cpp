// The how-tos of docs/how-to.md, compiled and run: each region between `// [snippet:<name>]` and
// `// [end]` is embedded verbatim in the guide (tests/docs/snippet_check.sh compares them), and each
// test asserts what the how-to promises. Run serially and at 2 ranks (gloo, mpi).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <unistd.h>

#include "idist/idist.hpp"

namespace {

// y = x . (1, -2, 3, 0.5) + 1, 64 examples: divisible by 2 ranks, so no rank gets padding.
struct Regression : torch::data::datasets::Dataset<Regression> {
  Regression() {
    torch::manual_seed(7);
    x = torch::randn({64, 4});
    y = x.matmul(torch::tensor({1.0F, -2.0F, 3.0F, 0.5F})).unsqueeze(1) + 1.0F;
  }
  torch::data::Example<> get(std::size_t i) override {
    const auto row = static_cast<std::int64_t>(i);
    return {x[row], y[row]};
  }
  torch::optional<std::size_t> size() const override { return static_cast<std::size_t>(x.size(0)); }
  torch::Tensor x, y;
};

auto make_dataset() { return Regression().map(torch::data::transforms::Stack<>()); }

// Largest difference of a model's parameters between the ranks (0 when they agree).
double spread_across_ranks(const torch::nn::Module& model) {
  double spread = 0;
  for (const auto& p : model.parameters()) {
    const torch::Tensor hi = idist::all_reduce(p.detach().clone(), "MAX");
    const torch::Tensor lo = idist::all_reduce(p.detach().clone(), "MIN");
    spread = std::max(spread, (hi - lo).abs().max().item<double>());
  }
  return spread;
}

std::shared_ptr<torch::nn::LinearImpl> seeded_model() {
  torch::manual_seed(100 + idist::get_rank());  // different on each rank: auto_model makes them equal
  return std::make_shared<torch::nn::LinearImpl>(4, 1);
}

TEST(HowTo, BatchesOnTheDevice) {
  auto dataset = make_dataset();
  // [snippet:batches-on-device]
  const torch::Device device = idist::device();    // cuda:<local rank> where a GPU is visible, else the CPU
  auto model = idist::auto_model(seeded_model());  // moved to device, rank 0's weights everywhere
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), 0.05);
  auto loader = idist::auto_dataloader(dataset, {.batch_size = 16, .shuffle = true});
  for (int epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);  // a new shuffle per epoch, the same on every rank
    for (auto& batch : loader) {
      const torch::Tensor x = batch.data.to(device);  // the loader yields CPU tensors
      const torch::Tensor y = batch.target.to(device);
      optimizer->zero_grad();
      torch::mse_loss(model->forward(x), y).backward();  // gradients averaged across ranks here
      optimizer->step();
    }
  }
  // [end]
  EXPECT_EQ(model->weight.device(), device);
  EXPECT_EQ(spread_across_ranks(*model), 0.0);
}

TEST(HowTo, GradientAccumulationWithNoSync) {
  auto dataset = make_dataset();
  const torch::Device device = idist::device();
  auto model = idist::auto_model(seeded_model());
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), 0.05);
  auto loader = idist::auto_dataloader(dataset, {.batch_size = 8});
  const torch::Tensor before = model->weight.detach().clone();
  int updates = 0;
  // [snippet:gradient-accumulation]
  const int accumulation_steps = 2;  // one optimizer step per 2 micro-batches
  int micro_batch = 0;
  for (auto& batch : loader) {
    const torch::Tensor x = batch.data.to(device);
    const torch::Tensor y = batch.target.to(device);
    // Divided so that the accumulated gradient is the mean over the micro-batches.
    const torch::Tensor loss = torch::mse_loss(model->forward(x), y) / accumulation_steps;
    if (++micro_batch % accumulation_steps != 0) {
      auto guard = idist::no_sync(model);  // backward accumulates locally, communicates nothing
      loss.backward();
    } else {
      loss.backward();  // averages the accumulated gradients across ranks
      optimizer->step();
      optimizer->zero_grad();
      ++updates;
    }
  }
  // [end]
  EXPECT_EQ(micro_batch, 64 / 8);  // the batch size is global: each rank loads 8 / world size
  EXPECT_EQ(updates, micro_batch / 2);
  EXPECT_GT((model->weight.detach() - before).abs().max().item<double>(), 0.0);
  EXPECT_EQ(spread_across_ranks(*model), 0.0);  // the ranks took the same steps
}

TEST(HowTo, EvaluationOnEveryRankWithAnAveragedMetric) {
  auto dataset = make_dataset();
  const torch::Device device = idist::device();
  auto model = idist::auto_model(seeded_model());
  auto eval_loader = idist::auto_dataloader(dataset, {.batch_size = 16});
  // [snippet:evaluation]
  torch::NoGradGuard no_grad;
  model->eval();
  double loss_sum = 0;
  std::int64_t count = 0;
  for (auto& batch : eval_loader) {  // this rank's shard of the evaluation set
    const torch::Tensor x = batch.data.to(device);
    const torch::Tensor y = batch.target.to(device);
    loss_sum += torch::mse_loss(model->forward(x), y, torch::Reduction::Sum).item<double>();
    count += x.size(0);
  }
  loss_sum = idist::all_reduce(loss_sum);  // sums over the ranks
  count = idist::all_reduce(count);
  const double mean_loss = loss_sum / static_cast<double>(count);  // the same on every rank
  // [end]
  EXPECT_EQ(count, 64);
  // The same metric computed on the whole set in one piece.
  const Regression whole_set;
  const double whole = torch::mse_loss(model->forward(whole_set.x.to(device)), whole_set.y.to(device)).item<double>();
  EXPECT_NEAR(mean_loss, whole, 1e-5 * std::max(1.0, whole));
  EXPECT_EQ(idist::all_reduce(mean_loss, "MAX"), idist::all_reduce(mean_loss, "MIN"));
}

TEST(HowTo, SavingOnRankZeroOnly) {
  // Every rank must name the same directory: rank 0 chooses it.
  const std::filesystem::path dir =
      idist::broadcast(std::filesystem::temp_directory_path() / ("idist_howto_" + std::to_string(::getpid())), 0);
  if (idist::get_rank() == 0) std::filesystem::remove_all(dir);
  idist::barrier();
  auto model = idist::auto_model(seeded_model());
  auto optimizer = std::make_shared<torch::optim::SGD>(model->parameters(), 0.05);
  const double mean_loss = 0.25;
  // [snippet:save-on-rank-0]
  // idist::Checkpoint: every rank calls save() (it may communicate); rank 0 alone writes.
  idist::Checkpoint checkpoint(dir, {{"model", model}, {"optimizer", optimizer}},
                               {.n_saved = 2, .require_empty = false});
  checkpoint.save({.epoch = 1, .iteration = 100, .values = {{"loss", mean_loss}}});
  // A file of the program's own: one_rank_only runs the function on rank 0 only.
  auto write_metrics =
      idist::one_rank_only([&](double loss) { std::ofstream(dir / "metrics.txt") << loss << '\n'; }, /*rank=*/0,
                           /*with_barrier=*/true);  // the others wait until the file is written
  write_metrics(mean_loss);
  // [end]
  EXPECT_TRUE(std::filesystem::exists(dir / "metrics.txt"));  // every rank sees it after the barrier
  int files = 0;
  checkpoint.wait();  // the file is written in the background
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.path().extension() == ".pt";
  EXPECT_EQ(files, 1);
  auto loaded = checkpoint.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->iteration, 100U);
  EXPECT_EQ(loaded->value<double>("loss"), mean_loss);
  idist::barrier();
  if (idist::get_rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace

// A checkpoint saved at one world size and loaded at others (run_checkpoint_world.cmake runs the
// phases: save at 2 ranks, load at 1, load at 3). IDIST_CKPT_PHASE is "save" or "load";
// IDIST_CKPT_DIR is rank 0's directory: every other rank is given a directory that does not exist,
// as on nodes that do not share rank 0's file system.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "index_loader.hpp"
#include "test_device.hpp"

namespace {

constexpr std::int64_t kDataset = 101;    // not a multiple of any world size used
constexpr std::size_t kGlobalBatch = 10;  // 5 per rank at 2 ranks
constexpr std::uint64_t kEpoch = 1;
constexpr std::size_t kBatchesRead = 3;  // 30 samples of all ranks together at 2 ranks

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::filesystem::path directory() {
  return idist::get_rank() == 0 ? std::filesystem::path(env("IDIST_CKPT_DIR")) : "/nonexistent/idist-ckpt-world";
}

auto index_dataset() { return idist::test::index_dataset(kDataset); }

// A module of type M on test_device().
template <class M, class... Args>
std::shared_ptr<M> on_device(Args... args) {
  auto m = std::make_shared<M>(args...);
  m->to(idist::test::test_device());
  return m;
}

struct Objects {
  std::shared_ptr<torch::nn::LinearImpl> model = on_device<torch::nn::LinearImpl>(4, 3);
  std::shared_ptr<torch::nn::BatchNorm1dImpl> norm = on_device<torch::nn::BatchNorm1dImpl>(3);
  std::shared_ptr<torch::optim::SGD> optimizer =
      std::make_shared<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  idist::DataLoader<decltype(index_dataset())> loader = idist::auto_dataloader(
      index_dataset(),
      {.batch_size = kGlobalBatch, .sampler = std::make_shared<idist::DistributedSampler>(std::size_t(kDataset))});
  idist::Checkpoint checkpoint{directory(),
                               {{"model", model}, {"norm", norm}, {"optimizer", optimizer}, {"loader", loader}},
                               {.require_empty = false}};
};

TEST(CheckpointAcrossWorldSizes, Phase) {
  const std::string phase = env("IDIST_CKPT_PHASE");
  ASSERT_TRUE(phase == "save" || phase == "load") << "IDIST_CKPT_PHASE=" << phase;
  Objects o;
  const int rank = idist::get_rank(), world = idist::get_world_size();
  if (phase == "save") {
    ASSERT_EQ(world, 2);
    torch::NoGradGuard no_grad;
    o.model->weight.mutable_grad() = torch::ones({3, 4}, idist::test::on_test_device());
    o.model->bias.mutable_grad() = torch::full({3}, 2.0F, idist::test::on_test_device());
    o.optimizer->step();  // momentum buffers = the gradients
    o.model->weight.copy_(torch::arange(12, torch::kFloat).reshape({3, 4}) * 0.5);
    o.model->bias.copy_(torch::tensor({1.0F, 2.0F, 3.0F}));
    o.norm->running_mean.fill_(0.25);
    o.loader.set_epoch(kEpoch);
    idist::test::read_indices(o.loader, kBatchesRead);
    torch::manual_seed(100 + rank);
    o.checkpoint.save({.epoch = kEpoch, .iteration = 42, .values = {{"note", std::string("saved at 2")}}});
    o.checkpoint.wait();
    return;
  }
  torch::manual_seed(999);
  const auto loaded = o.checkpoint.load_latest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->world_size, 2);
  EXPECT_EQ(loaded->iteration, 42u);
  EXPECT_EQ(loaded->value<std::string>("note"), "saved at 2");
  // Rank r < 2 continues rank r's generator; others keep their own.
  const auto restored = torch::rand({3});
  torch::manual_seed(rank < 2 ? 100 + rank : 999);
  EXPECT_TRUE(torch::equal(restored, torch::rand({3}))) << "rank " << rank << "'s generator";
  EXPECT_TRUE(torch::allclose(o.model->weight.cpu(), torch::arange(12, torch::kFloat).reshape({3, 4}) * 0.5));
  EXPECT_TRUE(torch::allclose(o.model->bias.cpu(), torch::tensor({1.0F, 2.0F, 3.0F})));
  EXPECT_TRUE(torch::allclose(o.norm->running_mean.cpu(), torch::full({3}, 0.25F)));
  int buffers = 0;
  for (const auto& [key, state] : o.optimizer->state()) {
    const auto& buf = static_cast<const torch::optim::SGDParamState&>(*state).momentum_buffer();
    EXPECT_EQ(buf.device(), idist::test::test_device());  // on its parameter's device
    EXPECT_TRUE(buf.dim() == 2 ? torch::equal(buf.cpu(), torch::ones({3, 4}))
                               : torch::equal(buf.cpu(), torch::full({3}, 2.0F)));
    ++buffers;
  }
  EXPECT_EQ(buffers, 2);
  // The epoch continues floor(30 / W) * W samples in: rank r's indices from position 30 / W on.
  idist::DistributedSampler truth(std::size_t(kDataset), world, rank, /*shuffle=*/true);
  truth.set_epoch(kEpoch);
  const auto all = truth.indices();
  const std::size_t skip = kBatchesRead * (kGlobalBatch / 2) * 2 / std::size_t(world);
  o.loader.set_epoch(kEpoch);
  const auto rest = idist::test::read_indices(o.loader);
  ASSERT_EQ(rest.size(), all.size() - skip);
  for (std::size_t j = 0; j < rest.size(); ++j) EXPECT_EQ(std::size_t(rest[j]), all[skip + j]) << "rank " << rank;
}

}  // namespace

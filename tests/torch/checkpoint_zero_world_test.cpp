// A ZeroRedundancyOptimizer under auto_model checkpointed by idist::Checkpoint at one world size and
// resumed at others (run_checkpoint_world.cmake runs the phases: save at 2 ranks, load at 1, load at
// 3), with the file written by rank 0 and by the last rank: the resumed run continues the trajectory
// of unsharded Adam over the whole batch. IDIST_CKPT_PHASE is "save" or "load"; IDIST_CKPT_DIR holds
// the saving rank's directories; every other rank is given a directory that does not exist.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "test_device.hpp"
#include "zero_test_support.hpp"

namespace {

using idist::test::zero::adam;
using idist::test::zero::make_mlp;
using idist::test::zero::max_diff;
using idist::test::zero::Mlp;

constexpr int kSteps = 12;           // the whole run
constexpr int kSaved = 6;            // steps done when the checkpoint is written
constexpr std::int64_t kRows = 12;   // global batch: 12 / W rows per rank at W = 1, 2, 3
constexpr double kTolerance = 1e-9;  // float64; a resume without the Adam state is off by ~1e-3

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

struct Data {
  torch::Tensor x, y;  // [kSteps, kRows, 6], [kSteps, kRows, 3]
};
Data make_data() {
  torch::manual_seed(11);
  return {torch::randn({kSteps, kRows, 6}, torch::kFloat64).to(idist::test::test_device()),
          torch::randn({kSteps, kRows, 3}, torch::kFloat64).to(idist::test::test_device())};
}

// Step s on this rank's rows of the global batch (all of it when `whole`).
void step(Mlp& model, torch::optim::Optimizer& opt, const Data& d, int s, bool whole = false) {
  const std::int64_t per_rank = whole ? kRows : kRows / idist::get_world_size();
  const std::int64_t lo = whole ? 0 : per_rank * idist::get_rank();
  opt.zero_grad();
  torch::mse_loss(model.forward(d.x[s].slice(0, lo, lo + per_rank)), d.y[s].slice(0, lo, lo + per_rank)).backward();
  opt.step();
}

// Unsharded Adam over the whole batch, in this process alone: the trajectory to continue.
std::shared_ptr<Mlp> reference(const Data& d, int steps) {
  auto model = make_mlp(3);
  auto opt = adam(model->parameters());
  for (int s = 0; s < steps; ++s) step(*model, *opt, d, s, /*whole=*/true);
  return model;
}

// The checkpoint written by rank 0 ("first") or by the last rank ("last"), in its own directory.
struct Saver {
  const char* name;
  int rank() const { return std::string(name) == "first" ? 0 : idist::get_world_size() - 1; }
  std::filesystem::path directory() const {
    return idist::get_rank() == rank() ? std::filesystem::path(env("IDIST_CKPT_DIR")) / (std::string("zero_") + name)
                                       : std::filesystem::path("/nonexistent/idist-ckpt-zero");
  }
};
constexpr Saver kSavers[] = {{"first"}, {"last"}};

}  // namespace

TEST(ZeroCheckpointAcrossWorldSizes, Phase) {
  const std::string phase = env("IDIST_CKPT_PHASE");
  ASSERT_TRUE(phase == "save" || phase == "load") << "IDIST_CKPT_PHASE=" << phase;
  const int world = idist::get_world_size(), rank = idist::get_rank();
  const Data d = make_data();
  if (phase == "save") {
    ASSERT_EQ(world, 2);
    auto model = idist::auto_model(make_mlp(3));
    auto zero = std::make_shared<idist::ZeroRedundancyOptimizer>(model->parameters(), adam);
    for (int s = 0; s < kSaved; ++s) step(*model, *zero, d, s);
    ASSERT_LE(max_diff(*model, *reference(d, kSaved)), kTolerance);
    for (const Saver& saver : kSavers) {
      idist::Checkpoint ckpt(saver.directory(), {{"model", model}, {"optimizer", zero}},
                             {.require_empty = false, .save_on_rank = saver.rank()});
      ckpt.save({.epoch = 1, .iteration = kSaved});
      ckpt.wait();
    }
    return;
  }
  const auto expected = reference(d, kSteps);
  for (const Saver& saver : kSavers) {
    SCOPED_TRACE(std::string("written by the ") + saver.name + " rank, resumed at " + std::to_string(world));
    auto model = idist::auto_model(make_mlp(99));  // other weights: the checkpoint must set them
    auto zero = std::make_shared<idist::ZeroRedundancyOptimizer>(model->parameters(), adam);
    idist::Checkpoint ckpt(saver.directory(), {{"model", model}, {"optimizer", zero}},
                           {.require_empty = false, .save_on_rank = saver.rank()});
    const auto loaded = ckpt.load_latest();
    ASSERT_TRUE(loaded.has_value());
    EXPECT_EQ(loaded->world_size, 2);
    EXPECT_EQ(loaded->iteration, std::uint64_t(kSaved));
    for (int s = kSaved; s < kSteps; ++s) step(*model, *zero, d, s);
    EXPECT_LE(max_diff(*model, *expected), kTolerance) << "rank " << rank;
    // This rank's shard continued the saved moments and step counts.
    const auto& local = zero->local_optimizer();
    EXPECT_EQ(local.state().size(), local.param_groups()[0].params().size());
    for (const auto& [key, state] : local.state())
      EXPECT_EQ(static_cast<const torch::optim::AdamParamState&>(*state).step(), kSteps);
  }
  // The file holds the whole state in a plain optimizer's layout: unsharded Adam resumes from it too.
  auto model = make_mlp(99);
  auto plain = std::shared_ptr<torch::optim::Optimizer>(adam(model->parameters()));
  idist::Checkpoint ckpt(kSavers[1].directory(), {{"model", model}, {"optimizer", plain}},
                         {.require_empty = false, .save_on_rank = kSavers[1].rank()});
  ASSERT_TRUE(ckpt.load_latest().has_value());
  for (int s = kSaved; s < kSteps; ++s) step(*model, *plain, d, s, /*whole=*/true);
  EXPECT_LE(max_diff(*model, *expected), kTolerance);
}

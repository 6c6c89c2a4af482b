// ZeroRedundancyOptimizer registered with idist::Checkpoint at this world size: the state is gathered
// on the saving rank whichever rank that is (0, the last, a member of a subgroup), the resumed run
// continues unsharded Adam's trajectory, and a saving rank outside the optimizer's group is an error
// on every rank. Each rank passes a directory of its own, which only the saving rank's writes into.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "support/temp_dir.hpp"
#include "test_device.hpp"
#include "zero_test_support.hpp"

namespace {

using idist::test::TempDir;

using idist::test::zero::adam;
using idist::test::zero::make_mlp;
using idist::test::zero::max_diff;
using idist::test::zero::Mlp;

namespace fs = std::filesystem;

int rank() { return idist::get_rank(); }
int ws() { return idist::get_world_size(); }

constexpr int kSteps = 12;
constexpr int kSaved = 6;

// The same batches on every rank and no gradient averaging: a group of any size trains like one
// process, so the trajectories match to rounding.
struct Data {
  torch::Tensor x, y;
};
Data make_data() {
  torch::manual_seed(11);
  return {torch::randn({kSteps, 8, 6}, torch::kFloat64).to(idist::test::test_device()),
          torch::randn({kSteps, 8, 3}, torch::kFloat64).to(idist::test::test_device())};
}

void train(Mlp& model, torch::optim::Optimizer& opt, const Data& d, int from, int to) {
  for (int s = from; s < to; ++s) {
    opt.zero_grad();
    torch::mse_loss(model.forward(d.x[s]), d.y[s]).backward();
    opt.step();
  }
}

std::shared_ptr<Mlp> reference(const Data& d) {
  auto model = make_mlp(3);
  auto opt = adam(model->parameters());
  train(*model, *opt, d, 0, kSteps);
  return model;
}

bool member(const idist::Group& g) {
  return g.is_world() || std::find(g.ranks().begin(), g.ranks().end(), rank()) != g.ranks().end();
}

// Trains kSaved steps with ZeRO over `group` (members) and saves through a Checkpoint written by
// `saver`; then fresh objects load it and train on to kSteps. Non-members checkpoint the model only.
// Returns the model every rank ends with.
std::shared_ptr<Mlp> save_and_resume(const idist::Group& group, int saver, const Data& d) {
  TempDir dir("idist-zero-ckpt");
  auto items = [&](const std::shared_ptr<Mlp>& model, const std::shared_ptr<idist::ZeroRedundancyOptimizer>& zero) {
    std::vector<idist::CheckpointItem> out{{"model", model}};
    if (zero) out.emplace_back("optimizer", zero);
    return out;
  };
  {
    auto model = make_mlp(3);
    std::shared_ptr<idist::ZeroRedundancyOptimizer> zero;
    if (member(group)) {
      zero = std::make_shared<idist::ZeroRedundancyOptimizer>(model->parameters(), adam,
                                                              idist::ZeroRedundancyOptimizerOptions{.group = group});
      train(*model, *zero, d, 0, kSaved);
    }
    idist::Checkpoint ckpt(dir.path(), items(model, zero), {.filename_prefix = "zero", .save_on_rank = saver});
    ckpt.save({.iteration = kSaved});
    ckpt.wait();
  }
  EXPECT_EQ(dir.empty(), rank() != saver) << "rank " << rank() << ", saving rank " << saver;
  auto model = make_mlp(99);
  std::shared_ptr<idist::ZeroRedundancyOptimizer> zero;
  if (member(group))
    zero = std::make_shared<idist::ZeroRedundancyOptimizer>(model->parameters(), adam,
                                                            idist::ZeroRedundancyOptimizerOptions{.group = group});
  idist::Checkpoint ckpt(dir.path(), items(model, zero),
                         {.filename_prefix = "zero", .require_empty = false, .save_on_rank = saver});
  const auto loaded = ckpt.load_latest();
  EXPECT_TRUE(loaded.has_value());
  if (zero) train(*model, *zero, d, kSaved, kSteps);
  return model;
}

}  // namespace

TEST(ZeroWithCheckpoint, GathersTheStateOnTheSavingRankAndResumes) {
  const Data d = make_data();
  const auto expected = reference(d);
  for (const int saver : {0, ws() - 1}) {
    const auto model = save_and_resume({}, saver, d);
    EXPECT_LE(max_diff(*model, *expected), 1e-12) << "saved on rank " << saver << " of " << ws();
  }
}

TEST(ZeroWithCheckpoint, OverASubgroupThatHoldsTheSavingRank) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<int> ranks(std::size_t(ws() - 1));
  std::iota(ranks.begin(), ranks.end(), 1);  // all but rank 0; the last saves (group rank ws - 2)
  const idist::Group group = idist::new_group(ranks);
  const Data d = make_data();
  const auto expected = reference(d);
  const auto model = save_and_resume(group, ws() - 1, d);
  if (member(group)) {
    EXPECT_LE(max_diff(*model, *expected), 1e-12) << "rank " << rank();
  }
}

TEST(ZeroWithCheckpoint, ASavingRankOutsideTheGroupIsAnErrorOnEveryRank) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const idist::Group group = idist::new_group({0});
  TempDir dir("idist-zero-ckpt");
  auto model = make_mlp(3);
  std::vector<idist::CheckpointItem> items{{"model", model}};
  if (rank() == 0)
    items.emplace_back("optimizer",
                       std::make_shared<idist::ZeroRedundancyOptimizer>(
                           model->parameters(), adam, idist::ZeroRedundancyOptimizerOptions{.group = group}));
  idist::Checkpoint ckpt(dir.path(), items, {.filename_prefix = "zero", .save_on_rank = ws() - 1});
  try {
    ckpt.save({.iteration = 1});
    ADD_FAILURE() << "no error on rank " << rank();
  } catch (const idist::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0: item 'optimizer' failed to save"), std::string::npos) << what;
    EXPECT_NE(what.find("is not a member of the ZeroRedundancyOptimizer's group [0]"), std::string::npos) << what;
  }
  ckpt.wait();
  EXPECT_TRUE(dir.empty());
}

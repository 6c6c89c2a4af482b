// auto_model's bucket cap tuning: with bucket_cap_mb unset, the first synchronised iterations try
// several caps, every rank keeps the same one, rank 0 logs it once, and the averaged gradients are
// those of a fixed cap; an explicit cap (or IDIST_BUCKET_AUTOTUNE=0) means no tuning.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "test_device.hpp"
#include "torch/reducer.hpp"  // internal: idist_torch

namespace {

// Eight 512 x 512 layers (1 MiB of float gradients each): caps of 1, 2, 5 and 25 MiB bucket them
// differently.
struct Wide : torch::nn::Module {
  Wide() {
    for (int i = 0; i < 8; ++i)
      layers.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(512, 512)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : layers) x = torch::tanh(l(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};

std::shared_ptr<Wide> make_wide() {
  torch::manual_seed(3);
  return std::make_shared<Wide>();
}

void train_step(Wide& net, torch::optim::SGD& opt, int step) {
  torch::manual_seed(900 + 17 * idist::get_rank() + step);
  opt.zero_grad();
  net.forward(torch::randn({4, 512}).to(idist::test::test_device())).square().mean().backward();
  opt.step();
}

// Collects idist's log lines about the gradient buckets while alive.
class BucketLog {
 public:
  BucketLog() {
    idist::set_log_sink([this](idist::LogLevel, std::string_view, std::string_view message) {
      std::lock_guard lock(mutex_);
      if (message.find("gradient buckets") != std::string_view::npos) lines_.emplace_back(message);
    });
  }
  ~BucketLog() { idist::set_log_sink(nullptr); }
  std::vector<std::string> lines() {
    std::lock_guard lock(mutex_);
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

TEST(BucketAutotune, TriesCapsThenEveryRankKeepsTheSameAndRank0LogsItOnce) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no reducer when serial)";
  BucketLog log;
  auto net = idist::auto_model(make_wide());
  auto reducer = idist::detail::reducer_of(net);
  ASSERT_TRUE(reducer);
  ASSERT_TRUE(reducer->tuning_bucket_cap());
  EXPECT_EQ(reducer->bucket_cap_mb(), 25.0);  // DDP's default first
  // The same model with DDP's default cap, trained on the same batches.
  auto fixed = idist::auto_model(make_wide(), {.bucket_cap_mb = 25.0});
  EXPECT_FALSE(idist::detail::reducer_of(fixed)->tuning_bucket_cap());
  torch::optim::SGD opt(net->parameters(), 0.01), opt_fixed(fixed->parameters(), 0.01);

  std::set<double> tried;
  std::set<std::size_t> bucket_counts;
  int step = 0;
  for (; step < 100 && reducer->tuning_bucket_cap(); ++step) {
    tried.insert(reducer->bucket_cap_mb());
    bucket_counts.insert(reducer->buckets().size());
    train_step(*net, opt, step);
    train_step(*fixed, opt_fixed, step);
  }
  ASSERT_FALSE(reducer->tuning_bucket_cap()) << "still tuning after " << step << " iterations";
  EXPECT_GE(tried.size(), 3u);
  EXPECT_GE(bucket_counts.size(), 3u);  // each trial has buckets of its own
  EXPECT_LE(step, 6 * 5 + 1);
  const double cap = reducer->bucket_cap_mb();
  EXPECT_TRUE(tried.count(cap)) << cap;
  EXPECT_EQ(idist::all_reduce(cap, idist::ReduceOp::Max), cap);
  EXPECT_EQ(idist::all_reduce(cap, idist::ReduceOp::Min), cap);
  const auto buckets = double(reducer->buckets().size());
  EXPECT_EQ(idist::all_reduce(buckets, idist::ReduceOp::Max), buckets);
  // The choice stays.
  for (int k = 0; k < 3; ++k, ++step) {
    train_step(*net, opt, step);
    train_step(*fixed, opt_fixed, step);
  }
  EXPECT_EQ(reducer->bucket_cap_mb(), cap);
  EXPECT_FALSE(reducer->tuning_bucket_cap());
  // Bucketing does not change the averaged values (with two ranks each element is a + b exactly).
  const auto a = net->parameters(), b = fixed->parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (idist::get_world_size() == 2)
      EXPECT_TRUE(torch::equal(a[i], b[i])) << "parameter " << i;
    else
      EXPECT_TRUE(torch::allclose(a[i], b[i], 1e-5, 1e-6)) << "parameter " << i;
  }
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), idist::get_rank() == 0 ? 1u : 0u);
  if (!lines.empty()) {
    EXPECT_NE(lines[0].find("bucket_cap_mb="), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("tuned"), std::string::npos) << lines[0];
  }
}

TEST(BucketAutotune, AnExplicitCapOrTheEnvironmentTurnsItOff) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no reducer when serial)";
  BucketLog log;
  auto net = idist::auto_model(make_wide(), {.bucket_cap_mb = 5.0});
  auto reducer = idist::detail::reducer_of(net);
  ASSERT_TRUE(reducer);
  EXPECT_FALSE(reducer->tuning_bucket_cap());
  torch::optim::SGD opt(net->parameters(), 0.01);
  for (int step = 0; step < 8; ++step) train_step(*net, opt, step);
  EXPECT_EQ(reducer->bucket_cap_mb(), 5.0);

  ASSERT_EQ(setenv("IDIST_BUCKET_AUTOTUNE", "0", 1), 0);
  auto untuned = idist::auto_model(make_wide());
  unsetenv("IDIST_BUCKET_AUTOTUNE");
  EXPECT_FALSE(idist::detail::reducer_of(untuned)->tuning_bucket_cap());
  EXPECT_EQ(idist::detail::reducer_of(untuned)->bucket_cap_mb(), 25.0);
  EXPECT_TRUE(log.lines().empty());
}

TEST(BucketAutotune, AHookWithPerBucketStateStopsItAtTheDefault) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no reducer when serial)";
  auto fp16 = idist::auto_model(make_wide());
  idist::register_comm_hook(fp16, idist::comm_hooks::fp16_compress());  // element-wise: tuning goes on
  EXPECT_TRUE(idist::detail::reducer_of(fp16)->tuning_bucket_cap());
  auto powersgd = idist::auto_model(make_wide());
  idist::register_comm_hook(powersgd, idist::comm_hooks::powersgd({}));
  EXPECT_FALSE(idist::detail::reducer_of(powersgd)->tuning_bucket_cap());
  EXPECT_EQ(idist::detail::reducer_of(powersgd)->bucket_cap_mb(), 25.0);
}

}  // namespace

// auto_model / auto_optim / no_sync: the DDP equivalence of issue 2 (each rank trains on its share
// of every batch and ends with the parameters of one process training on the whole batches), with
// one and with several buckets; no_sync accumulation; unused parameters; buffers; models
// that differ between ranks. Multi-rank cases skip when serial.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "idist/idist.hpp"
#include "test_device.hpp"
#include "torch/reducer.hpp"  // internal: idist_torch

namespace {

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

// Many small parameter tensors, so that small bucket caps make several buckets.
struct Mlp : torch::nn::Module {
  explicit Mlp(int hidden = 16, int depth = 4) {
    int in = 6;
    for (int i = 0; i < depth; ++i) {
      const int out = i + 1 == depth ? 3 : hidden;
      layers.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(in, out)));
      in = out;
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (std::size_t i = 0; i + 1 < layers.size(); ++i) x = torch::tanh(layers[i](x));
    return layers.back()(x);
  }
  std::vector<torch::nn::Linear> layers;
};

struct TwoHeads : torch::nn::Module {
  TwoHeads() {
    a = register_module("a", torch::nn::Linear(4, 3));
    b = register_module("b", torch::nn::Linear(4, 3));
  }
  torch::nn::Linear a{nullptr}, b{nullptr};
};

// Trains `model` for X.size(0) SGD steps on rows [lo, hi) of each batch (MSE, mean over the rows).
void train(torch::nn::Module& model, const std::function<torch::Tensor(torch::Tensor)>& fwd, const torch::Tensor& X,
           const torch::Tensor& Y, std::int64_t lo, std::int64_t hi) {
  torch::optim::SGD sgd(model.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto& opt = idist::auto_optim(sgd);
  for (std::int64_t s = 0; s < X.size(0); ++s) {
    opt.zero_grad();
    auto loss = torch::mse_loss(fwd(X[s].slice(0, lo, hi)), Y[s].slice(0, lo, hi));
    loss.backward();
    opt.step();
  }
}

// Largest |a - b| over all parameters.
double max_diff(const torch::nn::Module& a, const torch::nn::Module& b) {
  double d = 0;
  auto p = a.parameters();
  auto q = b.parameters();
  for (std::size_t i = 0; i < p.size(); ++i) d = std::max(d, (p[i] - q[i]).abs().max().item<double>());
  return d;
}

// True when every parameter is bitwise equal to rank 0's.
bool same_as_rank0(const torch::nn::Module& m) {
  bool same = true;
  for (const auto& p : m.parameters()) {
    const bool equal = idist::broadcast(p.detach().clone(), 0).equal(p);  // every rank broadcasts every tensor
    same = same && equal;
  }
  return idist::all_reduce(int(same), idist::ReduceOp::Min) == 1;
}

TEST(AutoModel, ReturnsTheSameModelOnTheDevice) {
  auto net = std::make_shared<Mlp>();
  auto out = idist::auto_model(net);
  static_assert(std::is_same_v<decltype(out), std::shared_ptr<Mlp>>);
  EXPECT_EQ(out.get(), net.get());
  for (const auto& p : out->parameters()) EXPECT_EQ(p.device(), torch::Device(idist::device()));
  EXPECT_EQ(idist::detail::reducer_of(out) != nullptr, ws() > 1);

  torch::nn::Sequential seq(torch::nn::Linear(3, 4), torch::nn::ReLU(), torch::nn::Linear(4, 1));
  auto seq2 = idist::auto_model(seq, {.bucket_cap_mb = 1});
  static_assert(std::is_same_v<decltype(seq2), torch::nn::Sequential>);
  EXPECT_EQ(seq2.ptr().get(), seq.ptr().get());
  auto lin = idist::auto_model(torch::nn::Linear(2, 2));
  static_assert(std::is_same_v<decltype(lin), torch::nn::Linear>);

  EXPECT_THROW(idist::auto_model(std::shared_ptr<Mlp>()), idist::ValueError);
  EXPECT_THROW(idist::auto_model(net, {.bucket_cap_mb = 0}), idist::ValueError);
}

TEST(AutoOptim, ReturnsTheOptimizer) {
  auto net = std::make_shared<Mlp>();
  torch::optim::SGD sgd(net->parameters(), 0.1);
  EXPECT_EQ(&idist::auto_optim(sgd), &sgd);
  auto moved = idist::auto_optim(torch::optim::Adam(net->parameters()));
  EXPECT_EQ(moved.param_groups().size(), 1u);
  auto shared = std::make_shared<torch::optim::SGD>(net->parameters(), 0.1);
  EXPECT_EQ(idist::auto_optim(shared).get(), shared.get());
}

TEST(AutoModel, BroadcastsRankZerosParameters) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  torch::manual_seed(100 + rank());  // different initial parameters on every rank
  auto net = std::make_shared<Mlp>();
  EXPECT_FALSE(same_as_rank0(*net));
  idist::auto_model(net);
  EXPECT_TRUE(same_as_rank0(*net));
  torch::manual_seed(100);
  Mlp rank0;
  rank0.to(idist::test::test_device());
  EXPECT_EQ(max_diff(*net, rank0), 0.0);
}

// (bucket cap in MiB, gradient_as_bucket_view)
class DdpEquivalence : public ::testing::TestWithParam<std::tuple<double, bool>> {};

TEST_P(DdpEquivalence, ShardedTrainingMatchesOneProcess) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const auto [cap_mb, as_view] = GetParam();
  const std::int64_t batch = 12, steps = 6;  // 12 splits evenly over 2 and 3 ranks
  torch::manual_seed(7);
  const auto X = torch::randn({steps, batch, 6}).to(idist::test::test_device());
  const auto Y = torch::randn({steps, batch, 3}).to(idist::test::test_device());

  torch::manual_seed(100 + rank());
  auto net = idist::auto_model(std::make_shared<Mlp>(), {.bucket_cap_mb = cap_mb, .gradient_as_bucket_view = as_view});
  const auto reducer = idist::detail::reducer_of(net);
  ASSERT_NE(reducer, nullptr);
  if (cap_mb >= 1)
    EXPECT_EQ(reducer->buckets().size(), 1u);
  else
    EXPECT_GE(reducer->buckets().size(), 4u);  // 210-byte caps over 8 small tensors
  const std::int64_t share = batch / ws();
  train(
      *net, [&](torch::Tensor x) { return net->forward(x); }, X, Y, rank() * share, (rank() + 1) * share);
  EXPECT_EQ(reducer->sync_count(), std::size_t(steps));
  // mpi progresses nothing in the background: one bucket in flight at a time bounds its scratch.
  if (!idist::current_model().has_async_progress()) EXPECT_EQ(reducer->peak_in_flight(), 1u);
  EXPECT_GE(reducer->peak_in_flight(), 1u);
  // The gradients live in the buckets exactly when asked (zero_grad's detach_() kept them there).
  for (std::size_t i = 0; i < reducer->param_names().size(); ++i)
    EXPECT_EQ(reducer->gradient_in_bucket(i), as_view) << reducer->param_names()[i];

  torch::manual_seed(100);  // rank 0's initial parameters, trained alone on whole batches
  auto reference = std::make_shared<Mlp>();
  reference->to(idist::test::test_device());
  std::vector<torch::Tensor> initial;
  for (const auto& p : reference->parameters()) initial.push_back(p.detach().clone());
  train(
      *reference, [&](torch::Tensor x) { return reference->forward(x); }, X, Y, 0, batch);

  EXPECT_LT(max_diff(*net, *reference), 1e-5);
  double moved = 0;  // training moved the parameters
  for (std::size_t i = 0; i < initial.size(); ++i)
    moved = std::max(moved, (reference->parameters()[i] - initial[i]).abs().max().item<double>());
  EXPECT_GT(moved, 1e-2);
  EXPECT_TRUE(same_as_rank0(*net));
}

INSTANTIATE_TEST_SUITE_P(Buckets, DdpEquivalence,
                         ::testing::Combine(::testing::Values(25.0, 0.0002), ::testing::Bool()), [](const auto& info) {
                           return std::string(std::get<0>(info.param) >= 1 ? "OneBucket" : "SeveralBuckets") +
                                  (std::get<1>(info.param) ? "AsViews" : "Copied");
                         });

TEST(NoSync, AccumulatesLocallyThenAveragesTheSum) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const std::int64_t batch = 6 * ws();
  torch::manual_seed(3);
  const auto X = torch::randn({2, batch, 6}).to(idist::test::test_device());
  const auto Y = torch::randn({2, batch, 3}).to(idist::test::test_device());
  torch::manual_seed(5);
  auto net = idist::auto_model(std::make_shared<Mlp>(), {.bucket_cap_mb = 0.0005});
  torch::manual_seed(5);
  auto reference = std::make_shared<Mlp>();
  reference->to(idist::test::test_device());
  const auto reducer = idist::detail::reducer_of(net);
  const std::int64_t lo = rank() * 6, hi = lo + 6;

  {
    auto guard = idist::no_sync(net);
    torch::mse_loss(net->forward(X[0].slice(0, lo, hi)), Y[0].slice(0, lo, hi)).backward();
  }
  EXPECT_EQ(reducer->sync_count(), 0u);
  // Local gradients only: they differ between ranks.
  const auto g0 = net->layers[0]->weight.grad().clone();
  EXPECT_EQ(idist::all_reduce(int(idist::broadcast(g0.clone(), 0).equal(g0)), idist::ReduceOp::Min), 0);

  torch::mse_loss(net->forward(X[1].slice(0, lo, hi)), Y[1].slice(0, lo, hi)).backward();
  EXPECT_EQ(reducer->sync_count(), 1u);

  torch::mse_loss(reference->forward(X[0]), Y[0]).backward();
  torch::mse_loss(reference->forward(X[1]), Y[1]).backward();
  auto p = net->parameters();
  auto q = reference->parameters();
  for (std::size_t i = 0; i < p.size(); ++i)
    EXPECT_TRUE(p[i].grad().allclose(q[i].grad(), 1e-5, 1e-6)) << i << ": " << (p[i].grad() - q[i].grad()).abs().max();
}

TEST(NoSync, NeedsAutoModelWhenDistributed) {
  auto net = std::make_shared<Mlp>();
  if (ws() > 1) {
    EXPECT_THROW((void)idist::no_sync(net), idist::ValueError);
  } else {
    auto guard = idist::no_sync(net);  // serial: nothing to suspend
    SUCCEED();
  }
}

TEST(UnusedParameters, ErrorNamesThemOnEveryRank) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  auto net = idist::auto_model(std::make_shared<TwoHeads>());
  std::string msg;
  try {
    net->a(torch::randn({2, 4}).to(idist::test::test_device())).sum().backward();
  } catch (const std::exception& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("b.weight, b.bias"), std::string::npos) << msg;
  // Still usable afterwards.
  auto x = torch::randn({2, 4}).to(idist::test::test_device());
  (net->a(x).sum() + net->b(x).sum()).backward();
  EXPECT_EQ(idist::detail::reducer_of(net)->sync_count(), 1u);
}

TEST(UnusedParameters, FindUnusedAveragesWhatSomeRankUsed) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  auto net = idist::auto_model(std::make_shared<TwoHeads>(), {.find_unused_parameters = true});
  torch::manual_seed(9);
  const auto x = torch::randn({5, 4}).to(idist::test::test_device());  // the same on every rank
  // Only rank 0 uses head b: its gradient is rank 0's divided by the world size, on every rank.
  auto loss = net->a(x).sum();
  if (rank() == 0) loss = loss + 2 * net->b(x).sum();
  loss.backward();
  ASSERT_TRUE(net->b->weight.grad().defined());
  EXPECT_TRUE(net->b->weight.grad().allclose(2 * x.sum(0).expand({3, 4}) / ws(), 1e-6, 1e-6));
  EXPECT_TRUE(net->a->weight.grad().allclose(x.sum(0).expand({3, 4}), 1e-6, 1e-6));
  // Nobody uses b: its gradient is left as it was (also when it lives in the bucket, which
  // carries this rank's zero contribution during the all-reduce).
  net->zero_grad();
  ASSERT_TRUE(net->b->weight.grad().defined());
  {
    torch::NoGradGuard no_grad;
    net->b->weight.grad().fill_(3.0f + float(rank()));
  }
  const auto before = net->b->weight.grad().clone();
  net->a(x).sum().backward();
  EXPECT_TRUE(net->b->weight.grad().equal(before));
  EXPECT_TRUE(net->a->weight.grad().allclose(x.sum(0).expand({3, 4}), 1e-6, 1e-6));
}

TEST(AutoModel, BuffersFollowRankZero) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  for (bool broadcast_buffers : {true, false}) {
    torch::nn::Sequential net(torch::nn::Linear(4, 4), torch::nn::BatchNorm1d(4));
    net = idist::auto_model(net, {.broadcast_buffers = broadcast_buffers});
    auto x = (torch::randn({8, 4}) + rank()).to(idist::test::test_device());  // different statistics on every rank
    net->forward(x).sum().backward();
    auto mean = net->named_buffers()["1.running_mean"];
    const bool same = idist::broadcast(mean.clone(), 0).equal(mean);
    const int all_same = idist::all_reduce(int(same), idist::ReduceOp::Min);
    EXPECT_EQ(all_same == 1, broadcast_buffers);
  }
}

// sync_bn: tests/torch/sync_batch_norm_test.cpp.

TEST(AutoModel, DifferentModelsRaiseOnEveryRank) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  auto net = std::make_shared<Mlp>(rank() == ws() - 1 ? 17 : 16);
  try {
    idist::auto_model(net);
    ADD_FAILURE() << "expected ValueError";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("differs from rank 0"), std::string::npos) << msg;
    if (rank() == ws() - 1) {
      EXPECT_NE(msg.find("fc0.weight"), std::string::npos) << msg;
    }
  }
}

}  // namespace

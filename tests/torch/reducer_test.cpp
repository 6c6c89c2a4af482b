// The gradient Reducer behind auto_model: DDP's bucket assignment, the hooks and the final
// callback, no_sync, unused parameters, hook removal and the registry. The Reducer is built
// directly so that these run at any world size (serial too); every rank feeds the same data, so the
// averaged gradients equal the local ones.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "test_device.hpp"
#include "torch/bucket_assignment.hpp"  // internal: idist_torch
#include "torch/reducer.hpp"            // internal: idist_torch
#include "torch/reducer_registry.hpp"   // internal: idist_torch

namespace {

using idist::detail::Reducer;

struct Mlp : torch::nn::Module {
  Mlp() {
    fc1 = register_module("fc1", torch::nn::Linear(4, 8));
    fc2 = register_module("fc2", torch::nn::Linear(8, 8));
    fc3 = register_module("fc3", torch::nn::Linear(8, 2));
    to(idist::test::test_device());
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc3(torch::tanh(fc2(torch::tanh(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

struct TwoHeads : torch::nn::Module {
  TwoHeads() {
    used = register_module("used", torch::nn::Linear(4, 3));
    unused = register_module("unused", torch::nn::Linear(4, 3));
    to(idist::test::test_device());
  }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};

std::shared_ptr<Mlp> copy_of(const Mlp& m) {
  auto c = std::make_shared<Mlp>();
  torch::NoGradGuard g;
  auto src = m.parameters();
  auto dst = c->parameters();
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
  return c;
}

// Runs `fn`, which must throw, and returns the message (any std::exception: the autograd engine
// may wrap what the final callback throws).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

TEST(AssignBuckets, ReverseOrderFirstCapThenCap) {
  // Five 400-byte gradients, first cap 500, cap 1000: visited 4, 3, 2, 1, 0.
  const std::vector<std::size_t> bytes(5, 400);
  const std::vector<std::string> keys(5, "float@cpu");
  const auto b = idist::detail::assign_buckets(bytes, keys, 500, 1000);
  EXPECT_EQ(b, (std::vector<std::vector<std::size_t>>{{4, 3}, {2, 1, 0}}));
  // One bucket when everything fits.
  EXPECT_EQ(idist::detail::assign_buckets(bytes, keys, 1 << 20, 1 << 20),
            (std::vector<std::vector<std::size_t>>{{4, 3, 2, 1, 0}}));
  // A gradient larger than the cap gets a bucket of its own.
  EXPECT_EQ(idist::detail::assign_buckets({10, 5000, 10}, {"f", "f", "f"}, 100, 100),
            (std::vector<std::vector<std::size_t>>{{2, 1}, {0}}));
}

TEST(AssignBuckets, NeverMixesDTypes) {
  const std::vector<std::size_t> bytes = {8, 8, 8, 8};
  const std::vector<std::string> keys = {"float@cpu", "double@cpu", "float@cpu", "double@cpu"};
  const auto b = idist::detail::assign_buckets(bytes, keys, 1000, 1000);
  // Ordered by the first parameter visited: 3 (double) before 2 (float).
  EXPECT_EQ(b, (std::vector<std::vector<std::size_t>>{{3, 1}, {2, 0}}));
  EXPECT_THROW(idist::detail::assign_buckets({1, 2}, {"f"}, 1, 1), idist::ValueError);
}

TEST(Reducer, BucketLayoutFollowsCaps) {
  auto net = std::make_shared<Mlp>();
  // Parameters: fc1.weight 128 B, fc1.bias 32, fc2.weight 256, fc2.bias 32, fc3.weight 64, fc3.bias 8.
  auto one = Reducer::create(net, {});
  EXPECT_EQ(one->buckets(), (std::vector<std::vector<std::size_t>>{{5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(one->bucket_bytes(), (std::vector<std::size_t>{520}));
  Reducer::Options small;
  small.bucket_cap_mb = 100.0 / (1024 * 1024);  // 100 bytes; the first bucket too
  auto many = Reducer::create(net, small);
  EXPECT_EQ(many->buckets(), (std::vector<std::vector<std::size_t>>{{5, 4, 3}, {2}, {1, 0}}));
  EXPECT_EQ(many->bucket_bytes(), (std::vector<std::size_t>{104, 256, 160}));
  EXPECT_EQ(many->param_names(),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"}));
  Reducer::Options bad;
  bad.bucket_cap_mb = 0;
  EXPECT_THROW(Reducer::create(net, bad), idist::ValueError);
}

TEST(Reducer, GradientsAreSynchronisedEveryBackward) {
  torch::manual_seed(1);
  auto net = std::make_shared<Mlp>();
  auto ref = copy_of(*net);
  Reducer::Options small;
  small.bucket_cap_mb = 100.0 / (1024 * 1024);
  auto reducer = Reducer::create(net, small);
  const auto x = torch::randn({6, 4}).to(idist::test::test_device());
  for (int step = 1; step <= 2; ++step) {  // the second backward accumulates on the first
    net->forward(x).pow(2).mean().backward();
    ref->forward(x).pow(2).mean().backward();
    EXPECT_EQ(reducer->sync_count(), std::size_t(step));
    // Every bucket was launched from a hook, as soon as its gradients were in.
    EXPECT_EQ(reducer->early_launches(), reducer->buckets().size());
    EXPECT_EQ(reducer->buckets().size(), 3u);
    auto p = net->parameters();
    auto q = ref->parameters();
    for (std::size_t i = 0; i < p.size(); ++i) {
      ASSERT_TRUE(p[i].grad().defined());
      EXPECT_TRUE(p[i].grad().allclose(q[i].grad(), 1e-6, 1e-7)) << i;
    }
  }
}

TEST(Reducer, NoSyncSkipsSynchronisation) {
  torch::manual_seed(2);
  auto net = std::make_shared<Mlp>();
  auto reducer = Reducer::create(net, {});
  const auto x = torch::randn({3, 4}).to(idist::test::test_device());
  {
    idist::NoSyncGuard guard(reducer);
    EXPECT_FALSE(reducer->require_sync());
    net->forward(x).sum().backward();
    net->forward(x).sum().backward();
  }
  EXPECT_TRUE(reducer->require_sync());
  EXPECT_EQ(reducer->sync_count(), 0u);
  auto local = net->parameters()[0].grad().clone();
  net->forward(x).sum().backward();
  EXPECT_EQ(reducer->sync_count(), 1u);
  EXPECT_TRUE(net->parameters()[0].grad().allclose(local * 1.5, 1e-5, 1e-6));  // 3 backwards in all
}

TEST(Reducer, UnusedParametersAreNamed) {
  auto net = std::make_shared<TwoHeads>();
  auto reducer = Reducer::create(net, {});
  const auto x = torch::randn({2, 4}).to(idist::test::test_device());
  const std::string msg = error_of([&] { net->used(x).sum().backward(); });
  EXPECT_NE(msg.find("unused.weight, unused.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("find_unused_parameters"), std::string::npos) << msg;
  EXPECT_EQ(reducer->sync_count(), 0u);
  // The autograd engine rethrows the final callback's exception as it is.
  EXPECT_THROW(net->used(x).sum().backward(), idist::ValueError);
  // The reducer recovers: a backward that uses everything synchronises.
  (net->used(x).sum() + net->unused(x).sum()).backward();
  EXPECT_EQ(reducer->sync_count(), 1u);
}

TEST(Reducer, FindUnusedParametersTolerates) {
  auto net = std::make_shared<TwoHeads>();
  Reducer::Options opts;
  opts.find_unused_parameters = true;
  auto reducer = Reducer::create(net, opts);
  torch::manual_seed(11);  // the same x on every rank, whatever ran before
  const auto x = torch::randn({2, 4}).to(idist::test::test_device());
  net->used(x).sum().backward();
  EXPECT_EQ(reducer->sync_count(), 1u);
  EXPECT_EQ(reducer->early_launches(), 0u);            // the one bucket waited for the final callback
  EXPECT_FALSE(net->unused->weight.grad().defined());  // nobody used it: left alone
  ASSERT_TRUE(net->used->weight.grad().defined());
  EXPECT_TRUE(net->used->weight.grad().allclose(x.sum(0).expand({3, 4})));
}

TEST(Reducer, HooksAreRemovedWithTheReducer) {
  auto net = std::make_shared<Mlp>();
  auto acc = torch::autograd::impl::grad_accumulator(net->fc1->weight);
  const auto before = acc->post_hooks().size();
  auto reducer = Reducer::create(net, {});
  EXPECT_EQ(acc->post_hooks().size(), before + 1);
  reducer.reset();
  EXPECT_EQ(acc->post_hooks().size(), before);
  net->forward(torch::randn({1, 4}).to(idist::test::test_device()))
      .sum()
      .backward();  // no reducer left: plain local gradients
  EXPECT_TRUE(net->fc1->weight.grad().defined());
}

TEST(ReducerRegistry, DropsReducersOfDestroyedModules) {
  idist::detail::ReducerRegistry registry;
  auto net = std::make_shared<Mlp>();
  std::weak_ptr<Reducer> weak;
  {
    auto reducer = Reducer::create(net, {});
    weak = reducer;
    registry.add(net, reducer);
  }
  EXPECT_EQ(registry.find(net.get()), weak.lock());
  const torch::nn::Module* raw = net.get();
  net.reset();
  EXPECT_EQ(registry.find(raw), nullptr);
  EXPECT_TRUE(weak.expired());
}

}  // namespace

// auto_model's bucket rebuilding (DDP's rebuild_buckets) and static_graph. The model registers its
// layers in the reverse of their execution order, so reverse registration order (the initial
// buckets) is the worst order: the first bucket holds the gradients that become ready last.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "average_reference.hpp"
#include "idist/idist.hpp"
#include "test_device.hpp"
#include "torch/bucket_assignment.hpp"  // internal: idist_torch
#include "torch/reducer.hpp"            // internal: idist_torch

namespace {

// Registered out, mid, in; executed in -> mid -> out.
struct Reversed : torch::nn::Module {
  Reversed() {
    out = register_module("out", torch::nn::Linear(24, 4));
    mid = register_module("mid", torch::nn::Linear(24, 24));
    in = register_module("in", torch::nn::Linear(8, 24));
  }
  torch::Tensor forward(const torch::Tensor& x) { return out(torch::tanh(mid(torch::tanh(in(x))))); }
  torch::nn::Linear out{nullptr}, mid{nullptr}, in{nullptr};
};

std::shared_ptr<Reversed> make_net() {
  torch::manual_seed(11);
  return std::make_shared<Reversed>();
}

torch::Tensor batch_of(int step) {
  torch::manual_seed(500 + 31 * idist::get_rank() + step);
  return torch::randn({16, 8}).to(idist::test::test_device());
}

// Tiny caps: every parameter in a bucket of its own, so the bucket order is the parameter order.
idist::AutoModelOptions tiny_buckets() { return {.bucket_cap_mb = 1e-6}; }

std::vector<torch::Tensor> averaged_reference(const Reversed& like, const torch::Tensor& x) {
  return idist_test::averaged_reference(like, [&](Reversed& n) { return n.forward(x).pow(2).mean(); });
}

void step_and_check(Reversed& net, int step) {
  const torch::Tensor x = batch_of(step);
  const auto want = averaged_reference(net, x);
  for (auto& p : net.parameters()) p.mutable_grad() = torch::Tensor();
  net.forward(x).pow(2).mean().backward();
  const auto params = net.named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i].value().grad(), want[i], 1e-5, 1e-7)) << params[i].key() << " step " << step;
}

TEST(BucketRebuild, BucketsFollowTheReadyOrderAfterTheFirstBackward) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no reducer when serial)";
  auto net = idist::auto_model(make_net(), tiny_buckets());
  auto reducer = idist::detail::reducer_of(net);
  ASSERT_TRUE(reducer);
  const auto names = reducer->param_names();  // out.weight, out.bias, mid.*, in.*
  ASSERT_EQ(names.size(), 6u);
  // Reverse registration: in.bias first, out.weight last.
  EXPECT_EQ(names[reducer->buckets().front().front()], "in.bias");
  EXPECT_FALSE(reducer->buckets_rebuilt());

  step_and_check(*net, 0);
  // Before the rebuild the first bucket waited for the input layer, whose gradients come last:
  // nothing left early.
  const auto before = reducer->launch_positions();
  ASSERT_FALSE(before.empty());
  EXPECT_GE(before.front(), names.size() - 1);
  EXPECT_TRUE(reducer->buckets_rebuilt());
  // Now the output layer's gradients, ready first, lead.
  const std::string first = names[reducer->buckets().front().front()];
  EXPECT_EQ(first.rfind("out.", 0), 0u) << first;
  EXPECT_EQ(names[reducer->buckets().back().front()].rfind("in.", 0), 0u);

  step_and_check(*net, 1);
  const auto after = reducer->launch_positions();
  ASSERT_EQ(after.size(), names.size());
  // Each bucket leaves as soon as its own gradient is in: position k + 1 for bucket k.
  for (std::size_t k = 0; k < after.size(); ++k) EXPECT_EQ(after[k], k + 1) << "bucket " << k;
  step_and_check(*net, 2);

  // The same layout on every rank (rank 0's order was broadcast).
  std::vector<std::int64_t> layout;
  for (const auto& b : reducer->buckets())
    for (std::size_t i : b) layout.push_back(std::int64_t(i));
  torch::Tensor mine = torch::tensor(layout), root = mine.clone();
  idist::broadcast(root, 0);
  EXPECT_TRUE(torch::equal(mine, root));
}

TEST(BucketRebuild, CanBeSwitchedOffAndKeepsAliasedGradients) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no reducer when serial)";
  auto fixed = idist::auto_model(make_net(), {.bucket_cap_mb = 1e-6, .rebuild_buckets = false});
  auto r = idist::detail::reducer_of(fixed);
  const auto layout = r->buckets();
  step_and_check(*fixed, 0);
  step_and_check(*fixed, 1);
  EXPECT_FALSE(r->buckets_rebuilt());
  EXPECT_EQ(r->buckets(), layout);

  // With gradient_as_bucket_view the gradients move with their slots.
  auto net = idist::auto_model(make_net(), tiny_buckets());
  auto rr = idist::detail::reducer_of(net);
  step_and_check(*net, 0);
  for (std::size_t i = 0; i < rr->param_names().size(); ++i) EXPECT_TRUE(rr->gradient_in_bucket(i)) << i;
}

// Two heads, one never used: static_graph finds it once and then never waits for it.
struct TwoHeads : torch::nn::Module {
  TwoHeads() {
    used = register_module("used", torch::nn::Linear(8, 3));
    unused = register_module("unused", torch::nn::Linear(8, 3));
  }
  torch::nn::Linear used{nullptr}, unused{nullptr};
};

TEST(StaticGraph, FindsUnusedParametersOnceThenLaunchesTheirBucketsAtOnce) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no reducer when serial)";
  torch::manual_seed(3);
  auto net = idist::auto_model(std::make_shared<TwoHeads>(),
                               {.bucket_cap_mb = 1e-6, .static_graph = true, .rebuild_buckets = false});
  auto r = idist::detail::reducer_of(net);
  const auto names = r->param_names();  // used.weight, used.bias, unused.weight, unused.bias
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor x = batch_of(step);
    for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
    net->used(x).pow(2).mean().backward();  // no find_unused_parameters, yet no error
    EXPECT_FALSE(net->unused->weight.grad().defined()) << "an unused parameter's gradient is left alone";
    EXPECT_TRUE(net->used->weight.grad().defined());
    if (step > 0) {
      // Buckets 0 and 1 hold unused.bias and unused.weight (reverse registration): launched before
      // any gradient was ready.
      const auto pos = r->launch_positions();
      ASSERT_EQ(pos.size(), 4u);
      EXPECT_EQ(pos[0], 0u);
      EXPECT_EQ(pos[1], 0u);
    }
  }
  // The graph changes: the unused head now gets a gradient.
  try {
    (net->used(batch_of(9)).sum() + net->unused(batch_of(9)).sum()).backward();
    ADD_FAILURE() << "a change of the used set went unnoticed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("static_graph"), std::string::npos) << e.what();
  }
}

TEST(BucketRebuild, InOrderAssignmentChecksItsOrder) {
  const std::vector<std::size_t> bytes(3, 400);
  const std::vector<std::string> keys(3, "float@cpu");
  EXPECT_EQ(idist::detail::assign_buckets_in_order({0, 1, 2}, bytes, keys, 500, 1000),
            (std::vector<std::vector<std::size_t>>{{0, 1}, {2}}));
  EXPECT_THROW(idist::detail::assign_buckets_in_order({0, 0, 2}, bytes, keys, 500, 1000), idist::ValueError);
  EXPECT_THROW(idist::detail::assign_buckets_in_order({0, 1}, bytes, keys, 500, 1000), idist::ValueError);
}

}  // namespace

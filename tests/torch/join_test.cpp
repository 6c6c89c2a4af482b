// idist::join (issue 14, item 2): rank r trains 2 + 2r steps; no rank hangs and every rank ends
// with the parameters of a serial replay of torch's Join semantics for DDP (gradients of the active
// ranks summed and divided by the initial world size or by the active count; the final model from
// the highest rank among the last to join). throw_on_early_termination raises on every rank.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>

#include "idist/idist.hpp"
#include "torch/reducer.hpp"  // internal: idist_torch

namespace {

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

int steps_of(int r) { return 2 + 2 * r; }

struct Net : torch::nn::Module {
  Net() {
    a = register_module("a", torch::nn::Linear(4, 5));
    b = register_module("b", torch::nn::Linear(5, 2));
    unused = register_module("unused", torch::nn::Linear(2, 2));  // used on odd steps only
    to(torch::kDouble);
  }
  torch::Tensor forward(const torch::Tensor& x, bool use_all) {
    auto h = b(torch::tanh(a(x)));
    return use_all ? unused(h) : h;
  }
  torch::nn::Linear a{nullptr}, b{nullptr}, unused{nullptr};
};

// The data of rank r at step s (the same on every rank that generates it).
std::pair<torch::Tensor, torch::Tensor> batch(int r, int s) {
  auto gen = at::detail::createCPUGenerator(1000 + 100 * r + s);
  const torch::Device device = idist::device();  // where auto_model puts the model
  return {at::randn({3, 4}, gen, torch::kDouble).to(device), at::randn({3, 2}, gen, torch::kDouble).to(device)};
}

torch::Tensor loss_of(Net& net, int r, int s, bool find_unused) {
  auto [x, y] = batch(r, s);
  return torch::mse_loss(net.forward(x, !find_unused || s % 2 == 1), y);
}

// (divide_by_initial_world_size, find_unused_parameters, bucket cap MiB)
class JoinEquivalence : public ::testing::TestWithParam<std::tuple<bool, bool, double>> {};

TEST_P(JoinEquivalence, UnevenStepsMatchASerialReplay) {
  const auto [divide_by_initial, find_unused, cap] = GetParam();
  torch::manual_seed(7);
  auto net = std::make_shared<Net>();
  torch::manual_seed(7);
  Net ref;  // the same initial weights
  ref.to(idist::device());
  net = idist::auto_model(net, {.bucket_cap_mb = cap, .find_unused_parameters = find_unused});
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  int done = 0;
  idist::join(net,
              [&] {
                for (int s = 0; s < steps_of(rank()); ++s, ++done) {
                  opt.zero_grad();
                  loss_of(*net, rank(), s, find_unused).backward();
                  opt.step();
                }
              },
              {.divide_by_initial_world_size = divide_by_initial});
  EXPECT_EQ(done, steps_of(rank()));

  // Serial replay: at step s the active ranks are those with more than s steps.
  torch::optim::SGD ref_opt(ref.parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < steps_of(ws() - 1); ++s) {
    ref_opt.zero_grad();
    int active = 0;
    for (int r = 0; r < ws(); ++r) {
      if (steps_of(r) <= s) continue;
      ++active;
      loss_of(ref, r, s, find_unused).backward();
    }
    const double divisor = divide_by_initial ? double(ws()) : double(active);
    for (auto& p : ref.parameters())
      if (p.grad().defined()) p.mutable_grad().div_(divisor);
    ref_opt.step();
  }
  auto mine = net->named_parameters();
  for (const auto& q : ref.named_parameters())
    EXPECT_LT((mine[q.key()] - q.value()).abs().max().item<double>(), 1e-9) << q.key() << " on rank " << rank();
}

INSTANTIATE_TEST_SUITE_P(Join, JoinEquivalence,
                         ::testing::Values(std::tuple{true, false, 25.0}, std::tuple{false, false, 25.0},
                                           std::tuple{true, false, 1e-4},    // one bucket per parameter
                                           std::tuple{false, true, 1e-4}));  // + the used-parameter map

// Buffers (broadcast_buffers) under join: the joined ranks take part in the buffer broadcast from
// the highest active rank, and every rank ends with the final model of the last rank.
TEST(Join, BuffersAndParametersEndAsTheLastRanks) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3), torch::nn::Linear(3, 2));
  net->to(torch::kDouble);
  net = idist::auto_model(net);
  torch::optim::SGD opt(net->parameters(), 0.1);
  idist::join(net, [&] {
    for (int s = 0; s < steps_of(rank()); ++s) {
      auto [x, y] = batch(rank(), s);
      opt.zero_grad();
      torch::mse_loss(net->forward(x), y).backward();
      opt.step();
    }
  });
  bool same = true;
  for (const auto& t : net->parameters()) same = same && idist::broadcast(t.detach().clone(), ws() - 1).equal(t);
  for (const auto& t : net->buffers()) same = same && idist::broadcast(t.clone(), ws() - 1).equal(t);
  EXPECT_TRUE(same) << "rank " << rank() << " differs from rank " << ws() - 1;
  // The last rank ran all its steps: its num_batches_tracked counts them.
  EXPECT_EQ(net->named_buffers()["1.num_batches_tracked"].item<std::int64_t>(), steps_of(ws() - 1));
}

TEST(Join, ThrowOnEarlyTerminationRaisesOnEveryRank) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  auto net = idist::auto_model(std::make_shared<Net>());
  torch::optim::SGD opt(net->parameters(), 0.1);
  int done = 0;
  try {
    idist::join(net,
                [&] {
                  for (int s = 0; s < steps_of(rank()); ++s, ++done) {
                    opt.zero_grad();
                    loss_of(*net, rank(), s, false).backward();
                    opt.step();
                  }
                },
                {.throw_on_early_termination = true});
    ADD_FAILURE() << "expected idist::Error on rank " << rank();
  } catch (const idist::ValueError& e) {
    ADD_FAILURE() << "unexpected ValueError: " << e.what();
  } catch (const idist::Error& e) {
    EXPECT_NE(std::string(e.what()).find("throw_on_early_termination"), std::string::npos) << e.what();
  }
  EXPECT_EQ(done, 2) << "every rank stops at the first step after rank 0 ran out";
  // The model is usable afterwards: a normal synchronised step on every rank.
  opt.zero_grad();
  loss_of(*net, 0, 0, false).backward();
  EXPECT_FALSE(idist::detail::reducer_of(net)->has_join_tick());
}

TEST(Join, DisabledOrSerialRunsTheLoopOnly) {
  auto net = idist::auto_model(std::make_shared<Net>());
  int calls = 0;
  idist::join(net, [&] { ++calls; }, {.enable = false});
  EXPECT_EQ(calls, 1);
  if (ws() > 1) {
    auto plain = std::make_shared<Net>();
    EXPECT_THROW(idist::join(plain, [&] { ++calls; }), idist::ValueError);
    EXPECT_EQ(calls, 1) << "the loop does not run for a model without auto_model";
  } else {
    idist::join(net, [&] { ++calls; });
    EXPECT_EQ(calls, 2);
  }
}

}  // namespace

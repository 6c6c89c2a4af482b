// ZeroRedundancyOptimizer: PyTorch's partition rule; ZeRO + auto_model trains exactly as unsharded
// Adam / SGD with momentum under auto_model (float32 within 1e-5, float64 to rounding); each rank
// keeps the state of its shard only; the consolidated state reloads at other group sizes (and into
// a plain torch::optim optimizer) and continues the same trajectory; bad arguments raise ValueError
// on every rank; with overlap_with_ddp the backward steps (hook_with_zero_step, stage 1 and 2)
// along the same trajectory. Runs at every world size (groups emulate the other sizes).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "idist/idist.hpp"
#include "test_device.hpp"
#include "torch/checkpoint/optimizer_state.hpp"
#include "zero_test_support.hpp"

namespace {

using idist::test::test_device;
using idist::test::zero::max_diff;

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

// Parameters of uneven sizes (96, 16, 192, 12, 36, 3): shards of unequal size at 2 and 3 ranks.
struct Net : torch::nn::Module {
  explicit Net(int hidden = 16) {
    a = register_module("a", torch::nn::Linear(6, hidden));
    b = register_module("b", torch::nn::Linear(hidden, 12));
    c = register_module("c", torch::nn::Linear(12, 3));
  }
  torch::Tensor forward(torch::Tensor x) { return c(torch::tanh(b(torch::tanh(a(x))))); }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
};

// Four equal layers (weights 36, biases 6): equal shards at 2 ranks (the all_gather path).
struct Square : torch::nn::Module {
  Square() {
    for (const char* name : {"l0", "l1", "l2", "l3"}) layers.push_back(register_module(name, torch::nn::Linear(6, 6)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (std::size_t i = 0; i + 1 < layers.size(); ++i) x = torch::tanh(layers[i](x));
    return layers.back()(x).narrow(1, 0, 3);
  }
  std::vector<torch::nn::Linear> layers;
};

using Factory = idist::ZeroRedundancyOptimizer::Factory;

Factory adam_factory() {
  return [](std::vector<torch::Tensor> shard) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::Adam>(shard, torch::optim::AdamOptions(1e-2));
  };
}
Factory sgd_factory() {
  return [](std::vector<torch::Tensor> shard) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(shard, torch::optim::SGDOptions(0.05).momentum(0.9));
  };
}

// True on every rank when every rank's parameters are bitwise equal to rank 0's.
bool same_as_rank0(const torch::nn::Module& m) {
  bool same = true;
  for (const auto& p : m.parameters()) same = same && idist::broadcast(p.detach().clone(), 0).equal(p);
  return idist::all_reduce(int(same), idist::ReduceOp::Min) == 1;
}

// Copies `from`'s parameters into `to` (same architecture).
void copy_params(const torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard g;
  auto src = from.parameters();
  auto dst = to.parameters();
  for (std::size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

// The data of `steps` steps of a global batch of 4 rows per rank, the same on every rank, on
// test_device().
struct Data {
  torch::Tensor x, y;
};
Data make_data(int steps, int rows, torch::Dtype dtype) {
  torch::manual_seed(11);
  return {torch::randn({steps, rows, 6}, dtype).to(test_device()),
          torch::randn({steps, rows, 3}, dtype).to(test_device())};
}

// A module of type M built from `args`, on test_device().
template <class M, class... Args>
std::shared_ptr<M> on_device(Args... args) {
  auto m = std::make_shared<M>(args...);
  m->to(test_device());
  return m;
}

// One step of `model` with `opt` on rows [lo, hi) of step s.
template <class M>
void train_step(M& model, torch::optim::Optimizer& opt, const Data& d, int s, std::int64_t lo, std::int64_t hi) {
  opt.zero_grad();
  torch::mse_loss(model.forward(d.x[s].slice(0, lo, hi)), d.y[s].slice(0, lo, hi)).backward();
  opt.step();
}

// Runs `fn` and checks that it throws idist::ValueError whose message contains `part`.
void expect_value_error(const std::function<void()>& fn, const std::string& part) {
  try {
    fn();
    ADD_FAILURE() << "no ValueError (expected one containing '" << part << "') on rank " << rank();
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Runs one backward of `net` and checks that it throws an exception whose message contains each of
// `parts` (autograd passes a hook's idist::Error on in an exception of its own type).
template <class M>
void expect_backward_error(M& net, std::initializer_list<std::string> parts) {
  const Data d = make_data(1, 4, torch::kFloat);
  try {
    torch::mse_loss(net->forward(d.x[0]), d.y[0]).backward();
    ADD_FAILURE() << "the backward did not raise (expected an error containing '" << *parts.begin() << "') on rank "
                  << rank();
  } catch (const std::exception& e) {
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Bytes of the tensors of an Adam or SGD optimizer's state.
std::int64_t state_bytes(const torch::optim::Optimizer& opt) {
  std::int64_t bytes = 0;
  auto add = [&](const torch::Tensor& t) {
    if (t.defined()) bytes += t.numel() * std::int64_t(t.element_size());
  };
  for (const auto& [key, state] : opt.state()) {
    if (auto* a = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      add(a->exp_avg());
      add(a->exp_avg_sq());
      add(a->max_exp_avg_sq());
    } else if (auto* s = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      add(s->momentum_buffer());
    }
  }
  return bytes;
}

std::string archive_bytes(torch::serialize::OutputArchive& a) {
  std::ostringstream out;
  a.save_to(out);
  return out.str();
}
void load_bytes(torch::serialize::InputArchive& a, const std::string& bytes) {
  a.load_from(bytes.data(), bytes.size());
}

}  // namespace

// --------------------------------------------------------------------------------------------
// The partition

TEST(ZeroPartition, FollowsPyTorchsSortedGreedyRule) {
  // Worked by hand with _partition_parameters' rule: largest first (ties in order), each to the
  // rank with the smallest total so far (ties to the lowest rank).
  const std::vector<std::int64_t> sizes{5, 9, 9, 1, 12, 3, 7, 7};
  EXPECT_EQ(idist::zero_partition(sizes, 3), (std::vector<int>{0, 1, 2, 2, 0, 1, 1, 2}));
  EXPECT_EQ(idist::zero_partition(sizes, 2), (std::vector<int>{0, 1, 1, 1, 0, 0, 0, 1}));
  EXPECT_EQ(idist::zero_partition(std::vector<std::int64_t>{4, 4, 4, 4, 4}, 3), (std::vector<int>{0, 1, 2, 0, 1}));
  EXPECT_EQ(idist::zero_partition(std::vector<std::int64_t>{1, 2, 3}, 5), (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(idist::zero_partition(std::vector<std::int64_t>{0, 10, 0, 3, 3, 10, 1}, 4),
            (std::vector<int>{3, 0, 3, 2, 3, 1, 2}));
  EXPECT_EQ(idist::zero_partition(std::vector<std::int64_t>{7, 8}, 1), (std::vector<int>{0, 0}));
  EXPECT_TRUE(idist::zero_partition(std::vector<std::int64_t>{}, 2).empty());
}

TEST(ZeroPartition, EachRankHoldsAtMostItsSharePlusTheLargest) {
  torch::manual_seed(5);
  for (int ranks = 1; ranks <= 7; ++ranks) {
    const torch::Tensor t = torch::randint(0, 1000, {40}, torch::kLong);
    const std::vector<std::int64_t> sizes(t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + 40);
    const std::vector<int> owner = idist::zero_partition(sizes, ranks);
    std::vector<std::int64_t> load(std::size_t(ranks), 0);
    for (std::size_t i = 0; i < sizes.size(); ++i) load[std::size_t(owner[i])] += sizes[i];
    const std::int64_t total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
    const std::int64_t largest = *std::max_element(sizes.begin(), sizes.end());
    for (std::int64_t l : load) EXPECT_LE(l, total / ranks + largest) << ranks << " ranks";
  }
}

TEST(ZeroPartition, RejectsBadArguments) {
  expect_value_error([] { idist::zero_partition(std::vector<std::int64_t>{1}, 0); }, "ranks should be at least 1");
  expect_value_error([] { idist::zero_partition(std::vector<std::int64_t>{1, -2}, 2); }, "numels[1] is -2");
}

TEST(Zero, ShardsThePartitionAndBuildsTheLocalOptimizerOverIt) {
  torch::manual_seed(1);
  auto net = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory());
  const auto params = net->parameters();
  std::vector<std::int64_t> numels;
  for (const auto& p : params) numels.push_back(p.numel());
  EXPECT_EQ(opt.owners(), idist::zero_partition(numels, ws()));
  std::vector<torch::Tensor> expected;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (opt.owners()[i] == rank()) expected.push_back(params[i]);
  const auto& local = opt.local_optimizer().param_groups();
  ASSERT_EQ(local.size(), 1u);
  ASSERT_EQ(local[0].params().size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_TRUE(local[0].params()[i].is_same(expected[i]));
  // The exposed optimizer is one group over every parameter, with the local optimizer's options.
  ASSERT_EQ(opt.param_groups().size(), 1u);
  EXPECT_EQ(opt.param_groups()[0].params().size(), params.size());
  EXPECT_DOUBLE_EQ(opt.param_groups()[0].options().get_lr(), 1e-2);
}

// --------------------------------------------------------------------------------------------
// Trajectories

// (Adam or SGD with momentum, dtype, parameters_as_bucket_view)
class ZeroTrajectory : public ::testing::TestWithParam<std::tuple<bool, torch::Dtype, bool>> {};

// Where the step runs: in step() (None), or in the backward through hook_with_zero_step
// (AfterLastBucket) or hook_with_zero_step_interleaved (Interleaved), with overlap_with_ddp.
enum class Overlap { None, AfterLastBucket, Interleaved };

// Stage 2 (`reduce_scatter`): the gradients reach each rank through ZeRO's reduce-scatter hook, in
// buckets of about 256 bytes (several buckets, each holding parameters of several owners). With the
// step in the backward the buckets are as small, the wrapped hook all-reduces (stage 1) or
// reduce-scatters, and halfway the learning rate is halved (what a scheduler does), which the hook's
// steps must follow.
template <class M>
void expect_same_trajectory(bool adam, torch::Dtype dtype, bool views, bool reduce_scatter = false,
                            Overlap overlap = Overlap::None) {
  const int steps = 20;
  torch::manual_seed(3);
  auto zero_model = std::make_shared<M>();
  auto ref_model = std::make_shared<M>();
  zero_model->to(test_device(), dtype);
  ref_model->to(test_device(), dtype);
  copy_params(*zero_model, *ref_model);
  idist::AutoModelOptions small_buckets;
  if (reduce_scatter || overlap != Overlap::None)
    small_buckets.bucket_cap_mb = small_buckets.first_bucket_cap_mb = 256.0 / (1 << 20);
  zero_model = idist::auto_model(zero_model, small_buckets);
  ref_model = idist::auto_model(ref_model);

  idist::ZeroRedundancyOptimizer zero(
      zero_model->parameters(), adam ? adam_factory() : sgd_factory(),
      {.parameters_as_bucket_view = views, .overlap_with_ddp = overlap != Overlap::None});
  if (overlap != Overlap::None) {
    idist::CommHook reduce = reduce_scatter && ws() > 1 ? zero.reduce_scatter_hook() : idist::comm_hooks::allreduce();
    idist::register_comm_hook(zero_model, overlap == Overlap::Interleaved
                                              ? idist::hook_with_zero_step_interleaved(reduce, zero)
                                              : idist::hook_with_zero_step(reduce, zero));
  } else if (reduce_scatter && ws() > 1) {
    idist::register_comm_hook(zero_model, zero.reduce_scatter_hook());
  }
  std::unique_ptr<torch::optim::Optimizer> ref = (adam ? adam_factory() : sgd_factory())(ref_model->parameters());

  const Data d = make_data(steps, 4 * ws(), dtype);
  for (int s = 0; s < steps; ++s) {
    if (overlap != Overlap::None && s == steps / 2)
      for (torch::optim::Optimizer* o : {static_cast<torch::optim::Optimizer*>(&zero), ref.get()})
        o->param_groups()[0].options().set_lr(o->param_groups()[0].options().get_lr() / 2);
    train_step(*zero_model, zero, d, s, 4 * rank(), 4 * rank() + 4);
    train_step(*ref_model, *ref, d, s, 4 * rank(), 4 * rank() + 4);
  }
  const double diff = max_diff(*zero_model, *ref_model);
  EXPECT_LE(diff, dtype == torch::kFloat64 ? 1e-12 : 1e-5) << "max |ZeRO - unsharded| after " << steps << " steps";
  EXPECT_TRUE(same_as_rank0(*zero_model));
  // The run moved the parameters far more than the tolerance.
  torch::manual_seed(3);
  M start;
  start.to(test_device(), dtype);
  EXPECT_GT(max_diff(*zero_model, start), 1e-2);
}

TEST_P(ZeroTrajectory, EqualsTheUnshardedOptimizerUnderAutoModel) {
  const auto [adam, dtype, views] = GetParam();
  expect_same_trajectory<Net>(adam, dtype, views);
}

TEST_P(ZeroTrajectory, EqualsTheUnshardedOptimizerWithEqualShards) {
  const auto [adam, dtype, views] = GetParam();
  expect_same_trajectory<Square>(adam, dtype, views);
}

TEST_P(ZeroTrajectory, EqualsTheUnshardedOptimizerWithGradientsReduceScattered) {
  const auto [adam, dtype, views] = GetParam();
  expect_same_trajectory<Net>(adam, dtype, views, true);
  expect_same_trajectory<Square>(adam, dtype, views, true);
}

// (Adam or SGD with momentum, interleaved)
class ZeroOverlap : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(ZeroOverlap, TheStepInTheBackwardEqualsTheUnshardedOptimizer) {
  const auto [adam, interleaved] = GetParam();
  const Overlap overlap = interleaved ? Overlap::Interleaved : Overlap::AfterLastBucket;
  for (bool reduce_scatter : {false, true}) {
    expect_same_trajectory<Net>(adam, torch::kFloat64, true, reduce_scatter, overlap);
    expect_same_trajectory<Square>(adam, torch::kFloat32, true, reduce_scatter, overlap);
  }
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroOverlap, ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Adam" : "SgdMomentum") +
                                  (std::get<1>(info.param) ? "_Interleaved" : "_AfterLastBucket");
                         });

// With the step in the backward, the hook updates the parameters before step() is called, and
// step() refuses to pass silently when no backward stepped (the hook was not registered).
TEST(ZeroOverlapSteps, TheBackwardStepsAndStepOnlyChecks) {
  torch::manual_seed(3);
  auto net = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory(), {.overlap_with_ddp = true});
  const Data d = make_data(2, 4 * ws(), torch::kFloat32);
  const auto loss = [&](int s) {
    return torch::mse_loss(net->forward(d.x[s].slice(0, 4 * rank(), 4 * rank() + 4)),
                           d.y[s].slice(0, 4 * rank(), 4 * rank() + 4));
  };
  if (ws() > 1) {
    expect_value_error([&] { opt.step(); }, "no backward stepped the parameters since the previous step()");
    idist::register_comm_hook(net, idist::hook_with_zero_step(idist::comm_hooks::allreduce(), opt));
  }
  std::vector<torch::Tensor> before;
  for (const auto& p : net->parameters()) before.push_back(p.detach().clone());
  opt.zero_grad();
  loss(0).backward();
  std::size_t moved = 0;
  const auto params = net->parameters();
  for (std::size_t i = 0; i < params.size(); ++i) moved += params[i].equal(before[i]) ? 0 : 1;
  if (ws() > 1) {
    EXPECT_EQ(moved, params.size()) << "every parameter is updated when the backward returns";
    EXPECT_TRUE(same_as_rank0(*net));
    expect_value_error([&] { opt.step([] { return torch::Tensor(); }); }, "a closure was given");
  } else {
    EXPECT_EQ(moved, 0u) << "a single rank steps in step()";
  }
  EXPECT_FALSE(opt.step().defined());
  if (ws() > 1) expect_value_error([&] { opt.step(); }, "no backward stepped the parameters since the previous step()");
}

INSTANTIATE_TEST_SUITE_P(Zero, ZeroTrajectory,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(torch::kFloat32, torch::kFloat64),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Adam" : "SgdMomentum") +
                                  (std::get<1>(info.param) == torch::kFloat64 ? "_Float64" : "_Float32") +
                                  (std::get<2>(info.param) ? "_BucketView" : "_OwnStorage");
                         });

TEST(Zero, BucketViewMovesTheParametersIntoOneBufferAndOwnStorageDoesNot) {
  if (ws() < 2) GTEST_SKIP() << "a single rank needs no buffer";
  for (const bool views : {true, false}) {
    torch::manual_seed(3);
    auto net = idist::auto_model(std::make_shared<Net>());
    std::vector<const void*> before;
    std::vector<torch::Tensor> values;
    for (const auto& p : net->parameters()) {
      before.push_back(p.data_ptr());
      values.push_back(p.detach().clone());
    }
    idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory(), {.parameters_as_bucket_view = views});
    const auto params = net->parameters();
    std::size_t moved = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      moved += params[i].data_ptr() != before[i];
      EXPECT_TRUE(params[i].equal(values[i]));  // the values are kept
      EXPECT_TRUE(params[i].is_leaf());
    }
    EXPECT_EQ(moved, views ? params.size() : 0u);
    if (views) {  // all in one storage
      for (const auto& p : params) EXPECT_TRUE(p.storage().is_alias_of(params[0].storage()));
    }
  }
}

TEST(Zero, FollowsFrozenParametersAndAChangeOfTrainability) {
  torch::manual_seed(3);
  auto zero_model = std::make_shared<Net>();
  auto ref_model = std::make_shared<Net>();
  copy_params(*zero_model, *ref_model);
  zero_model->c->bias.requires_grad_(false);
  ref_model->c->bias.requires_grad_(false);
  zero_model = idist::auto_model(zero_model);
  ref_model = idist::auto_model(ref_model);
  idist::ZeroRedundancyOptimizer zero(zero_model->parameters(), adam_factory());
  auto ref = adam_factory()(ref_model->parameters());
  const Data d = make_data(10, 4 * ws(), torch::kFloat32);
  for (int s = 0; s < 10; ++s) {
    if (s == 5) {  // freeze another parameter halfway: the layout is rebuilt
      for (auto* m : {zero_model.get(), ref_model.get()}) {
        m->a->weight.requires_grad_(false);
        m->a->weight.mutable_grad().reset();  // else the optimizers keep moving it with a zero gradient
      }
      zero_model = idist::auto_model(zero_model);
      ref_model = idist::auto_model(ref_model);
    }
    train_step(*zero_model, zero, d, s, 4 * rank(), 4 * rank() + 4);
    train_step(*ref_model, *ref, d, s, 4 * rank(), 4 * rank() + 4);
  }
  EXPECT_LE(max_diff(*zero_model, *ref_model), 1e-5);
  EXPECT_TRUE(same_as_rank0(*zero_model));
}

TEST(Zero, PassesTheExposedOptionsToTheLocalOptimizer) {
  torch::manual_seed(3);
  auto net = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory());
  const Data d = make_data(2, 4 * ws(), torch::kFloat32);
  train_step(*net, opt, d, 0, 4 * rank(), 4 * rank() + 4);
  std::vector<torch::Tensor> before;
  for (const auto& p : net->parameters()) before.push_back(p.detach().clone());
  opt.param_groups()[0].options().set_lr(0.0);  // what an LR scheduler does
  train_step(*net, opt, d, 1, 4 * rank(), 4 * rank() + 4);
  EXPECT_DOUBLE_EQ(opt.local_optimizer().param_groups()[0].options().get_lr(), 0.0);
  const auto after = net->parameters();
  for (std::size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(after[i].equal(before[i]));
}

TEST(Zero, StepReturnsTheClosuresLoss) {
  torch::manual_seed(3);
  auto net = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer opt(net->parameters(), sgd_factory());
  const Data d = make_data(1, 4, torch::kFloat32);
  torch::Tensor expected;
  const torch::Tensor loss = opt.step([&] {
    opt.zero_grad();
    torch::Tensor l = torch::mse_loss(net->forward(d.x[0]), d.y[0]);
    l.backward();
    expected = l.detach();
    return l;
  });
  ASSERT_TRUE(loss.defined());
  EXPECT_TRUE(loss.detach().equal(expected));
}

// --------------------------------------------------------------------------------------------
// State per rank

TEST(Zero, EachRankKeepsTheStateOfItsShardOnly) {
  for (const bool adam : {true, false}) {
    torch::manual_seed(3);
    auto zero_model = std::make_shared<Net>(64);
    auto ref_model = std::make_shared<Net>(64);
    copy_params(*zero_model, *ref_model);
    zero_model = idist::auto_model(zero_model);
    ref_model = idist::auto_model(ref_model);
    idist::ZeroRedundancyOptimizer zero(zero_model->parameters(), adam ? adam_factory() : sgd_factory());
    auto ref = (adam ? adam_factory() : sgd_factory())(ref_model->parameters());
    const Data d = make_data(2, 4 * ws(), torch::kFloat32);
    for (int s = 0; s < 2; ++s) {
      train_step(*zero_model, zero, d, s, 4 * rank(), 4 * rank() + 4);
      train_step(*ref_model, *ref, d, s, 4 * rank(), 4 * rank() + 4);
    }
    const std::int64_t total = state_bytes(*ref);
    const std::int64_t mine = state_bytes(zero.local_optimizer());
    std::int64_t largest = 0;  // the state of the largest parameter
    for (const auto& p : ref_model->parameters()) largest = std::max(largest, p.numel());
    largest *= std::int64_t(sizeof(float)) * (adam ? 2 : 1);
    ASSERT_GT(total, 0);
    EXPECT_LE(mine, total / ws() + largest) << "rank " << rank() << " of " << ws();
    EXPECT_EQ(idist::all_reduce(mine), total);  // every parameter's state on exactly one rank
    EXPECT_TRUE(zero.state().empty());          // the exposed optimizer keeps none
  }
}

// --------------------------------------------------------------------------------------------
// Consolidation, save and load at other group sizes

namespace {

// Same data on every rank and no gradient averaging: any group trains like one process.
constexpr int kSteps = 20;
constexpr int kHalf = 10;

Data full_batch_data() { return make_data(kSteps, 8, torch::kFloat64); }

std::shared_ptr<Net> fresh_net() {
  torch::manual_seed(3);
  auto net = std::make_shared<Net>();
  net->to(test_device(), torch::kFloat64);
  return net;
}

// The parameters after kSteps steps of plain Adam.
std::shared_ptr<Net> reference_run(const Data& d) {
  auto net = fresh_net();
  auto opt = adam_factory()(net->parameters());
  for (int s = 0; s < kSteps; ++s) train_step(*net, *opt, d, s, 0, 8);
  return net;
}

// Group ranks 0 .. n-1 (the world when n is the world size).
idist::Group first_ranks(int n) {
  if (n == ws()) return {};
  std::vector<int> r(static_cast<std::size_t>(n));
  std::iota(r.begin(), r.end(), 0);
  return idist::new_group(r);
}

bool member(const idist::Group& g) {
  return g.is_world() || std::find(g.ranks().begin(), g.ranks().end(), rank()) != g.ranks().end();
}

std::string from_rank(const std::string& mine, int src) {
  const auto blob = idist::broadcast_object(std::as_bytes(std::span(mine.data(), mine.size())), src);
  return {reinterpret_cast<const char*>(blob.data()), blob.size()};
}

// Trains kHalf steps with ZeRO over the group `g` and saves its state, with save() (group rank 0
// holds it) or with consolidate_state_dict(last) + save_consolidated(). Returns, on every world
// rank, the archive that holds the state and the parameters.
std::pair<std::string, std::shared_ptr<Net>> first_half(const idist::Group& g, const Data& d,
                                                        bool consolidate_to_last) {
  std::vector<int> members = g.ranks();
  if (g.is_world()) {
    members.resize(std::size_t(ws()));
    std::iota(members.begin(), members.end(), 0);
  }
  const int holder = consolidate_to_last ? members.back() : members.front();
  auto net = fresh_net();
  std::string mine;
  if (member(g)) {
    idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory(), {.group = g});
    for (int s = 0; s < kHalf; ++s) train_step(*net, opt, d, s, 0, 8);
    torch::serialize::OutputArchive out;
    if (consolidate_to_last) {
      opt.consolidate_state_dict(int(members.size()) - 1);
      if (rank() == holder)
        opt.save_consolidated(out);
      else
        expect_value_error([&] { opt.save_consolidated(out); }, "holds no consolidated state");
    } else {
      opt.save(out);  // collective; a stub on the other members
    }
    mine = archive_bytes(out);
  }
  for (auto& p : net->parameters()) idist::broadcast(p.detach(), holder);
  return {from_rank(mine, holder), net};
}

}  // namespace

// Saved at 2 ranks (or 1 when serial), loaded at 1, 2 and 3 (as far as the world allows).
TEST(ZeroCheckpoint, ReloadsAtOtherGroupSizesAndContinuesTheTrajectory) {
  const Data d = full_batch_data();
  const auto reference = reference_run(d);
  for (const bool consolidate_to_last : {false, true}) {
    const idist::Group saving = first_ranks(std::min(2, ws()));
    auto [bytes, saved_net] = first_half(saving, d, consolidate_to_last);
    ASSERT_FALSE(bytes.empty());
    for (int n = 1; n <= ws(); ++n) {
      const idist::Group loading = first_ranks(n);
      if (!member(loading)) continue;
      auto net = fresh_net();
      copy_params(*saved_net, *net);
      idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory(), {.group = loading});
      torch::serialize::InputArchive in;
      load_bytes(in, bytes);
      opt.load(in);
      for (int s = kHalf; s < kSteps; ++s) train_step(*net, opt, d, s, 0, 8);
      EXPECT_LE(max_diff(*net, *reference), 1e-12) << "saved at " << std::min(2, ws()) << ", loaded at " << n;
    }
    // A plain torch::optim::Adam over the same parameters loads the consolidated state too.
    auto net = fresh_net();
    copy_params(*saved_net, *net);
    auto plain = adam_factory()(net->parameters());
    torch::serialize::InputArchive in;
    load_bytes(in, bytes);
    plain->load(in);
    for (int s = kHalf; s < kSteps; ++s) train_step(*net, *plain, d, s, 0, 8);
    EXPECT_LE(max_diff(*net, *reference), 1e-12);
  }
}

TEST(ZeroCheckpoint, LoadsAPlainOptimizersArchive) {
  const Data d = full_batch_data();
  const auto reference = reference_run(d);
  auto first = fresh_net();
  auto plain = adam_factory()(first->parameters());
  for (int s = 0; s < kHalf; ++s) train_step(*first, *plain, d, s, 0, 8);
  torch::serialize::OutputArchive out;
  plain->save(out);
  const std::string bytes = archive_bytes(out);

  auto net = fresh_net();
  copy_params(*first, *net);
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory());
  torch::serialize::InputArchive in;
  load_bytes(in, bytes);
  opt.load(in);
  for (int s = kHalf; s < kSteps; ++s) train_step(*net, opt, d, s, 0, 8);
  EXPECT_LE(max_diff(*net, *reference), 1e-12);
}

// PyTorch's load_state_dict rule: the state takes its parameter's device and, being floating, its
// dtype (a float32 Adam state loaded for float64 parameters becomes float64; the step counts stay).
TEST(ZeroCheckpoint, LoadPutsTheStateOnTheParametersDeviceAndDtype) {
  const Data d = make_data(3, 8, torch::kFloat32);
  auto first = on_device<Net>();
  auto plain = adam_factory()(first->parameters());
  for (int s = 0; s < 3; ++s) train_step(*first, *plain, d, s, 0, 8);
  torch::serialize::OutputArchive out;
  plain->save(out);
  const std::string bytes = archive_bytes(out);

  auto net = fresh_net();  // float64
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory());
  torch::serialize::InputArchive in;
  in.load_from(bytes.data(), bytes.size(), torch::Device(torch::kCPU));  // the state arrives on the host
  opt.load(in);
  auto& local = opt.local_optimizer();
  const auto params = net->parameters(), saved_params = first->parameters();
  std::size_t checked = 0;
  for (const auto& p : local.param_groups()[0].params()) {
    const std::size_t i =
        std::size_t(std::find_if(params.begin(), params.end(), [&](const torch::Tensor& q) { return q.is_same(p); }) -
                    params.begin());
    ASSERT_LT(i, params.size());
    const auto* mine = dynamic_cast<torch::optim::AdamParamState*>(idist::checkpoint::state_of(local, p));
    const auto* saved =
        dynamic_cast<torch::optim::AdamParamState*>(idist::checkpoint::state_of(*plain, saved_params[i]));
    ASSERT_TRUE(mine && saved) << "parameter " << i;
    EXPECT_EQ(mine->exp_avg().scalar_type(), torch::kFloat64);
    EXPECT_EQ(mine->exp_avg_sq().scalar_type(), torch::kFloat64);
    EXPECT_EQ(mine->exp_avg().device(), test_device());
    EXPECT_EQ(mine->step(), 3);
    EXPECT_TRUE(torch::equal(mine->exp_avg().cpu(), saved->exp_avg().cpu().to(torch::kFloat64)));
    EXPECT_TRUE(torch::equal(mine->exp_avg_sq().cpu(), saved->exp_avg_sq().cpu().to(torch::kFloat64)));
    ++checked;
  }
  EXPECT_EQ(idist::all_reduce(std::int64_t(checked)), std::int64_t(params.size()));  // every shard's state
}

TEST(ZeroCheckpoint, TorchSaveAndLoadGoThroughTheOptimizer) {
  const Data d = full_batch_data();
  auto net = fresh_net();
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory());
  train_step(*net, opt, d, 0, 0, 8);
  std::ostringstream stream;
  torch::save(opt, stream);  // collective: Optimizer::save is virtual
  const std::string mine = stream.str();
  std::istringstream rank0(from_rank(mine, 0));
  torch::load(opt, rank0);
  if (ws() > 1) {  // the stub the other ranks wrote is refused on every rank
    torch::serialize::InputArchive in;
    load_bytes(in, from_rank(mine, 1));
    expect_value_error([&] { opt.load(in); }, "stub");
  }
}

TEST(ZeroCheckpoint, RefusesArchivesOfOtherModels) {
  auto net = fresh_net();
  idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory());
  {  // another parameter count
    torch::nn::Linear other(3, 3);
    other->to(test_device());
    torch::optim::Adam adam(other->parameters());
    torch::serialize::OutputArchive out;
    adam.save(out);
    torch::serialize::InputArchive in;
    load_bytes(in, archive_bytes(out));
    expect_value_error([&] { opt.load(in); }, "holds the state of 2 parameters, but this optimizer has 6");
  }
  {  // the same count, other sizes
    auto wide = std::make_shared<Net>(17);
    wide->to(test_device(), torch::kFloat64);
    idist::ZeroRedundancyOptimizer other(wide->parameters(), adam_factory());
    torch::serialize::OutputArchive out;
    other.save(out);
    torch::serialize::InputArchive in;
    load_bytes(in, from_rank(archive_bytes(out), 0));
    expect_value_error([&] { opt.load(in); }, "parameter 0 has 102 elements in the archive but 96 here");
  }
  {  // the same parameters, another kind of optimizer (SGD's state into Adam)
    auto same = fresh_net();
    auto sgd = sgd_factory()(same->parameters());
    torch::serialize::OutputArchive out;
    sgd->save(out);
    torch::serialize::InputArchive in;
    load_bytes(in, archive_bytes(out));
    expect_value_error([&] { opt.load(in); }, "the state of another kind of optimizer (options dampening, lr");
  }
  {  // no optimizer state at all
    torch::serialize::OutputArchive out;
    out.write("x", c10::IValue(std::int64_t(1)));
    torch::serialize::InputArchive in;
    load_bytes(in, archive_bytes(out));
    expect_value_error([&] { opt.load(in); }, "holds no optimizer state");
  }
  expect_value_error([&] { opt.consolidate_state_dict(ws()); }, "expected a group rank in [0, ");
  torch::serialize::OutputArchive out;
  expect_value_error([&] { opt.save_consolidated(out); }, "holds no consolidated state");
}

// --------------------------------------------------------------------------------------------
// Bad arguments: every rank raises, also when only one rank is wrong

namespace {

std::vector<torch::Tensor> params_of(int hidden = 16) {
  torch::manual_seed(3);
  Net net(hidden);
  net.to(test_device());
  return net.parameters();
}

}  // namespace

TEST(ZeroArguments, EmptyParameterListOrFactory) {
  expect_value_error([] { idist::ZeroRedundancyOptimizer({}, adam_factory()); }, "the parameter list is empty");
  expect_value_error([] { idist::ZeroRedundancyOptimizer(params_of(), Factory{}); }, "the factory is empty");
  const int bad = ws() - 1;  // only the last rank is wrong
  expect_value_error(
      [&] {
        idist::ZeroRedundancyOptimizer(rank() == bad ? std::vector<torch::Tensor>{} : params_of(), adam_factory());
      },
      "the parameter list is empty");
}

TEST(ZeroArguments, TensorsThatCannotBeSharded) {
  auto p = params_of();
  expect_value_error(
      [&] {
        idist::ZeroRedundancyOptimizer({p[0], p[1], p[0]}, adam_factory());
      },
      "parameter 2 is the same tensor as parameter 0");
  expect_value_error(
      [&] {
        idist::ZeroRedundancyOptimizer({p[0], p[1] * 2}, adam_factory());
      },
      "parameter 1 is not a leaf tensor");
  auto d = torch::zeros({3}, idist::test::on_test_device(torch::kFloat64)).requires_grad_();
  expect_value_error(
      [&] {
        idist::ZeroRedundancyOptimizer({p[0], d}, adam_factory());
      },
      "parameter 1 has dtype Double but parameter 0 has Float");
  expect_value_error(
      [&] {
        idist::ZeroRedundancyOptimizer({p[0], torch::Tensor()}, adam_factory());
      },
      "parameter 1 is undefined");
}

TEST(ZeroArguments, ParametersThatDifferAcrossRanks) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const int bad = ws() - 1;
  auto fewer = params_of();
  if (rank() == bad) fewer.pop_back();
  std::string count_error = "the parameters differ across the group: group rank ";
  count_error += std::to_string(bad);
  count_error += " has 5 parameters";
  expect_value_error([&] { idist::ZeroRedundancyOptimizer(fewer, adam_factory()); }, count_error);
  std::string shape_error = "parameter 0 is Float [17, 6] on group rank ";
  shape_error += std::to_string(bad);
  expect_value_error([&] { idist::ZeroRedundancyOptimizer(params_of(rank() == bad ? 17 : 16), adam_factory()); },
                     shape_error);
}

TEST(ZeroArguments, FactoriesThatDoNotBuildAnOptimizerOverTheShard) {
  const int bad = ws() - 1;
  const Factory null_on_bad = [&](std::vector<torch::Tensor> shard) -> std::unique_ptr<torch::optim::Optimizer> {
    if (rank() == bad) return nullptr;
    return adam_factory()(std::move(shard));
  };
  expect_value_error([&] { idist::ZeroRedundancyOptimizer(params_of(), null_on_bad); }, "null optimizer");
  const Factory copies = [](std::vector<torch::Tensor> shard) -> std::unique_ptr<torch::optim::Optimizer> {
    for (auto& t : shard) t = t.detach().clone().requires_grad_();
    return adam_factory()(std::move(shard));
  };
  expect_value_error([&] { idist::ZeroRedundancyOptimizer(params_of(), copies); }, "outside the shard");
  const Factory throws_on_0 = [&](std::vector<torch::Tensor> shard) -> std::unique_ptr<torch::optim::Optimizer> {
    if (rank() == 0) throw std::runtime_error("no memory left");
    return adam_factory()(std::move(shard));
  };
  expect_value_error([&] { idist::ZeroRedundancyOptimizer(params_of(), throws_on_0); },
                     "the factory threw: no memory left");
}

TEST(ZeroArguments, ReduceScatterHookNeedsTheWholeWorldAndEveryParameter) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  torch::manual_seed(1);
  if (ws() > 2) {
    const idist::Group first_two = idist::new_group({0, 1});
    idist::barrier(first_two);  // every rank takes part in making the group's communicator (mpi)
    if (rank() < 2) {
      auto net = on_device<Net>();
      idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory(), {.group = first_two});
      expect_value_error([&] { (void)opt.reduce_scatter_hook(); },
                         "has 2 of the world's " + std::to_string(ws()) + " ranks; expected a group of every rank");
    }
  }
  // An optimizer over part of the model: the first backward names the parameter it was not given.
  auto net = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer opt(net->c->parameters(), adam_factory());
  idist::register_comm_hook(net, opt.reduce_scatter_hook());
  expect_backward_error(net, {"reduce_scatter_hook: bucket ", "that the ZeroRedundancyOptimizer was not given"});
}

TEST(ZeroArguments, StepHookNeedsOverlapWithDdpAndTheWholeWorld) {
  auto net = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer plain(net->parameters(), adam_factory());
  expect_value_error([&] { (void)idist::hook_with_zero_step(nullptr, plain); }, "the hook is empty");
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";  // one rank: only the empty hook is checked
  expect_value_error([&] { (void)idist::hook_with_zero_step_interleaved(idist::comm_hooks::allreduce(), plain); },
                     "was made with overlap_with_ddp = false");
  if (ws() > 2) {
    const idist::Group first_two = idist::new_group({0, 1});
    idist::barrier(first_two);
    if (rank() < 2) {
      auto part = on_device<Net>();
      idist::ZeroRedundancyOptimizer opt(part->parameters(), adam_factory(),
                                         {.group = first_two, .overlap_with_ddp = true});
      expect_value_error([&] { (void)idist::hook_with_zero_step(idist::comm_hooks::allreduce(), opt); },
                         "expected a group of every rank");
    }
  }
  // A hook whose optimizer was destroyed raises in the backward instead of stepping freed state.
  idist::CommHook orphan;
  {
    idist::ZeroRedundancyOptimizer opt(net->parameters(), adam_factory(), {.overlap_with_ddp = true});
    orphan = idist::hook_with_zero_step(idist::comm_hooks::allreduce(), opt);
  }
  idist::register_comm_hook(net, orphan);
  expect_backward_error(net, {"was destroyed"});
  // An optimizer over part of the model: refused before the bucket's reduction is issued.
  auto whole = idist::auto_model(std::make_shared<Net>());
  idist::ZeroRedundancyOptimizer part(whole->c->parameters(), adam_factory(), {.overlap_with_ddp = true});
  idist::register_comm_hook(whole, idist::hook_with_zero_step(idist::comm_hooks::allreduce(), part));
  expect_backward_error(whole, {"hook_with_zero_step: bucket ", "that the ZeroRedundancyOptimizer was not given"});
}

TEST(ZeroArguments, ARankOutsideTheGroup) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  const idist::Group g = idist::new_group({0});
  if (rank() == 0) {
    idist::ZeroRedundancyOptimizer opt(params_of(), adam_factory(), {.group = g});
    EXPECT_EQ(opt.owners(), std::vector<int>(6, 0));
  } else {
    expect_value_error([&] { idist::ZeroRedundancyOptimizer(params_of(), adam_factory(), {.group = g}); },
                       "is not a member of the group [0]");
  }
}

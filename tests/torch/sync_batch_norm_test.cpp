// idist::nn::SyncBatchNorm and auto_model's sync_bn (issue 14, item 3): ranks holding batches of
// different sizes (one of them possibly empty) get, in float64 to 1e-9, the outputs, input
// gradients, summed weight / bias gradients and running statistics of torch::nn::BatchNorm on the
// concatenated global batch; eval mode uses the running statistics; the conversion of a module
// tree. Runs at any world size (serial: plain batch norm, which must match as well).
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "idist/idist.hpp"

namespace {

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

constexpr double kTol = 1e-9;

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.numel() == 0 && b.numel() == 0) return 0.0;
  return (a - b).abs().max().item<double>();
}

// Rows of rank r in a global batch: sizes[r] rows starting at offsets[r].
struct Split {
  std::vector<std::int64_t> sizes, offsets;
  std::int64_t total = 0;
  explicit Split(std::vector<std::int64_t> s) : sizes(std::move(s)) {
    for (auto n : sizes) {
      offsets.push_back(total);
      total += n;
    }
  }
  torch::Tensor mine(const torch::Tensor& global) const { return global.narrow(0, offsets[rank()], sizes[rank()]); }
};

// Per-rank batch sizes that differ: 3, 5, 7, ...
Split uneven() {
  std::vector<std::int64_t> s;
  for (int r = 0; r < ws(); ++r) s.push_back(3 + 2 * r);
  return Split(s);
}

// Runs `steps` training forwards / backwards of `sync` on this rank's rows and of `ref` (a
// torch::nn::BatchNorm{1,2,3}d with the same options) on the global batch, comparing outputs,
// input gradients, weight / bias gradients summed over the ranks and the running statistics; then
// compares eval mode.
template <class RefImpl>
void compare_with_batch_norm(RefImpl& ref, idist::nn::SyncBatchNormImpl& sync, const Split& split,
                             std::vector<std::int64_t> inner, int steps = 3) {
  ASSERT_EQ(ref.options.num_features(), sync.options.num_features());
  std::vector<std::int64_t> shape{split.total, ref.options.num_features()};
  shape.insert(shape.end(), inner.begin(), inner.end());
  torch::manual_seed(1234);  // the same global data on every rank
  if (ref.options.affine()) {
    torch::NoGradGuard no_grad;
    ref.weight.uniform_(0.5, 1.5);
    ref.bias.uniform_(-0.5, 0.5);
    sync.weight.copy_(ref.weight);
    sync.bias.copy_(ref.bias);
  }
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const auto X = torch::randn(shape, torch::kDouble) * (1.0 + step) + 0.5 * step;
    const auto G = torch::randn(shape, torch::kDouble);  // upstream gradient
    auto x_ref = X.clone().requires_grad_(true);
    auto y_ref = ref.forward(x_ref);
    (y_ref * G).sum().backward();
    auto x = split.mine(X).clone().requires_grad_(true);
    auto y = sync.forward(x);
    (y * split.mine(G)).sum().backward();

    EXPECT_LT(max_abs(y, split.mine(y_ref)), kTol) << "output";
    ASSERT_TRUE(x.grad().defined());
    EXPECT_LT(max_abs(x.grad(), split.mine(x_ref.grad())), kTol) << "input gradient";
    if (ref.options.affine()) {
      struct Pair {
        torch::Tensor mine, theirs;
        const char* what;
      };
      for (auto [mine, theirs, what] :
           std::vector<Pair>{{sync.weight, ref.weight, "weight"}, {sync.bias, ref.bias, "bias"}}) {
        auto g = mine.grad().defined() ? mine.grad().clone() : torch::zeros_like(mine);
        g = idist::all_reduce(g);  // the global batch's gradient is the sum of the ranks'
        EXPECT_LT(max_abs(g, theirs.grad()), kTol) << what << " gradient summed over the ranks";
        mine.mutable_grad() = torch::Tensor();
        theirs.mutable_grad() = torch::Tensor();
      }
    }
    if (ref.options.track_running_stats()) {
      EXPECT_LT(max_abs(sync.running_mean, ref.running_mean), kTol) << "running_mean";
      EXPECT_LT(max_abs(sync.running_var, ref.running_var), kTol) << "running_var";
      EXPECT_EQ(sync.num_batches_tracked.item<std::int64_t>(), ref.num_batches_tracked.template item<std::int64_t>());
    }
  }
  // Eval mode: running statistics (or, without them, each rank's own batch, as torch does).
  ref.eval();
  sync.eval();
  const auto X = torch::randn(shape, torch::kDouble);
  if (ref.options.track_running_stats()) {
    const auto y = sync.forward(split.mine(X));
    EXPECT_LT(max_abs(y, split.mine(ref.forward(X))), kTol) << "eval output";
  }
  ref.train();
  sync.train();
}

TEST(SyncBatchNorm, MatchesBatchNorm2dOnTheGlobalBatch) {
  const Split split = uneven();
  torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(4).momentum(0.3));
  idist::nn::SyncBatchNorm sync(idist::nn::SyncBatchNormOptions(4).momentum(0.3));
  ref->to(torch::kDouble);
  sync->to(torch::kDouble);
  compare_with_batch_norm(*ref, *sync, split, {3, 5});
}

TEST(SyncBatchNorm, MatchesWithAnEmptyBatchOnOneRank) {
  std::vector<std::int64_t> sizes;
  for (int r = 0; r < ws(); ++r) sizes.push_back(r == 1 ? 0 : 4 + r);
  const Split split(sizes);
  torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(3));
  idist::nn::SyncBatchNorm sync(3);
  ref->to(torch::kDouble);
  sync->to(torch::kDouble);
  compare_with_batch_norm(*ref, *sync, split, {2, 2}, 2);
}

TEST(SyncBatchNorm, MatchesBatchNorm1dAndBatchNorm3d) {
  const Split split = uneven();
  {
    SCOPED_TRACE("[N, C]");
    torch::nn::BatchNorm1d ref(5);
    idist::nn::SyncBatchNorm sync(5);
    ref->to(torch::kDouble);
    sync->to(torch::kDouble);
    compare_with_batch_norm(*ref, *sync, split, {}, 2);
  }
  {
    SCOPED_TRACE("[N, C, L]");
    torch::nn::BatchNorm1d ref(2);
    idist::nn::SyncBatchNorm sync(2);
    ref->to(torch::kDouble);
    sync->to(torch::kDouble);
    compare_with_batch_norm(*ref, *sync, split, {7}, 2);
  }
  {
    SCOPED_TRACE("[N, C, D, H, W]");
    torch::nn::BatchNorm3d ref(torch::nn::BatchNorm3dOptions(3).momentum(0.5));
    idist::nn::SyncBatchNorm sync(idist::nn::SyncBatchNormOptions(3).momentum(0.5));
    ref->to(torch::kDouble);
    sync->to(torch::kDouble);
    compare_with_batch_norm(*ref, *sync, split, {2, 3, 2}, 2);
  }
}

TEST(SyncBatchNorm, MatchesWithOtherOptions) {
  const Split split = uneven();
  {
    SCOPED_TRACE("momentum = nullopt (cumulative average), eps = 1e-3");
    torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(2).momentum(c10::nullopt).eps(1e-3));
    idist::nn::SyncBatchNorm sync(idist::nn::SyncBatchNormOptions(2).momentum(c10::nullopt).eps(1e-3));
    ref->to(torch::kDouble);
    sync->to(torch::kDouble);
    compare_with_batch_norm(*ref, *sync, split, {3, 3}, 3);
  }
  {
    SCOPED_TRACE("affine = false");
    torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(2).affine(false));
    idist::nn::SyncBatchNorm sync(idist::nn::SyncBatchNormOptions(2).affine(false));
    EXPECT_EQ(sync->parameters().size(), 0u);
    ref->to(torch::kDouble);
    sync->to(torch::kDouble);
    compare_with_batch_norm(*ref, *sync, split, {3, 2}, 2);
  }
  {
    SCOPED_TRACE("track_running_stats = false");
    torch::nn::BatchNorm2d ref(torch::nn::BatchNorm2dOptions(2).track_running_stats(false));
    idist::nn::SyncBatchNorm sync(idist::nn::SyncBatchNormOptions(2).track_running_stats(false));
    EXPECT_EQ(sync->buffers().size(), 0u);
    ref->to(torch::kDouble);
    sync->to(torch::kDouble);
    compare_with_batch_norm(*ref, *sync, split, {3, 2}, 2);
  }
}

TEST(SyncBatchNorm, Float32IsCloseToBatchNorm) {
  const Split split = uneven();
  torch::manual_seed(5);
  const auto X = torch::randn({split.total, 3, 4, 4});
  torch::nn::BatchNorm2d ref(3);
  idist::nn::SyncBatchNorm sync(3);
  auto y = sync(split.mine(X));
  EXPECT_TRUE(y.allclose(split.mine(ref(X)), 1e-4, 1e-5));
  EXPECT_TRUE(sync->running_var.allclose(ref->running_var, 1e-5, 1e-6));
}

TEST(SyncBatchNorm, BadInputRaisesValueError) {
  EXPECT_THROW(idist::nn::SyncBatchNorm(0), idist::ValueError);
  EXPECT_THROW(idist::nn::SyncBatchNorm(idist::nn::SyncBatchNormOptions(2).eps(-1)), idist::ValueError);
  idist::nn::SyncBatchNorm sync(3);
  try {
    sync(torch::randn({4}));
    ADD_FAILURE() << "expected ValueError for a 1-D input";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 2 dimensions"), std::string::npos) << e.what();
  }
  try {
    sync(torch::randn({4, 2, 3}));
    ADD_FAILURE() << "expected ValueError for 2 channels";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("expected 3 channels"), std::string::npos) << e.what();
  }
  if (ws() > 2) {  // a group this rank is not in (ranks 0 and 1; rank 2 must not run the module)
    idist::nn::SyncBatchNorm others(idist::nn::SyncBatchNormOptions(3).group(idist::Group{0, 1}));
    if (rank() == 2) EXPECT_THROW(others(torch::randn({4, 3})), idist::ValueError);
  }
  // One value per channel over the whole group (rank 0 holds one row, the others none).
  if (ws() > 1) {
    try {
      sync(torch::randn({rank() == 0 ? 1 : 0, 3}));
      ADD_FAILURE() << "expected ValueError for one value per channel";
    } catch (const idist::ValueError& e) {
      EXPECT_NE(std::string(e.what()).find("more than 1 value per channel"), std::string::npos) << e.what();
    }
  }
}

TEST(SyncBatchNorm, CloneAndPrint) {
  idist::nn::SyncBatchNorm sync(idist::nn::SyncBatchNormOptions(3).momentum(0.2));
  auto copy = std::dynamic_pointer_cast<idist::nn::SyncBatchNormImpl>(sync->clone());
  ASSERT_TRUE(copy);
  EXPECT_FALSE(copy->weight.is_same(sync->weight));
  EXPECT_TRUE(copy->weight.equal(sync->weight));
  std::ostringstream os;
  os << *sync;
  EXPECT_EQ(os.str(), "idist::nn::SyncBatchNorm(3, eps=1e-05, momentum=0.2, affine=true, track_running_stats=true)");
}

// ---------------------------------------------------------------------------------------------
// convert_sync_batchnorm / auto_model(sync_bn)

struct MemberBn : torch::nn::Module {
  MemberBn() {
    fc = register_module("fc", torch::nn::Linear(3, 3));
    bn = register_module("bn", torch::nn::BatchNorm1d(3));
  }
  torch::nn::Linear fc{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
};

// A module reaching its BatchNorm through the registry only (replace_module works).
struct RegistryBn : torch::nn::Module {
  RegistryBn() { register_module("bn", torch::nn::BatchNorm2d(2)); }
  torch::Tensor forward(const torch::Tensor& x) {
    return named_children()["bn"]->as<idist::nn::SyncBatchNorm>()
               ? named_children()["bn"]->as<idist::nn::SyncBatchNorm>()->forward(x)
               : named_children()["bn"]->as<torch::nn::BatchNorm2d>()->forward(x);
  }
};

TEST(ConvertSyncBatchNorm, ReplacesContainerEntriesSharingTheTensors) {
  torch::nn::Sequential seq(torch::nn::Linear(4, 4), torch::nn::BatchNorm1d(4));
  torch::nn::ModuleList list(torch::nn::BatchNorm2d(2), torch::nn::ReLU());
  torch::nn::ModuleDict dict(std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>{
      {"norm", torch::nn::BatchNorm3d(5).ptr()}});
  auto outer = std::make_shared<torch::nn::Module>();
  outer->register_module("seq", seq);
  outer->register_module("inner", torch::nn::Sequential(torch::nn::ReLU()))->register_module("list", list);
  outer->register_module("dict", dict);
  auto registry = std::make_shared<RegistryBn>();
  outer->register_module("registry", registry);
  const auto names_before = outer->named_parameters().keys();
  const auto buffers_before = outer->named_buffers().keys();
  const auto old_weight = seq[1]->as<torch::nn::BatchNorm1d>()->weight;
  outer->eval();

  EXPECT_EQ(idist::nn::convert_sync_batchnorm(*outer), 4u);
  auto* s = seq[1]->as<idist::nn::SyncBatchNorm>();
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->weight.is_same(old_weight));  // an optimizer built earlier keeps working
  EXPECT_FALSE(s->is_training());
  EXPECT_NE(seq->named_children()["1"]->as<idist::nn::SyncBatchNorm>(), nullptr);
  EXPECT_NE(list[0]->as<idist::nn::SyncBatchNorm>(), nullptr);
  EXPECT_NE(list->named_children()["0"]->as<idist::nn::SyncBatchNorm>(), nullptr);
  EXPECT_NE(dict["norm"]->as<idist::nn::SyncBatchNorm>(), nullptr);
  EXPECT_NE(registry->named_children()["bn"]->as<idist::nn::SyncBatchNorm>(), nullptr);
  EXPECT_EQ(outer->named_parameters().keys(), names_before);
  EXPECT_EQ(outer->named_buffers().keys(), buffers_before);
  outer->train();
  EXPECT_EQ(seq->forward(torch::randn({6, 4})).sizes(), (std::vector<std::int64_t>{6, 4}));  // through the new entry
  EXPECT_EQ(registry->forward(torch::randn({3, 2, 2, 2})).sizes(), (std::vector<std::int64_t>{3, 2, 2, 2}));
}

TEST(ConvertSyncBatchNorm, NamesTheModulesItCannotReplace) {
  torch::nn::Sequential seq(torch::nn::BatchNorm1d(3));
  torch::nn::ModuleList holder(std::make_shared<MemberBn>());
  auto root = std::make_shared<torch::nn::Module>();
  root->register_module("seq", seq);
  root->register_module("holder", holder);
  try {
    idist::nn::convert_sync_batchnorm(*root);
    ADD_FAILURE() << "expected ValueError";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("holder.0.bn"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("seq.0"), std::string::npos) << msg;
  }
  EXPECT_NE(seq[0]->as<torch::nn::BatchNorm1d>(), nullptr) << "nothing is changed when one cannot be replaced";
  EXPECT_THROW(idist::nn::convert_sync_batchnorm(*torch::nn::BatchNorm2d(2)), idist::ValueError);
}

TEST(AutoModel, SyncBnReplacesBatchNormWhenDistributed) {
  torch::nn::Sequential with_bn(torch::nn::Linear(4, 4), torch::nn::BatchNorm1d(4));
  torch::nn::Sequential without_bn(torch::nn::Linear(4, 4));
  EXPECT_NO_THROW(idist::auto_model(without_bn, {.sync_bn = true}));
  idist::auto_model(with_bn, {.sync_bn = true});
  EXPECT_EQ(with_bn[1]->as<idist::nn::SyncBatchNorm>() != nullptr, ws() > 1);  // ignite: serial ignores it
  EXPECT_EQ(with_bn[1]->as<torch::nn::BatchNorm1d>() != nullptr, ws() == 1);
  torch::nn::Sequential kept(torch::nn::Linear(4, 4), torch::nn::BatchNorm1d(4));
  idist::auto_model(kept);  // sync_bn = false: BatchNorm stays per-rank
  EXPECT_NE(kept[1]->as<torch::nn::BatchNorm1d>(), nullptr);
}

TEST(AutoModel, SyncBnNamesUnreplaceableModulesOnEveryRank) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  auto net = std::make_shared<MemberBn>();
  try {
    idist::auto_model(net, {.sync_bn = true});
    ADD_FAILURE() << "expected ValueError";
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("sync_bn"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bn (torch::nn::BatchNorm1d"), std::string::npos) << msg;
  }
}

// DDP with sync_bn on ranks holding batches of different sizes trains exactly like one process on
// the global batch: loss = sum(y * G) over the rank's rows, gradients averaged by auto_model, so
// the learning rate is scaled by the world size to match the global sum.
TEST(AutoModel, SyncBnTrainsLikeTheGlobalBatch) {
  const Split split = uneven();
  torch::manual_seed(42);
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 3, 3).padding(1)), torch::nn::BatchNorm2d(3),
                            torch::nn::ReLU(), torch::nn::Flatten(), torch::nn::Linear(3 * 4 * 4, 2),
                            torch::nn::BatchNorm1d(2));
  net->to(torch::kDouble);
  auto ref = std::dynamic_pointer_cast<torch::nn::SequentialImpl>(net->clone());
  ASSERT_TRUE(ref);
  const torch::Device device = idist::device();  // where auto_model puts the model
  ref->to(device);
  net = idist::auto_model(net, {.sync_bn = true, .bucket_cap_mb = 0.001});
  torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05 * ws()).momentum(0.9));
  torch::optim::SGD ref_opt(ref->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int step = 0; step < 4; ++step) {
    const auto X = torch::randn({split.total, 2, 4, 4}, torch::kDouble).to(device);
    const auto G = torch::randn({split.total, 2}, torch::kDouble).to(device);
    opt.zero_grad();
    (net->forward(split.mine(X)) * split.mine(G)).sum().backward();
    opt.step();
    ref_opt.zero_grad();
    (ref->forward(X) * G).sum().backward();
    ref_opt.step();
  }
  auto p = net->named_parameters();
  for (const auto& q : ref->named_parameters()) EXPECT_LT(max_abs(p[q.key()], q.value()), kTol) << q.key();
  auto b = net->named_buffers();
  for (const auto& q : ref->named_buffers())
    EXPECT_LT(max_abs(b[q.key()].to(torch::kDouble), q.value().to(torch::kDouble)), kTol) << q.key();
}

}  // namespace

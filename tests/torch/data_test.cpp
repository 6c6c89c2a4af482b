// Data loading of the LibTorch layer: ignite's auto_dataloader scaling rules, DistributedSampler
// (torch's semantics), WeightedRandomSampler, DistributedProxySampler (ignite's test), and
// auto_dataloader end to end at any world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <torch/cuda.h>

#include "idist/idist.hpp"

namespace {

using idist::ValueError;

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

std::vector<std::size_t> one_epoch(torch::data::samplers::Sampler<>& s, std::size_t batch = 3) {
  std::vector<std::size_t> out;
  s.reset(torch::nullopt);
  while (auto b = s.next(batch)) out.insert(out.end(), b->begin(), b->end());
  return out;
}

// ignite's test_auto.py cases (ws in {1, 2, 4}, nproc = ws; batch 1 / 10; workers 1 / 10) and the
// edges of the rules: batch == ws, batch < ws, workers < nproc, several nodes.
TEST(AutoDataloaderRules, ScalingMatrix) {
  struct Case {
    int ws, nproc;
    std::size_t batch, workers;
    std::size_t want_batch, want_workers;
  };
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 1, 1},   {1, 1, 10, 10, 10, 10}, {2, 2, 1, 1, 1, 1},  {2, 2, 10, 10, 5, 5},   {4, 4, 1, 1, 1, 1},
      {4, 4, 10, 10, 2, 3}, {3, 3, 10, 10, 3, 4},   {4, 4, 4, 4, 1, 1},  {4, 4, 3, 3, 3, 3},     {8, 4, 64, 10, 8, 3},
      {8, 4, 64, 3, 8, 3},  {8, 4, 7, 4, 7, 1},     {2, 1, 10, 0, 5, 0}, {16, 8, 256, 16, 16, 2}};
  for (const auto& c : cases) {
    idist::DataLoaderOptions o;
    o.batch_size = c.batch;
    o.num_workers = c.workers;
    const auto r = idist::detail::adapt_loader_options(o, c.ws, c.nproc, idist::Device{});
    EXPECT_EQ(r.batch_size, c.want_batch) << "ws " << c.ws << " batch " << c.batch;
    EXPECT_EQ(r.num_workers, c.want_workers) << "nproc " << c.nproc << " workers " << c.workers;
    EXPECT_EQ(r.pin_memory, false);
  }
}

TEST(AutoDataloaderRules, PinMemoryFollowsDeviceUnlessGiven) {
  idist::DataLoaderOptions o;
  const idist::Device cuda{idist::DeviceType::CUDA, 0};
  EXPECT_EQ(idist::detail::adapt_loader_options(o, 2, 2, cuda).pin_memory, true);
  EXPECT_EQ(idist::detail::adapt_loader_options(o, 1, 1, cuda).pin_memory, true);
  EXPECT_EQ(idist::detail::adapt_loader_options(o, 2, 2, idist::Device{}).pin_memory, false);
  o.pin_memory = false;
  EXPECT_EQ(idist::detail::adapt_loader_options(o, 2, 2, cuda).pin_memory, false);
  o.pin_memory = true;
  EXPECT_EQ(idist::detail::adapt_loader_options(o, 2, 2, idist::Device{}).pin_memory, true);
}

TEST(AutoDataloaderRules, BadOptions) {
  idist::DataLoaderOptions o;
  o.batch_size = 0;
  EXPECT_THROW(idist::detail::adapt_loader_options(o, 2, 2, idist::Device{}), ValueError);
  o.batch_size = 4;
  EXPECT_THROW(idist::detail::adapt_loader_options(o, 0, 1, idist::Device{}), ValueError);
}

TEST(DistributedSampler, PaddingShardsAndOrder) {
  // 10 examples over 3 replicas: 4 each, 2 padded from the start, rank r takes r, r + 3, ...
  std::vector<std::vector<std::size_t>> per_rank;
  for (int r = 0; r < 3; ++r) {
    idist::DistributedSampler s(10, 3, r, /*shuffle=*/false);
    EXPECT_EQ(s.num_samples(), 4u);
    EXPECT_EQ(s.total_size(), 12u);
    per_rank.push_back(one_epoch(s));
  }
  EXPECT_EQ(per_rank[0], (std::vector<std::size_t>{0, 3, 6, 9}));
  EXPECT_EQ(per_rank[1], (std::vector<std::size_t>{1, 4, 7, 0}));
  EXPECT_EQ(per_rank[2], (std::vector<std::size_t>{2, 5, 8, 1}));

  // drop_last: floor(10 / 3) each, all distinct.
  std::set<std::size_t> seen;
  for (int r = 0; r < 3; ++r) {
    idist::DistributedSampler s(10, 3, r, false, 0, /*drop_last=*/true);
    auto idx = one_epoch(s);
    EXPECT_EQ(idx.size(), 3u);
    seen.insert(idx.begin(), idx.end());
  }
  EXPECT_EQ(seen.size(), 9u);
}

TEST(DistributedSampler, ShuffleIsSharedAcrossRanksAndChangesWithEpoch) {
  const std::size_t n = 50;
  auto epoch_union = [&](std::uint64_t epoch, std::uint64_t seed) {
    std::vector<std::size_t> interleaved(n);
    for (int r = 0; r < 5; ++r) {
      idist::DistributedSampler s(n, 5, r, true, seed);
      s.set_epoch(epoch);
      auto idx = one_epoch(s, 4);
      EXPECT_EQ(idx.size(), 10u);
      for (std::size_t j = 0; j < idx.size(); ++j) interleaved[j * 5 + std::size_t(r)] = idx[j];
    }
    return interleaved;
  };
  auto e0 = epoch_union(0, 0);
  auto sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(sorted[i], i);  // one permutation shared by the ranks
  EXPECT_EQ(e0, epoch_union(0, 0));                             // deterministic
  EXPECT_NE(e0, epoch_union(1, 0));                             // set_epoch reshuffles
  EXPECT_EQ(epoch_union(1, 0), epoch_union(0, 1));              // seeded with seed + epoch
}

TEST(DistributedSampler, DefaultsAndErrors) {
  idist::DistributedSampler s(20);
  EXPECT_EQ(s.num_replicas(), ws());
  EXPECT_EQ(s.rank(), rank());
  const std::string msg = [] {
    try {
      idist::DistributedSampler bad(10, 2, 2);
    } catch (const ValueError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("Invalid rank 2, rank should be in the interval [0, 1]"), std::string::npos) << msg;
  EXPECT_THROW(idist::DistributedSampler(10, 0, 0), ValueError);
}

TEST(WeightedRandomSampler, DrawsByWeight) {
  auto w = torch::zeros({10}, torch::kDouble);
  w[3] = 1.0;
  w[7] = 3.0;
  idist::WeightedRandomSampler s(w, 1000);
  EXPECT_EQ(s.size(), 1000u);
  torch::manual_seed(0);
  auto idx = one_epoch(s, 64);
  ASSERT_EQ(idx.size(), 1000u);
  std::map<std::size_t, int> count;
  for (auto i : idx) ++count[i];
  EXPECT_EQ(count.size(), 2u);
  EXPECT_GT(count[7], 2 * count[3]);  // about 3:1
  // Reproducible from the global generator.
  torch::manual_seed(0);
  EXPECT_EQ(one_epoch(s, 7), idx);

  EXPECT_THROW(idist::WeightedRandomSampler(torch::ones({2, 2}), 3), ValueError);
  EXPECT_THROW(idist::WeightedRandomSampler(-torch::ones({4}), 3), ValueError);
  EXPECT_THROW(idist::WeightedRandomSampler(torch::ones({4}), 0), ValueError);
  EXPECT_THROW(idist::WeightedRandomSampler(torch::ones({4}), 5, /*replacement=*/false), ValueError);
}

// ignite's test_dist_proxy_sampler, plus the exact order (rank r gets every 8th index from r).
TEST(DistributedProxySampler, UnionOverRanksIsTheWrappedDraw) {
  auto weights = torch::ones({100});
  weights.slice(0, 0, 50) += 1;
  auto sampler = std::make_shared<idist::WeightedRandomSampler>(weights, 200);
  const int replicas = 8;
  std::vector<idist::DistributedProxySampler> proxies;
  for (int r = 0; r < replicas; ++r) proxies.emplace_back(sampler, replicas, r);
  EXPECT_EQ(proxies[0].size(), std::optional<std::size_t>(25));
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    torch::manual_seed(seed);
    const auto truth = one_epoch(*sampler, 200);
    std::vector<std::size_t> union_of_ranks;
    for (int r = 0; r < replicas; ++r) {
      proxies[std::size_t(r)].set_epoch(seed);
      const auto mine = one_epoch(proxies[std::size_t(r)], 7);
      ASSERT_EQ(mine.size(), 25u);
      for (std::size_t j = 0; j < mine.size(); ++j) ASSERT_EQ(mine[j], truth[j * replicas + std::size_t(r)]);
      union_of_ranks.insert(union_of_ranks.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(std::set<std::size_t>(union_of_ranks.begin(), union_of_ranks.end()),
              std::set<std::size_t>(truth.begin(), truth.end()))
        << "seed " << seed;
  }
}

TEST(DistributedProxySampler, PadsByDrawingAgain) {
  // 100 indices over 8 replicas: 13 each, 104 in all: the draw plus 4 of a second draw.
  auto sampler = std::make_shared<idist::WeightedRandomSampler>(torch::rand({30}) + 0.1, 100);
  torch::manual_seed(5);
  auto first = one_epoch(*sampler, 100);
  auto second = one_epoch(*sampler, 100);
  std::vector<std::size_t> all(first);
  all.insert(all.end(), second.begin(), second.begin() + 4);
  for (int r = 0; r < 8; ++r) {
    idist::DistributedProxySampler p(sampler, 8, r);
    p.set_epoch(5);
    const auto mine = one_epoch(p, 5);
    ASSERT_EQ(mine.size(), 13u);
    for (std::size_t j = 0; j < mine.size(); ++j) EXPECT_EQ(mine[j], all[j * 8 + std::size_t(r)]);
  }
}

TEST(DistributedProxySampler, WrapsAnyLibTorchSamplerButNotDistributedOnes) {
  idist::DistributedProxySampler seq(torch::data::samplers::SequentialSampler(10), 4, 1);
  EXPECT_EQ(one_epoch(seq), (std::vector<std::size_t>{1, 5, 9}));  // 12 = 10 + 0, 1 again
  EXPECT_EQ(seq.size(), std::optional<std::size_t>(3));
  EXPECT_THROW(idist::DistributedProxySampler(std::make_shared<idist::DistributedSampler>(10, 2, 0), 2, 0), ValueError);
  EXPECT_THROW(idist::DistributedProxySampler(torch::data::samplers::DistributedRandomSampler(10, 2, 0), 2, 0),
               ValueError);
  EXPECT_THROW(idist::DistributedProxySampler(torch::data::samplers::SequentialSampler(10), 2, 5), ValueError);
}

// A dataset whose examples are their own index, to check what each rank loads.
auto index_dataset(std::int64_t n) {
  return torch::data::datasets::TensorDataset(torch::arange(n, torch::kLong).reshape({n, 1}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

std::vector<std::int64_t> loaded(idist::DataLoader<decltype(index_dataset(1))>& loader) {
  std::vector<std::int64_t> out;
  for (auto& batch : loader) {
    EXPECT_LE(std::size_t(batch.data.size(0)), loader.options().batch_size);
    for (std::int64_t i = 0; i < batch.data.size(0); ++i) out.push_back(batch.data[i][0].item<std::int64_t>());
  }
  return out;
}

TEST(AutoDataloader, ShardsTheDatasetAcrossRanks) {
  const std::int64_t n = 100;
  auto loader = idist::auto_dataloader(index_dataset(n), {.batch_size = 10, .num_workers = 0, .shuffle = true});
  EXPECT_EQ(loader.options().batch_size, ws() <= 10 ? std::size_t(10 / ws()) : std::size_t(10));
  EXPECT_EQ(loader.options().pin_memory, idist::device().type == idist::DeviceType::CUDA);  // ignite's default
  if (ws() > 1) {
    auto* ds = dynamic_cast<idist::DistributedSampler*>(&loader.sampler());
    ASSERT_NE(ds, nullptr);
    EXPECT_EQ(ds->num_replicas(), ws());
    EXPECT_EQ(ds->rank(), rank());
  }
  const std::size_t per_rank = std::size_t((n + ws() - 1) / ws());
  EXPECT_EQ(loader.sampler().size(), std::optional<std::size_t>(per_rank));
  loader.set_epoch(0);
  const auto e0 = loaded(loader);
  EXPECT_EQ(e0.size(), per_rank);
  // Every example is loaded by some rank; padding repeats a few.
  const auto everything = idist::all_gather(torch::tensor(e0));
  std::set<std::int64_t> seen(everything.data_ptr<std::int64_t>(),
                              everything.data_ptr<std::int64_t>() + everything.numel());
  EXPECT_EQ(seen.size(), std::size_t(n));
  EXPECT_EQ(everything.numel(), std::int64_t(per_rank) * ws());
  // A new epoch reshuffles; the same epoch repeats.
  loader.set_epoch(1);
  const auto e1 = loaded(loader);
  EXPECT_NE(e0, e1);
  loader.sampler().set_epoch(0);
  if (ws() > 1) {
    EXPECT_EQ(loaded(loader), e0);
  }
}

// pin_memory pins every batch where CUDA is available and is a no-op elsewhere (PyTorch's rule);
// the batches are the same either way.
TEST(AutoDataloader, PinMemoryPinsTheBatchesWhereCudaIsAvailable) {
  const bool cuda = torch::cuda::is_available();
  auto pinned = idist::auto_dataloader(index_dataset(20), {.batch_size = std::size_t(4 * ws()), .pin_memory = true});
  auto pageable = idist::auto_dataloader(index_dataset(20), {.batch_size = std::size_t(4 * ws()), .pin_memory = false});
  EXPECT_EQ(idist::detail::pins_batches(pinned.options()), cuda);
  EXPECT_FALSE(idist::detail::pins_batches(pageable.options()));
  std::vector<torch::Tensor> a, b;
  for (auto& batch : pinned) {
    EXPECT_EQ(batch.data.is_pinned(), cuda);
    EXPECT_TRUE(batch.data.device().is_cpu());
    a.push_back(batch.data);
  }
  for (auto& batch : pageable) {
    EXPECT_FALSE(batch.data.is_pinned());
    b.push_back(batch.data);
  }
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
}

// The batch types pin_batch reaches: a tensor, an Example's data and target, a vector of Examples.
// Without CUDA nothing can be pinned: the loader must then never ask for it.
TEST(AutoDataloader, PinBatchPinsEveryTensorOfTheBatch) {
  if (!torch::cuda::is_available()) {
    idist::DataLoaderOptions opts;
    opts.pin_memory = true;
    EXPECT_FALSE(idist::detail::pins_batches(opts)) << "pin_memory without CUDA must be a no-op";
    return;
  }
  torch::Tensor t = torch::ones({3});
  idist::detail::pin_batch(t);
  EXPECT_TRUE(t.is_pinned());
  std::vector<torch::data::Example<>> examples{{torch::ones({2}), torch::zeros({1})},
                                               {torch::ones({2}), torch::zeros({1})}};
  idist::detail::pin_batch(examples);
  for (const auto& e : examples) {
    EXPECT_TRUE(e.data.is_pinned());
    EXPECT_TRUE(e.target.is_pinned());
  }
  int untouched = 5;
  idist::detail::pin_batch(untouched);  // other types pass through
  EXPECT_EQ(untouched, 5);
}

TEST(AutoDataloader, UserSamplerIsWrappedInProxy) {
  auto weights = torch::ones({40});
  idist::DataLoaderOptions opts;
  opts.batch_size = 8;
  opts.sampler = std::make_shared<idist::WeightedRandomSampler>(weights, 40);
  auto loader = idist::auto_dataloader(index_dataset(40), opts);
  if (ws() > 1) {
    auto* proxy = dynamic_cast<idist::DistributedProxySampler*>(&loader.sampler());
    ASSERT_NE(proxy, nullptr);
    EXPECT_EQ(proxy->rank(), rank());
    EXPECT_EQ(proxy->num_replicas(), ws());
  }
  loader.set_epoch(3);
  const auto mine = loaded(loader);
  EXPECT_EQ(mine.size(), std::size_t((40 + ws() - 1) / ws()));
  // The ranks' indices interleave into one draw of the wrapped sampler seeded with the epoch
  // (serial: the sampler is used as given, without seeding).
  if (ws() == 1) return;
  torch::manual_seed(3);
  const auto truth = one_epoch(*opts.sampler, 40);
  for (std::size_t j = 0; j < mine.size(); ++j) {
    const std::size_t k = j * std::size_t(ws()) + std::size_t(rank());
    if (k < truth.size()) {
      EXPECT_EQ(std::size_t(mine[j]), truth[k]);
    }
  }
}

TEST(AutoDataloader, NoShuffleAndDropLast) {
  auto loader = idist::auto_dataloader(index_dataset(23),
                                       {.batch_size = std::size_t(4 * ws()), .shuffle = false, .drop_last = true});
  EXPECT_EQ(loader.options().batch_size, 4u);
  const std::size_t per_rank = std::size_t((23 + ws() - 1) / ws());
  EXPECT_EQ(loader.size(), std::optional<std::size_t>(per_rank / 4));
  const auto mine = loaded(loader);
  EXPECT_EQ(mine.size(), per_rank / 4 * 4);
  for (std::size_t j = 0; j < mine.size(); ++j)
    EXPECT_EQ(mine[j], std::int64_t((j * std::size_t(ws()) + std::size_t(rank())) % 23));
}

}  // namespace

namespace {

TEST(AutoDataloader, WorkerThreadsKeepTheShardInOrder) {
  auto loader = idist::auto_dataloader(index_dataset(30),
                                       {.batch_size = std::size_t(5 * ws()), .num_workers = 2, .shuffle = false});
  // ignite divides the workers among the processes of a node when there are at least as many:
  // ceil(2 / nproc_per_node) for nproc_per_node <= 2 (2 ranks on one host: 1; one rank per host, as on
  // the emulated cluster: 2), unchanged for 3 processes on a node.
  const auto nproc = std::size_t(idist::get_nproc_per_node());
  EXPECT_EQ(loader.options().num_workers, nproc <= 2 ? (2 + nproc - 1) / nproc : 2u);
  const auto mine = loaded(loader);
  const std::size_t per_rank = std::size_t((30 + ws() - 1) / ws());
  ASSERT_EQ(mine.size(), per_rank);
  for (std::size_t j = 0; j < mine.size(); ++j)
    EXPECT_EQ(mine[j], std::int64_t((j * std::size_t(ws()) + std::size_t(rank())) % 30));
}

}  // namespace

namespace {

// Examples [1, 3, 2] float and int64 scalar targets, with get() counting its calls; get_stacked()
// (StackedBatchDataset) only in PerBatch, so that the two loaders differ only in the fetch path.
// (map() makes a MapDataset of the class that names itself in Dataset<Self>, hence the template.)
template <class Self>
class Examples : public torch::data::datasets::Dataset<Self> {
 public:
  explicit Examples(std::int64_t n, std::shared_ptr<int> gets)
      : data_(torch::randn({n, 1, 3, 2})), targets_(torch::randint(10, {n}, torch::kLong)), gets_(std::move(gets)) {}
  torch::data::Example<> get(std::size_t i) override {
    ++*gets_;
    return {data_[std::int64_t(i)], targets_[std::int64_t(i)]};
  }
  torch::optional<std::size_t> size() const override { return std::size_t(data_.size(0)); }

 protected:
  torch::Tensor data_, targets_;
  std::shared_ptr<int> gets_;
};

class PerExample : public Examples<PerExample> {
 public:
  using Examples::Examples;
};

class PerBatch : public Examples<PerBatch> {
 public:
  using Examples::Examples;
  torch::data::Example<> get_stacked(c10::ArrayRef<std::size_t> indices) const {
    const auto idx = torch::tensor(std::vector<std::int64_t>(indices.begin(), indices.end()));
    return {data_.index_select(0, idx), targets_.index_select(0, idx)};
  }
};
static_assert(idist::StackedBatchDataset<PerBatch> && !idist::StackedBatchDataset<PerExample>);

void expect_bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()), 0);
}

TEST(AutoDataloader, WholeBatchFetchIsBitwiseThePerExampleStack) {
  const std::int64_t n = 37;  // a short last batch
  torch::manual_seed(5);
  auto gets_stack = std::make_shared<int>(0);
  auto gets_fetch = std::make_shared<int>(0);
  PerExample per_example(n, gets_stack);
  torch::manual_seed(5);
  PerBatch per_batch(n, gets_fetch);
  const idist::DataLoaderOptions opts{.batch_size = std::size_t(4 * ws()), .shuffle = true};
  auto stacked = idist::auto_dataloader(per_example.map(torch::data::transforms::Stack<>()), opts);
  auto fetched = idist::auto_dataloader(per_batch.map(torch::data::transforms::Stack<>()), opts);
  // The TensorDataset of the same data, fetched by index_select, against its per-example Stack.
  torch::manual_seed(5);
  const torch::Tensor all = torch::randn({n, 1, 3, 2});
  using TensorStack = torch::data::transforms::Stack<torch::data::TensorExample>;
  auto tensors = idist::auto_dataloader(torch::data::datasets::TensorDataset(all).map(TensorStack()), opts);
  static_assert(idist::detail::fetches_whole_batches<decltype(per_batch.map(torch::data::transforms::Stack<>()))>());
  static_assert(
      idist::detail::fetches_whole_batches<decltype(torch::data::datasets::TensorDataset(all).map(TensorStack()))>());
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    stacked.set_epoch(epoch);
    fetched.set_epoch(epoch);
    tensors.set_epoch(epoch);
    std::vector<torch::data::Example<>> a, b;
    std::vector<torch::Tensor> c;
    // Serial, the RandomSampler draws from the global generator when an iteration starts.
    torch::manual_seed(77 + epoch);
    for (auto& batch : stacked) a.push_back(batch);
    torch::manual_seed(77 + epoch);
    for (auto& batch : fetched) b.push_back(batch);
    torch::manual_seed(77 + epoch);
    for (auto& batch : tensors) c.push_back(batch.data);
    ASSERT_EQ(a.size(), b.size());
    ASSERT_EQ(a.size(), c.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      expect_bitwise_equal(a[i].data, b[i].data);
      expect_bitwise_equal(a[i].target, b[i].target);
      expect_bitwise_equal(a[i].data, c[i]);  // the same seed drew the same data
    }
  }
  EXPECT_GT(*gets_stack, 0);
  EXPECT_EQ(*gets_fetch, 0);  // every batch came from get_stacked
}

}  // namespace

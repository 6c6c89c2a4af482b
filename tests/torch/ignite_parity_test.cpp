// ignite's own test cases (tests/ignite/distributed/ of pytorch/ignite) replayed on idist, with the
// values of ignite's and PyTorch's tests, and the parity points of issue 13 that run on every rank:
// DistributedSampler against torch.utils.data.DistributedSampler, DistributedProxySampler,
// auto_dataloader's rules, warnings and log line, stream datasets, broadcast of paths and objects,
// has_*_support, new_group, one_rank_first. Runs serially and under mpirun / gloo with 2 and 3 ranks.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <torch/cuda.h>

#include "idist/idist.hpp"

namespace {

using Indices = std::vector<std::size_t>;

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

Indices one_epoch(torch::data::samplers::Sampler<>& s, std::size_t batch = 3) {
  Indices out;
  s.reset(torch::nullopt);
  while (auto b = s.next(batch)) out.insert(out.end(), b->begin(), b->end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Samplers

// torch.utils.data.DistributedSampler(range(n), num_replicas, rank, shuffle, seed, drop_last) after
// set_epoch(epoch), per rank. The shuffled cases come from torch.randperm(n, generator seeded with
// seed + epoch): seed 0 gives [4, 1, 7, 5, 3, 9, 0, 8, 6, 2] and seed 1 [5, 6, 1, 2, 0, 8, 9, 3, 7, 4]
// for n = 10; padding repeats the list's start, drop_last truncates it to a multiple of the replicas.
TEST(IgniteParity, DistributedSamplerMatchesPyTorch) {
  struct Case {
    std::size_t n;
    int replicas;
    bool shuffle;
    std::uint64_t seed;
    bool drop_last;
    std::uint64_t epoch;
    std::vector<Indices> per_rank;
  };
  const std::vector<Case> cases = {
      {10, 2, true, 0, false, 0, {{4, 7, 3, 0, 6}, {1, 5, 9, 8, 2}}},
      {10, 2, true, 0, false, 1, {{5, 1, 0, 9, 7}, {6, 2, 8, 3, 4}}},
      {10, 2, true, 1, false, 0, {{5, 1, 0, 9, 7}, {6, 2, 8, 3, 4}}},  // seeded with seed + epoch
      {10, 3, true, 0, false, 0, {{4, 5, 0, 2}, {1, 3, 8, 4}, {7, 9, 6, 1}}},
      {10, 3, true, 0, true, 0, {{4, 5, 0}, {1, 3, 8}, {7, 9, 6}}},
      {10, 4, true, 0, true, 1, {{5, 0}, {6, 8}, {1, 9}, {2, 3}}},
      {10, 4, false, 0, false, 0, {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}}},
      {2, 5, false, 0, false, 0, {{0}, {1}, {0}, {1}, {0}}},  // padding longer than the data
      {5, 2, false, 0, true, 0, {{0, 2}, {1, 3}}},
  };
  for (const auto& c : cases) {
    for (int r = 0; r < c.replicas; ++r) {
      idist::DistributedSampler s(c.n, c.replicas, r, c.shuffle, c.seed, c.drop_last);
      s.set_epoch(c.epoch);
      EXPECT_EQ(one_epoch(s), c.per_rank[std::size_t(r)])
          << "n=" << c.n << " replicas=" << c.replicas << " rank=" << r << " shuffle=" << c.shuffle
          << " seed=" << c.seed << " drop_last=" << c.drop_last << " epoch=" << c.epoch;
      EXPECT_EQ(s.num_samples(), c.per_rank[std::size_t(r)].size());
    }
  }
}

// Evaluation reads only the unpadded prefix of each rank's indices: every example exactly once.
TEST(IgniteParity, UnpaddedIndicesCountEveryExampleOnce) {
  for (std::size_t n : {0u, 1u, 7u, 10u, 23u}) {
    for (int replicas : {1, 2, 3, 4, 8}) {
      std::multiset<std::size_t> seen;
      for (int r = 0; r < replicas; ++r) {
        idist::DistributedSampler s(n, replicas, r, /*shuffle=*/true, 3);
        const Indices mine = one_epoch(s);
        ASSERT_LE(s.unpadded_size(), mine.size());
        seen.insert(mine.begin(), mine.begin() + std::ptrdiff_t(s.unpadded_size()));
      }
      EXPECT_EQ(seen.size(), n) << "n=" << n << " replicas=" << replicas;
      for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(seen.count(i), 1u) << "index " << i << " of n=" << n;
    }
  }
}

// ignite's DistributedProxySampler over SequentialSampler(10) with 4 replicas: 12 indices (the sampler
// drawn twice, truncated), rank r every 4th from r.
TEST(IgniteParity, ProxySamplerOverSequentialSampler) {
  const std::vector<Indices> want = {{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}};
  for (int r = 0; r < 4; ++r) {
    idist::DistributedProxySampler p(torch::data::samplers::SequentialSampler(10), 4, r);
    EXPECT_EQ(one_epoch(p), want[std::size_t(r)]) << "rank " << r;
  }
}

// ---------------------------------------------------------------------------------------------
// auto_dataloader

// ignite's _test_auto_dataloader: (world size, nproc per node, batch, workers) -> (batch, workers).
TEST(IgniteParity, AutoDataloaderScaling) {
  struct Case {
    int ws, nproc;
    std::size_t batch, workers, want_batch, want_workers;
  };
  for (const Case& c : std::vector<Case>{{4, 4, 10, 2, 2, 2},
                                         {4, 4, 10, 10, 2, 3},
                                         {2, 2, 10, 2, 5, 1},
                                         {1, 1, 10, 2, 10, 2},
                                         {4, 4, 1, 1, 1, 1},
                                         {2, 2, 1, 10, 1, 5}}) {
    idist::DataLoaderOptions o;
    o.batch_size = c.batch;
    o.num_workers = c.workers;
    const auto r = idist::detail::adapt_loader_options(o, c.ws, c.nproc, idist::Device{});
    EXPECT_EQ(r.batch_size, c.want_batch) << c.ws << " " << c.nproc << " " << c.batch << " " << c.workers;
    EXPECT_EQ(r.num_workers, c.want_workers) << c.ws << " " << c.nproc << " " << c.batch << " " << c.workers;
  }
}

auto index_dataset(std::int64_t n) {
  return torch::data::datasets::TensorDataset(torch::arange(n, torch::kLong).reshape({n, 1}))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

template <class Loader>
std::vector<std::int64_t> loaded(Loader& loader, std::size_t max_batches = SIZE_MAX) {
  std::vector<std::int64_t> out;
  std::size_t batches = 0;
  for (auto& batch : loader) {
    for (std::int64_t i = 0; i < batch.data.size(0); ++i) out.push_back(batch.data[i][0].template item<std::int64_t>());
    if (++batches == max_batches) break;
  }
  return out;
}

// ignite/distributed/auto.py, auto_dataloader(): with world size 1 the kwargs reach
// torch.utils.data.DataLoader unchanged, and DataLoader's shuffle defaults to False; with world size
// > 1 and no sampler, `kwargs.pop("shuffle", True)` goes to the DistributedSampler. An explicit shuffle
// is kept either way.
TEST(IgniteParity, AutoDataloaderShuffleDefaults) {
  for (int world_size : {1, 2, 4}) {
    const auto unset = idist::detail::adapt_loader_options({}, world_size, 1, idist::Device{});
    EXPECT_EQ(unset.shuffle, std::optional<bool>(world_size > 1)) << "world size " << world_size;
    for (bool given : {false, true})
      EXPECT_EQ(idist::detail::adapt_loader_options({.shuffle = given}, world_size, 1, idist::Device{}).shuffle,
                std::optional<bool>(given))
          << "world size " << world_size << ", shuffle " << given;
  }
  const std::int64_t n = 64;
  auto by_default = idist::auto_dataloader(index_dataset(n), {.batch_size = std::size_t(4 * ws())});
  EXPECT_EQ(by_default.options().shuffle, std::optional<bool>(ws() > 1));
  if (ws() == 1) {
    std::vector<std::int64_t> in_order(n);
    for (std::int64_t i = 0; i < n; ++i) in_order[std::size_t(i)] = i;
    EXPECT_EQ(loaded(by_default), in_order) << "serial, shuffle unset: the dataset's order";
    auto shuffled = idist::auto_dataloader(index_dataset(n), {.batch_size = 4, .shuffle = true});
    EXPECT_NE(loaded(shuffled), in_order) << "serial, shuffle = true: a permutation";
  } else {
    auto* s = dynamic_cast<idist::DistributedSampler*>(&by_default.sampler());
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(s->shuffle());
  }
}

// A user's own sampler that knows its epoch but does not shard: the even indices below 2 * n.
class EvenIndices : public idist::EpochSampler {
 public:
  explicit EvenIndices(std::size_t n) : n_(n) {}
  void set_epoch(std::uint64_t epoch) override { epoch_ = epoch; }
  std::uint64_t epoch() const override { return epoch_; }
  std::optional<std::size_t> size() const override { return n_; }
  void reset(torch::optional<std::size_t> = torch::nullopt) override { next_ = 0; }
  torch::optional<std::vector<std::size_t>> next(std::size_t batch) override {
    if (next_ >= n_) return torch::nullopt;
    std::vector<std::size_t> out;
    for (; next_ < n_ && out.size() < batch; ++next_) out.push_back(2 * next_);
    return out;
  }
  void save(torch::serialize::OutputArchive&) const override {}
  void load(torch::serialize::InputArchive&) override {}

 private:
  std::size_t n_;
  std::size_t next_ = 0;
  std::uint64_t epoch_ = 0;
};

// ignite wraps any sampler that is not a DistributedSampler in DistributedProxySampler.
TEST(IgniteParity, UserEpochSamplerIsShardedThroughTheProxy) {
  idist::DataLoaderOptions opts;
  opts.batch_size = std::size_t(2 * ws());
  opts.sampler = std::make_shared<EvenIndices>(10);  // 0, 2, ..., 18 of 20 examples
  auto loader = idist::auto_dataloader(index_dataset(20), opts);
  if (ws() > 1) {
    auto* proxy = dynamic_cast<idist::DistributedProxySampler*>(&loader.sampler());
    ASSERT_NE(proxy, nullptr);
    EXPECT_EQ(proxy->sampler(), opts.sampler);
  }
  const auto mine = loaded(loader);
  const std::size_t per_rank = (10 + std::size_t(ws()) - 1) / std::size_t(ws());
  ASSERT_EQ(mine.size(), per_rank);
  for (std::size_t j = 0; j < per_rank; ++j)  // the even indices, drawn again to pad, dealt out
    EXPECT_EQ(mine[j], std::int64_t(2 * ((j * std::size_t(ws()) + std::size_t(rank())) % 10))) << "position " << j;
}

// ignite's test_auto_dataloader_warning_distributed_sampler.
TEST(IgniteParity, DistributedSamplerPlacementWarnings) {
  if (ws() == 1) GTEST_SKIP() << "ignite checks a given sampler's placement only with world size > 1";
  const auto warnings_of = [](int sampler_replicas, int sampler_rank) {
    idist::DataLoaderOptions opts;
    opts.sampler = std::make_shared<idist::DistributedSampler>(10, sampler_replicas, sampler_rank);
    testing::internal::CaptureStderr();
    auto loader = idist::auto_dataloader(index_dataset(10), opts);
    EXPECT_EQ(&loader.sampler(), opts.sampler.get()) << "a distributed sampler is used as given";
    return testing::internal::GetCapturedStderr();
  };
  EXPECT_EQ(warnings_of(ws(), rank()).find("WARNING"), std::string::npos);
  const int wrong = (rank() + 1) % ws();
  EXPECT_NE(warnings_of(ws(), wrong)
                .find("idist.distributed.auto.auto_dataloader WARNING: Found distributed sampler "
                      "with rank=" +
                      std::to_string(wrong) + ", but process rank is " + std::to_string(rank())),
            std::string::npos);
  EXPECT_NE(warnings_of(ws() + 1, rank())
                .find("Found distributed sampler with num_replicas=" + std::to_string(ws() + 1) +
                      ", but world size is " + std::to_string(ws())),
            std::string::npos);
}

// ignite logs the loader's final arguments once, on rank 0.
TEST(IgniteParity, LoaderOptionsAreLoggedOnRankZero) {
  testing::internal::CaptureStderr();
  auto loader = idist::auto_dataloader(index_dataset(40), {.batch_size = 12, .num_workers = 0, .drop_last = true});
  const std::string log = testing::internal::GetCapturedStderr();
  if (rank() != 0) {
    EXPECT_EQ(log.find("INFO"), std::string::npos) << log;
    return;
  }
  // shuffle unset: true with several ranks (ignite's DistributedSampler), false serially (DataLoader's).
  const std::string sampler = ws() > 1 ? "idist::DistributedSampler" : "torch::data::samplers::SequentialSampler";
  const std::string shuffle = ws() > 1 ? "true" : "false";
  const std::string pin = idist::device().type == idist::DeviceType::CUDA ? "true" : "false";
  EXPECT_NE(log.find("idist.distributed.auto.auto_dataloader INFO: Use data loader options for dataset '"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("': batch_size=" + std::to_string(12 / ws()) + ", num_workers=0, shuffle=" + shuffle +
                     ", drop_last=true, pin_memory=" + pin + ", sampler=" + sampler + "\n"),
            std::string::npos)
      << log;
}

// ---------------------------------------------------------------------------------------------
// Stream datasets (ignite's IterableDataset case): no sampler, the dataset shards itself.

// This rank's share of 0, 1, 2, ...: every world-size-th value from the rank, endless unless `limit`.
class RankStream : public torch::data::datasets::StreamDataset<RankStream, std::vector<torch::data::Example<>>> {
 public:
  explicit RankStream(torch::optional<std::size_t> limit = torch::nullopt) : limit_(limit) {}
  std::vector<torch::data::Example<>> get_batch(std::size_t n) override {
    std::vector<torch::data::Example<>> out;
    for (std::size_t i = 0; i < n; ++i, ++produced_) {
      const auto value = std::int64_t(produced_ * std::size_t(ws()) + std::size_t(rank()));
      out.push_back({torch::tensor({value}), torch::tensor(value)});
    }
    return out;
  }
  torch::optional<std::size_t> size() const override { return limit_; }

 private:
  torch::optional<std::size_t> limit_;
  std::size_t produced_ = 0;
};

// A stream that ends an epoch itself after `count` values of this rank's share.
class EndingStream : public torch::data::datasets::StatefulDataset<EndingStream> {
 public:
  explicit EndingStream(std::size_t count) : count_(count) {}
  torch::optional<std::vector<torch::data::Example<>>> get_batch(std::size_t n) override {
    if (produced_ >= count_) return torch::nullopt;
    std::vector<torch::data::Example<>> out;
    for (; out.size() < n && produced_ < count_; ++produced_) {
      const auto value = std::int64_t(produced_ * std::size_t(ws()) + std::size_t(rank()));
      out.push_back({torch::tensor({value}), torch::tensor(value)});
    }
    return out;
  }
  torch::optional<std::size_t> size() const override { return torch::nullopt; }
  void reset() override { produced_ = 0; }
  void save(torch::serialize::OutputArchive&) const override {}
  void load(torch::serialize::InputArchive&) override {}

 private:
  std::size_t count_;
  std::size_t produced_ = 0;
};

std::vector<std::int64_t> share(std::size_t count) {
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < count; ++i) out.push_back(std::int64_t(i * std::size_t(ws()) + std::size_t(rank())));
  return out;
}

TEST(IgniteParity, StreamWithoutSizeIsPassedThroughWithoutSampler) {
  testing::internal::CaptureStderr();
  auto loader = idist::auto_dataloader(RankStream().map(torch::data::transforms::Stack<>()),
                                       {.batch_size = std::size_t(4 * ws()), .num_workers = 0});
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(loader.options().batch_size, 4u);  // scaled as for any dataset
  EXPECT_EQ(loader.options().sampler, nullptr);
  EXPECT_EQ(loaded(loader, 3), share(12));  // endless: the loop leaves after three batches
  const bool logged = log.find(
                          "idist.distributed.auto.auto_dataloader INFO: Found stream dataset, dataloader will be "
                          "created without any distributed sampling.") != std::string::npos;
  EXPECT_EQ(logged, ws() > 1 && rank() == 0) << log;
  EXPECT_EQ(log.find("sampler=none") != std::string::npos, rank() == 0) << log;
}

TEST(IgniteParity, SizedStreamAndStatefulStreamEndTheirEpochs) {
  auto sized = idist::auto_dataloader(RankStream(7).map(torch::data::transforms::Stack<>()),
                                      {.batch_size = std::size_t(2 * ws())});
  EXPECT_EQ(loaded(sized), share(7));  // 2 + 2 + 2 + 1
  auto ending = idist::auto_dataloader(EndingStream(5).map(torch::data::transforms::Stack<>()),
                                       {.batch_size = std::size_t(3 * ws())});
  EXPECT_EQ(loaded(ending), share(5));
  EXPECT_EQ(loaded(ending), share(5));  // a new epoch resets the dataset
}

// A stream loader pins its batches as a map-style one does (where CUDA is available; else a no-op).
TEST(IgniteParity, StreamLoaderPinsWhereCudaIsAvailable) {
  const bool cuda = torch::cuda::is_available();
  auto loader = idist::auto_dataloader(RankStream(6).map(torch::data::transforms::Stack<>()),
                                       {.batch_size = std::size_t(2 * ws()), .pin_memory = true});
  std::vector<std::int64_t> values;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.is_pinned(), cuda);
    EXPECT_EQ(batch.target.is_pinned(), cuda);
    for (std::int64_t i = 0; i < batch.target.size(0); ++i) values.push_back(batch.target[i].item<std::int64_t>());
  }
  EXPECT_EQ(values, share(6));
}

TEST(IgniteParity, StreamTakesNoSampler) {
  idist::DataLoaderOptions opts;
  opts.sampler = std::make_shared<torch::data::samplers::SequentialSampler>(4);
  EXPECT_THROW(idist::auto_dataloader(RankStream(4).map(torch::data::transforms::Stack<>()), opts), idist::ValueError);
}

// ---------------------------------------------------------------------------------------------
// Collectives and configuration

// ignite's _test_distrib_broadcast on pathlib.Path, with and without safe mode.
TEST(IgniteParity, BroadcastOfPaths) {
  const std::filesystem::path path("tests/ignite/distributed/utils/test_horovod.py");
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "tests/ignite/distributed/utils/test_horovod.py::test_idist_broadcast_hvd";
  const std::filesystem::path long_path(long_text);
  for (int src = 0; src < ws(); ++src) {
    const bool is_src = rank() == src;
    EXPECT_EQ(idist::broadcast(is_src ? path : std::filesystem::path(""), src), path);
    EXPECT_EQ(idist::broadcast(is_src ? long_path : std::filesystem::path(""), src), long_path);
    const auto safe = is_src ? std::optional<std::filesystem::path>(path) : std::nullopt;
    EXPECT_EQ(idist::broadcast(safe, src, /*safe_mode=*/true), path);
  }
  if (ws() > 1) {
    const std::optional<std::filesystem::path> none;
    const std::string msg = [&] {
      try {
        idist::broadcast(none, 0, false);  // ignite's idist.broadcast(None, src=0) on every rank
      } catch (const idist::ValueError& e) {
        return std::string(e.what());
      }
      return std::string();
    }();
    // ignite: "Source data can not be None" on the source, "Argument safe_mode should be True" elsewhere.
    EXPECT_NE(msg.find(rank() == 0 ? "source data can not be std::nullopt" : "safe_mode should be true"),
              std::string::npos)
        << msg;
  }
}

// ignite's newest broadcast of an arbitrary object: the source's bytes, whatever the others pass.
TEST(IgniteParity, BroadcastObjectGivesTheSourcesBytes) {
  for (int src = 0; src < ws(); ++src) {
    std::vector<std::byte> mine(std::size_t(rank() * 1000 + 3));
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = std::byte(i * 7 + std::size_t(rank()));
    const std::vector<std::byte> got = idist::broadcast_object(mine, src);
    ASSERT_EQ(got.size(), std::size_t(src * 1000 + 3)) << "src " << src;
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], std::byte(i * 7 + std::size_t(src))) << i;
  }
  EXPECT_TRUE(idist::broadcast_object(std::span<const std::byte>{}, 0).empty());
  EXPECT_THROW(idist::broadcast_object(std::span<const std::byte>{}, ws()), idist::ValueError);
}

TEST(IgniteParity, SupportFlags) {
  EXPECT_EQ(idist::has_native_dist_support(), !idist::available_backends().empty());
  if (ws() > 1) {
    EXPECT_TRUE(idist::has_native_dist_support());
  }
  EXPECT_FALSE(idist::has_xla_support());
  EXPECT_FALSE(idist::has_hvd_support());
}

// ignite's _test_distrib_group: ranks 1 .. ws-1; at world size 1 (serial) that is [], returned as given.
TEST(IgniteParity, NewGroupOfTheRanksFromOne) {
  std::vector<int> ranks;
  for (int r = 1; r < ws(); ++r) ranks.push_back(r);
  if (!idist::backend()) {
    const idist::Group g = idist::new_group(ranks);
    EXPECT_TRUE(g.ranks().empty());
    EXPECT_EQ(idist::all_reduce(5, idist::ReduceOp::Sum, g), 5);
    return;
  }
  EXPECT_THROW(idist::new_group({}), idist::ValueError);
  if (ws() < 2) GTEST_SKIP() << "ranks 1.. are empty on one rank, a ValueError as checked above";
  const idist::Group g = idist::new_group(ranks);
  const int sum = idist::all_reduce(rank(), idist::ReduceOp::Sum, g);
  EXPECT_EQ(sum, rank() == 0 ? 0 : ws() * (ws() - 1) / 2);  // rank 0 is outside: its input back
}

// ignite's test_one_rank_first: the designated rank creates the file, every other rank finds it.
TEST(IgniteParity, OneRankFirstOrderingAndMessages) {
  std::filesystem::path dir;
  if (rank() == 0) {
    char tmpl[] = "/tmp/idist-one-rank-first-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  dir = idist::broadcast(dir, 0);
  for (const bool local : {false, true}) {
    const int current = local ? idist::get_local_rank() : rank();
    const int size = local ? idist::get_nproc_per_node() : ws();
    for (int first = 0; first < size; ++first) {
      // A node-local file per node in the local case: the emulated cluster's hosts share one /tmp,
      // where a real cluster's nodes each have their own.
      const std::filesystem::path file = dir / ("res_" + std::to_string(first) +
                                                (local ? "_local_node" + std::to_string(idist::get_node_rank()) : ""));
      std::string x;
      {
        idist::OneRankFirst guard(first, local);
        x = std::to_string(current) + (std::filesystem::exists(file) ? " readed" : " not readed");
        if (current == first) std::ofstream(file) << "readed";
      }
      const std::vector<std::string> all = idist::all_gather(std::string_view(x));
      std::set<std::string> expected;
      for (int r = 0; r < size; ++r) expected.insert(std::to_string(r) + (r == first ? " not readed" : " readed"));
      EXPECT_EQ(std::set<std::string>(all.begin(), all.end()), expected) << "first " << first << " local " << local;
    }
  }
  idist::barrier();
  if (rank() == 0) std::filesystem::remove_all(dir);
  try {
    idist::OneRankFirst guard(100);
    ADD_FAILURE() << "rank 100 accepted";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(
        std::string(e.what()).find("rank should be between 0 and " + std::to_string(ws() - 1) + ", but given 100"),
        std::string::npos)
        << e.what();
  }
}

}  // namespace

// Loaders saved serially 31 and 29 samples into their epochs and resumed at 2 and 3 ranks, which
// divide neither count (run_checkpoint_world.cmake runs the phases, this test alone selected with
// GTEST_FILTER). The documented rule: at R ranks the epoch continues floor(consumed / R) * R samples
// in, so consumed mod R samples are seen again and none is lost. The oracle is the whole epoch's
// order, read serially by a second loader in the save phase and carried in the checkpoint; each
// rank's expected samples are derived from it with torch's DistributedSampler layout (the order
// padded from its start to a multiple of R; rank r takes every R-th index from r).
// IDIST_CKPT_PHASE is "save" or "load"; IDIST_CKPT_DIR/uneven is rank 0's directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "index_loader.hpp"

namespace {

constexpr std::int64_t kDataset = 101;
constexpr std::size_t kLoadBatch = 6;  // global, when resumed: 3 per rank at 2 ranks, 2 at 3

// One loader of the checkpoint: its name, the samples consumed when saved (its only batch, read
// serially) and its epoch.
struct Case {
  const char* name;
  std::size_t consumed;
  std::uint64_t epoch;
};
constexpr Case kCases[] = {{"a", 31, 4}, {"b", 29, 7}};

std::filesystem::path directory() {
  const char* dir = std::getenv("IDIST_CKPT_DIR");
  return idist::get_rank() == 0 ? std::filesystem::path(dir ? dir : "") / "uneven" : "/nonexistent/idist-ckpt-uneven";
}

auto index_dataset() { return idist::test::index_dataset(kDataset); }

auto make_loader(std::size_t batch) {
  return idist::auto_dataloader(
      index_dataset(),
      {.batch_size = batch, .sampler = std::make_shared<idist::DistributedSampler>(std::size_t(kDataset))});
}
using Loader = decltype(make_loader(1));

void save_phase() {
  ASSERT_EQ(idist::get_world_size(), 1) << "the save phase runs serially";
  Loader a = make_loader(kCases[0].consumed), b = make_loader(kCases[1].consumed);
  Loader* loaders[] = {&a, &b};
  idist::CheckpointValues orders;
  for (int i = 0; i < 2; ++i) {
    const Case& c = kCases[i];
    Loader whole = make_loader(kDataset);  // the oracle: the epoch's order, uninterrupted
    whole.set_epoch(c.epoch);
    const std::vector<std::int64_t> order = idist::test::read_indices(whole);
    ASSERT_EQ(order.size(), std::size_t(kDataset));
    loaders[i]->set_epoch(c.epoch);
    const std::vector<std::int64_t> head = idist::test::read_indices(*loaders[i], 1);
    ASSERT_EQ(head, std::vector<std::int64_t>(order.begin(), order.begin() + std::ptrdiff_t(c.consumed)));
    ASSERT_EQ(loaders[i]->position().consumed_samples, c.consumed);
    orders[std::string("order_") + c.name] = torch::tensor(order, torch::kLong);
  }
  idist::Checkpoint checkpoint(directory(), {{kCases[0].name, a}, {kCases[1].name, b}});
  checkpoint.save({.iteration = 1, .values = orders});
  checkpoint.wait();
}

void load_phase() {
  const int world = idist::get_world_size(), rank = idist::get_rank();
  ASSERT_TRUE(world == 2 || world == 3) << "the load phase runs at 2 or 3 ranks";
  Loader a = make_loader(kLoadBatch), b = make_loader(kLoadBatch);
  Loader* loaders[] = {&a, &b};
  idist::Checkpoint checkpoint(directory(), {{kCases[0].name, a}, {kCases[1].name, b}}, {.require_empty = false});
  const auto loaded = checkpoint.load_latest();
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->world_size, 1);
  const auto R = std::size_t(world);
  for (int i = 0; i < 2; ++i) {
    const Case& c = kCases[i];
    SCOPED_TRACE(std::string("loader ") + c.name + ", " + std::to_string(c.consumed) + " consumed, " +
                 std::to_string(world) + " ranks, rank " + std::to_string(rank));
    ASSERT_NE(c.consumed % R, 0u) << "the case must not divide";
    const torch::Tensor saved = loaded->value<torch::Tensor>(std::string("order_") + c.name);
    std::vector<std::int64_t> padded(saved.data_ptr<std::int64_t>(), saved.data_ptr<std::int64_t>() + saved.numel());
    const std::size_t n = padded.size();
    while (padded.size() % R != 0) padded.push_back(padded[padded.size() - n]);
    const std::size_t start = c.consumed / R * R;
    std::vector<std::int64_t> expected;
    for (std::size_t j = start + std::size_t(rank); j < padded.size(); j += R) expected.push_back(padded[j]);

    EXPECT_EQ(loaders[i]->sampler().epoch(), c.epoch);
    loaders[i]->set_epoch(c.epoch);
    const std::vector<std::int64_t> seen = idist::test::read_indices(*loaders[i]);
    EXPECT_EQ(seen, expected);

    // All ranks together: every sample after the saved position, and the consumed mod R before it.
    const torch::Tensor all = idist::all_gather(torch::tensor(seen, torch::kLong));
    std::vector<std::int64_t> everyone(all.data_ptr<std::int64_t>(), all.data_ptr<std::int64_t>() + all.numel());
    for (std::size_t j = c.consumed; j < n; ++j)
      EXPECT_NE(std::find(everyone.begin(), everyone.end(), padded[j]), everyone.end())
          << "sample " << padded[j] << " was lost";
    std::size_t again = 0;
    for (std::size_t j = 0; j < c.consumed; ++j)
      again += std::size_t(std::count(everyone.begin(), everyone.end(), padded[j]));
    const std::size_t padding = padded.size() - n;  // the sampler's own repeats of the epoch's start
    EXPECT_EQ(again, c.consumed % R + padding) << "samples seen again";
    EXPECT_EQ(everyone.size(), n - start + padding);
  }
}

TEST(CheckpointUnevenResume, Phase) {
  const char* phase = std::getenv("IDIST_CKPT_PHASE");
  const std::string p = phase ? phase : "";
  if (p == "save") return save_phase();
  if (p == "load") return load_phase();
  FAIL() << "IDIST_CKPT_PHASE should be save or load, but given '" << p << "'";
}

}  // namespace

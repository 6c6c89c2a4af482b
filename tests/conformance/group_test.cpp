// Process groups (ignite's _test_distrib_new_group and the group arguments of its collectives):
// a rank outside the group gets its input back; bad groups are ValueErrors on every rank.
#include <numeric>

#include "conformance/conformance.hpp"

namespace idist::conformance {
namespace {

// Fixtures: every test reports, on every rank, the ranks where it failed.
class Groups : public Conformance {};

using idist::ReduceOp;

std::vector<int> ranks_from_one() {
  std::vector<int> ranks(std::size_t(world() - 1));
  std::iota(ranks.begin(), ranks.end(), 1);
  return ranks;
}

// The collectives of the group [1..ws-1]; rank 0 is outside it.
void check_group_without_rank_zero(const idist::Group& g) {
  const int r = rank(), ws = world();
  const bool member = r != 0;

  // all_reduce of 2r+1: members get sum over 1..ws-1 = ws^2 - 1; rank 0 its own input.
  EXPECT_EQ(idist::all_reduce(2 * r + 1, ReduceOp::Sum, g), member ? ws * ws - 1 : 1);
  EXPECT_EQ(idist::all_reduce(2 * r + 1, "MIN", g), member ? 3 : 1);
  EXPECT_EQ(idist::all_reduce(2.0 * r + 1.0, ReduceOp::Max, g), member ? 2.0 * ws - 1.0 : 1.0);

  SpanBuffer<std::int64_t> buf(std::vector<std::int64_t>(10, r));
  idist::all_reduce(buf.span(), ReduceOp::Sum, g);
  EXPECT_EQ(buf.to_host(), std::vector<std::int64_t>(10, member ? std::int64_t(ws) * (ws - 1) / 2 : 0));

  std::vector<float> v = {float(r), 1.0f};
  idist::all_reduce(v, "PRODUCT", g);
  float prod = 1;
  for (int q = 1; q < ws; ++q) prod *= float(q);
  EXPECT_EQ(v, member ? (std::vector<float>{prod, 1.0f}) : (std::vector<float>{0.0f, 1.0f}));

  // all_gather: members get the members' values in rank order; rank 0 gets [its own].
  const std::vector<int> gathered = idist::all_gather(r, g);
  EXPECT_EQ(gathered, member ? ranks_from_one() : std::vector<int>{0});

  const std::vector<std::string> strings = idist::all_gather(std::string(std::size_t(r), 'x'), g);
  std::vector<std::string> expected_strings;
  for (int q = 1; q < ws; ++q) expected_strings.emplace_back(std::size_t(q), 'x');
  EXPECT_EQ(strings, member ? expected_strings : std::vector<std::string>{""});

  std::vector<std::int32_t> mine(std::size_t(r % 2), r);  // different lengths, some empty
  std::vector<std::int32_t> expected_concat;
  for (int q = 1; q < ws; ++q)
    if (q % 2) expected_concat.push_back(q);
  EXPECT_EQ(idist::all_gather(mine, g), member ? expected_concat : mine);

  const std::vector<std::byte> blob(std::size_t(r) * 3, std::byte(r));
  const auto blobs = idist::all_gather_object(blob, g);
  EXPECT_EQ(blobs.size(), member ? std::size_t(ws - 1) : 1u);

  // Non-blocking forms and the barrier.
  SpanBuffer<double> async_buf(std::vector<double>(5, 1.0));
  idist::all_reduce_async(async_buf.span(), ReduceOp::Sum, g).wait();
  EXPECT_EQ(async_buf.to_host(), std::vector<double>(5, member ? double(ws - 1) : 1.0));
  idist::barrier(g);
  idist::barrier_async(g).wait();

  // Equal-length non-blocking all_gather: members get ws-1 slots; rank 0 its own input.
  const std::vector<std::int32_t> in = {r, -r};
  SpanBuffer<std::int32_t> gin(in);
  SpanBuffer<std::int32_t> gout(std::vector<std::int32_t>(member ? 2 * std::size_t(ws - 1) : 2, 99));
  idist::all_gather_async(std::span<const std::int32_t>(gin.span()), gout.span(), g).wait();
  std::vector<std::int32_t> expected_slots;
  for (int q = 1; q < ws; ++q) expected_slots.insert(expected_slots.end(), {q, -q});
  EXPECT_EQ(gout.to_host(), member ? expected_slots : in);

  // broadcast inside the group from world rank ws-1; rank 0 keeps its data.
  SpanBuffer<std::int32_t> b(std::vector<std::int32_t>(4, r == ws - 1 ? 77 : r));
  idist::broadcast_async(b.span(), ws - 1, g).wait();
  EXPECT_EQ(b.to_host(), std::vector<std::int32_t>(4, member ? 77 : 0));
}

TEST_F(Groups, NewGroupOfRanksOneToWsMinusOne) {
  IDIST_REQUIRE_WORLD_AT_LEAST(2);
  const idist::Group g = idist::new_group(ranks_from_one());
  EXPECT_EQ(g.ranks(), ranks_from_one());
  check_group_without_rank_zero(g);
  // Groups are reusable many times (their communicator is created once).
  for (int i = 0; i < 20; ++i) EXPECT_EQ(idist::all_reduce(1, ReduceOp::Sum, g), rank() == 0 ? 1 : world() - 1);
}

TEST_F(Groups, PlainRankListWithoutNewGroup) {
  IDIST_REQUIRE_WORLD_AT_LEAST(2);
  check_group_without_rank_zero(ranks_from_one());
  // Also as an initializer list and through a Group built from it.
  const int r = rank();
  if (world() == 2) {
    EXPECT_EQ(idist::all_reduce(r + 1, ReduceOp::Sum, {1}), r + 1);
  }
  EXPECT_EQ(idist::all_reduce(r + 1, ReduceOp::Sum, {0, 1}), r < 2 ? 3 : r + 1);
}

TEST_F(Groups, WholeWorldAsARankListInAnyOrder) {
  std::vector<int> reversed(static_cast<std::size_t>(world()));
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  const idist::Group g = idist::new_group(reversed);
  std::vector<int> ascending(static_cast<std::size_t>(world()));
  std::iota(ascending.begin(), ascending.end(), 0);
  // Members are ordered by world rank, as in torch.distributed.new_group.
  EXPECT_EQ(idist::all_gather(rank(), g), ascending);
  EXPECT_EQ(idist::all_reduce(2 * rank() + 1, ReduceOp::Sum, g), world() * world());
  idist::barrier(g);
}

TEST_F(Groups, DisjointGroupsSideBySide) {
  IDIST_REQUIRE_WORLD_AT_LEAST(2);
  std::vector<int> evens, odds;
  for (int q = 0; q < world(); ++q) (q % 2 ? odds : evens).push_back(q);
  const idist::Group ge = idist::new_group(evens), go = idist::new_group(odds);
  const int r = rank();
  int sum_evens = 0, sum_odds = 0;
  for (int q : evens) sum_evens += q + 1;
  for (int q : odds) sum_odds += q + 1;
  // Every rank calls both; each rank is a member of exactly one.
  const int a = idist::all_reduce(r + 1, ReduceOp::Sum, ge);
  const int b = idist::all_reduce(r + 1, ReduceOp::Sum, go);
  EXPECT_EQ(a, r % 2 == 0 ? sum_evens : r + 1);
  EXPECT_EQ(b, r % 2 == 1 ? sum_odds : r + 1);
  EXPECT_EQ(idist::all_gather(r, ge), r % 2 == 0 ? evens : std::vector<int>{r});
  EXPECT_EQ(idist::all_gather(r, go), r % 2 == 1 ? odds : std::vector<int>{r});
}

// Operations on the world and on a sub-group in flight at the same time, waited in reverse order.
TEST_F(Groups, AsyncOperationsOnSeveralGroupsInFlight) {
  IDIST_REQUIRE_WORLD_AT_LEAST(2);
  const int r = rank(), ws = world();
  const idist::Group sub = idist::new_group(ranks_from_one());
  SpanBuffer<double> a(std::vector<double>(1000, 1.0));
  SpanBuffer<std::int64_t> b(std::vector<std::int64_t>(1000, r));
  SpanBuffer<float> c(std::vector<float>(1000, 2.0f));
  idist::Work wa = idist::all_reduce_async(a.span(), ReduceOp::Sum);
  idist::Work wb = idist::all_reduce_async(b.span(), ReduceOp::Max, sub);
  idist::Work wc = idist::all_reduce_async(c.span(), ReduceOp::Product);
  wc.wait();
  wb.wait();
  wa.wait();
  EXPECT_EQ(a.to_host(), std::vector<double>(1000, double(ws)));
  EXPECT_EQ(b.to_host(), std::vector<std::int64_t>(1000, r == 0 ? 0 : ws - 1));
  EXPECT_EQ(c.to_host(), std::vector<float>(1000, float(1 << ws)));
}

TEST_F(Groups, SingleRankGroups) {
  for (int only = 0; only < world(); ++only) {
    const idist::Group g = idist::new_group({only});
    EXPECT_EQ(idist::all_reduce(rank() * 10 + 1, ReduceOp::Sum, g), rank() * 10 + 1);
    EXPECT_EQ(idist::all_gather(rank(), g), std::vector<int>{rank()});
    idist::barrier(g);
  }
}

TEST_F(Groups, BadRankListsAreValueErrorsOnEveryRank) {
  const int ws = world();
  if (idist::backend()) {
    expect_value_error_on_every_rank([] { idist::new_group({}); });
  } else {
    EXPECT_TRUE(idist::new_group({}).ranks().empty());  // ignite's serial new_group returns the list
  }
  expect_value_error_on_every_rank([] { idist::new_group({0, 0}); }, "distinct");
  expect_value_error_on_every_rank([&] { idist::new_group({ws}); }, std::to_string(ws));
  expect_value_error_on_every_rank([] { idist::new_group({-1}); }, "-1");
  expect_value_error_on_every_rank([&] { idist::new_group({0, ws + 5}); }, std::to_string(ws + 5));
  if (ws >= 2) expect_value_error_on_every_rank([] { idist::new_group({1, 0, 1}); });
  // The same lists passed straight to collectives.
  expect_value_error_on_every_rank([&] { idist::all_reduce(1, ReduceOp::Sum, idist::Group{ws}); });
  expect_value_error_on_every_rank([&] { idist::all_gather(1, idist::Group{0, 0}); });
  expect_value_error_on_every_rank([&] { idist::all_gather("abc", idist::Group{-2}); });
  expect_value_error_on_every_rank([&] { idist::barrier(idist::Group{0, ws}); });
  // Still in step.
  EXPECT_EQ(idist::all_reduce(1), ws);
}

}  // namespace
}  // namespace idist::conformance

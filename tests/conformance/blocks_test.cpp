// reduce_scatter, reduce_scatter_v, all_to_all and all_to_all_v (torch.distributed's block
// collectives, which ignite does not have) on every backend and world size, through the
// ComputationModel on Buffers: every reduce op of each numeric type, uneven and empty blocks, the world
// and a subgroup, blocking and not, and the counts each rank must get right.
#include <chrono>
#include <thread>

#include "conformance/beyond_ignite.hpp"

namespace idist::conformance {
namespace {

using idist::Completion;
using idist::ReduceOp;

template <class T>
class BlocksTyped : public Conformance {};
TYPED_TEST_SUITE(BlocksTyped, BeyondTypes);

class BlocksErrors : public Conformance {};

/// Uneven reduce_scatter_v blocks of a group of `size` ranks, one of them empty from 4 ranks on.
std::vector<std::size_t> uneven_counts(std::size_t size) {
  std::vector<std::size_t> c(size);
  for (std::size_t b = 0; b < size; ++b) c[b] = (b * 3 + 1) % 5;
  return c;
}

/// Elements world rank `src` sends to group rank `dst` in all_to_all_v: 0 to 3, some empty.
std::size_t pair_count(int src, int dst) { return std::size_t(src * 2 + dst * 3 + 1) % 4; }

std::size_t offset_of(const std::vector<std::size_t>& counts, std::size_t b) {
  return std::accumulate(counts.begin(), counts.begin() + std::ptrdiff_t(b), std::size_t{0});
}

TYPED_TEST(BlocksTyped, ReduceScatterWithEveryOp) {
  using T = TypeParam;
  const std::size_t n = 7;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    const int me = group_rank(g);
    for (const ReduceOp op : reduce_ops<T>()) {
      SpanBuffer<T> in(values<T>(n * m.size(), [&](std::size_t j) { return reduce_input(op, rank(), j); }));
      const std::vector<T> before = values<T>(n, [](std::size_t) { return 77; });
      SpanBuffer<T> out(before);
      idist::current_model().reduce_scatter(const_buffer(in), buffer(out), op, g, Completion::Blocking);
      // Group rank me receives the reduction of block me; a rank outside the group keeps its `out`.
      const auto want = [&](std::size_t i) {
        return me < 0 ? before[i] : from_int<T>(reduce_oracle(op, m, std::size_t(me) * n + i));
      };
      EXPECT_EQ(mismatch(out.to_host(), n, want), "") << where<T>(op, g);
    }
  }
}

TYPED_TEST(BlocksTyped, ReduceScatterVWithUnevenBlocks) {
  using T = TypeParam;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    const int me = group_rank(g);
    const std::vector<std::size_t> counts = uneven_counts(m.size());
    const std::size_t total = offset_of(counts, counts.size());
    for (const ReduceOp op : reduce_ops<T>()) {
      SpanBuffer<T> in(values<T>(total, [&](std::size_t j) { return reduce_input(op, rank(), j); }));
      const std::size_t out_n = me < 0 ? 2 : counts[std::size_t(me)];
      const std::vector<T> before = values<T>(out_n, [](std::size_t) { return 77; });
      SpanBuffer<T> out(before);
      idist::current_model().reduce_scatter_v(const_buffer(in), buffer(out), counts, op, g, Completion::Blocking);
      const std::size_t first = me < 0 ? 0 : offset_of(counts, std::size_t(me));
      const auto want = [&](std::size_t i) {
        return me < 0 ? before[i] : from_int<T>(reduce_oracle(op, m, first + i));
      };
      EXPECT_EQ(mismatch(out.to_host(), out_n, want), "") << where<T>(op, g);
    }
  }
}

TYPED_TEST(BlocksTyped, AllToAll) {
  using T = TypeParam;
  const std::size_t n = 4;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    const int me = group_rank(g);
    // Block j of `in` goes to group rank j; block i of `out` comes from group rank i.
    SpanBuffer<T> in(values<T>(n * m.size(), [&](std::size_t j) { return block_value(rank(), int(j / n), j % n); }));
    const std::vector<T> before = values<T>(n * m.size(), [](std::size_t) { return 55; });
    SpanBuffer<T> out(before);
    idist::current_model().all_to_all(const_buffer(in), buffer(out), g, Completion::Blocking);
    const auto want = [&](std::size_t j) { return me < 0 ? before[j] : from_int<T>(block_value(m[j / n], me, j % n)); };
    EXPECT_EQ(mismatch(out.to_host(), n * m.size(), want), "") << type_name<T>() << " group " << g.str();
  }
}

TYPED_TEST(BlocksTyped, AllToAllVWithUnevenAndEmptyBlocks) {
  using T = TypeParam;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    const int me = group_rank(g);
    std::vector<std::size_t> in_counts(m.size()), out_counts(m.size());
    for (std::size_t k = 0; k < m.size(); ++k) {
      in_counts[k] = pair_count(rank(), int(k));
      out_counts[k] = me < 0 ? 0 : pair_count(m[k], me);
    }
    std::vector<std::int64_t> in_values, want_values;
    for (std::size_t k = 0; k < m.size(); ++k) {
      for (std::size_t i = 0; i < in_counts[k]; ++i) in_values.push_back(block_value(rank(), int(k), i));
      for (std::size_t i = 0; i < out_counts[k]; ++i) want_values.push_back(block_value(m[k], me, i));
    }
    SpanBuffer<T> in(values<T>(in_values.size(), [&](std::size_t j) { return in_values[j]; }));
    const std::size_t out_n = me < 0 ? 3 : want_values.size();
    const std::vector<T> before = values<T>(out_n, [](std::size_t) { return 55; });
    SpanBuffer<T> out(before);
    idist::current_model().all_to_all_v(const_buffer(in), buffer(out), out_counts, in_counts, g, Completion::Blocking);
    const auto want = [&](std::size_t j) { return me < 0 ? before[j] : from_int<T>(want_values[j]); };
    EXPECT_EQ(mismatch(out.to_host(), out_n, want), "") << type_name<T>() << " group " << g.str();
  }
}

TYPED_TEST(BlocksTyped, NonBlockingInFlightTogether) {
  // A reduce_scatter and an all_to_all issued before either is waited for, waited in reverse order.
  using T = TypeParam;
  const std::size_t n = 3, ws = std::size_t(world());
  const std::vector<int> m = members({});
  SpanBuffer<T> rs_in(values<T>(n * ws, [&](std::size_t j) { return reduce_input(ReduceOp::Sum, rank(), j); }));
  SpanBuffer<T> rs_out(values<T>(n, [](std::size_t) { return 0; }));
  SpanBuffer<T> a2a_in(values<T>(n * ws, [&](std::size_t j) { return block_value(rank(), int(j / n), j % n); }));
  SpanBuffer<T> a2a_out(values<T>(n * ws, [](std::size_t) { return 0; }));
  ComputationModel& model = idist::current_model();
  idist::Work rs = model.reduce_scatter(const_buffer(rs_in), buffer(rs_out), ReduceOp::Sum);
  idist::Work a2a = model.all_to_all(const_buffer(a2a_in), buffer(a2a_out));
  a2a.wait();
  rs.wait();
  EXPECT_EQ(mismatch(rs_out.to_host(), n,
                     [&](std::size_t i) {
                       return from_int<T>(reduce_oracle(ReduceOp::Sum, m, std::size_t(rank()) * n + i));
                     }),
            "");
  EXPECT_EQ(mismatch(a2a_out.to_host(), n * ws,
                     [&](std::size_t j) { return from_int<T>(block_value(int(j / n), rank(), j % n)); }),
            "");
}

class BlocksInFlight : public Conformance {};

TEST_F(BlocksInFlight, UnevenReduceScattersAndAllGathersWithRankZeroLate) {
  // Six reduce_scatter_v and six all_gather_v in flight together, blocks of up to a few MiB whose
  // owners alternate (ZeRO's buckets), rank 0 issuing its share late, every Work waited in reverse
  // order: each result is still exact (int64 sums), whatever the order the transfers ran in.
  const std::size_t ws = std::size_t(world());
  const int me = rank();
  constexpr int kRounds = 6;
  const auto counts_of = [&](int k) {
    std::vector<std::size_t> c(ws);
    for (std::size_t b = 0; b < ws; ++b) c[b] = (b + std::size_t(k)) % 2 == 0 ? 150000 + b * 7 : 1000 * b;
    return c;
  };
  std::vector<std::vector<std::int64_t>> rs_in(kRounds), rs_out(kRounds), ag_in(kRounds), ag_out(kRounds);
  std::vector<std::vector<std::size_t>> counts(kRounds);
  for (int k = 0; k < kRounds; ++k) {
    counts[k] = counts_of(k);
    const std::size_t total = offset_of(counts[k], ws);
    rs_in[k].resize(total);
    for (std::size_t j = 0; j < total; ++j) rs_in[k][j] = std::int64_t(j) * (me + 1) + k;
    rs_out[k].assign(counts[k][std::size_t(me)], -1);
    ag_in[k].resize(counts[k][std::size_t(me)]);
    for (std::size_t i = 0; i < ag_in[k].size(); ++i) ag_in[k][i] = std::int64_t(me) * 1000000007 + std::int64_t(i) + k;
    ag_out[k].assign(total, -1);
  }
  if (me == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ComputationModel& model = idist::current_model();
  const auto buf = [](std::vector<std::int64_t>& v) {
    return idist::Buffer{v.data(), v.size(), idist::DType::Int64, {}};
  };
  std::vector<idist::Work> works;
  for (int k = 0; k < kRounds; ++k) {
    works.push_back(model.reduce_scatter_v(buf(rs_in[k]), buf(rs_out[k]), counts[k], ReduceOp::Sum));
    works.push_back(model.all_gather_v(buf(ag_in[k]), buf(ag_out[k]), counts[k]));
  }
  for (auto w = works.rbegin(); w != works.rend(); ++w) w->wait();
  const std::int64_t ranks_sum = std::int64_t(ws * (ws + 1) / 2);  // sum of (r + 1)
  for (int k = 0; k < kRounds; ++k) {
    const std::size_t first = offset_of(counts[k], std::size_t(me));
    for (std::size_t i = 0; i < rs_out[k].size(); ++i)
      ASSERT_EQ(rs_out[k][i], std::int64_t(first + i) * ranks_sum + std::int64_t(ws) * k)
          << "round " << k << " i " << i;
    for (std::size_t r = 0, at = 0; r < ws; at += counts[k][r], ++r)
      for (std::size_t i = 0; i < counts[k][r]; ++i)
        ASSERT_EQ(ag_out[k][at + i], std::int64_t(r) * 1000000007 + std::int64_t(i) + k)
            << "round " << k << " from rank " << r << " i " << i;
  }
}

TEST_F(BlocksErrors, CountsThatDoNotAddUp) {
  // Every member checks its own arguments before communicating, so each rank refuses alone.
  const std::size_t ws = std::size_t(world());
  std::vector<float> in(3 * ws + 1), out(3), same(3 * ws + 1);
  const idist::Buffer in_b{in.data(), in.size(), idist::DType::Float32, {}};
  const idist::Buffer out_b{out.data(), out.size(), idist::DType::Float32, {}};
  const idist::Buffer same_b{same.data(), same.size(), idist::DType::Float32, {}};
  ComputationModel& m = idist::current_model();
  expect_value_error_on_every_rank([&] { m.reduce_scatter(in_b, out_b, ReduceOp::Sum, {}, Completion::Blocking); },
                                   "reduce_scatter: in has");
  const std::vector<std::size_t> one_short(ws - 1, 1);
  expect_value_error_on_every_rank(
      [&] { m.reduce_scatter_v(in_b, out_b, one_short, ReduceOp::Sum, {}, Completion::Blocking); }, "counts has");
  expect_value_error_on_every_rank([&] { m.all_to_all(in_b, out_b, {}, Completion::Blocking); }, "expected in.count");
  if (ws > 1)
    expect_value_error_on_every_rank([&] { m.all_to_all(in_b, same_b, {}, Completion::Blocking); },
                                     "expected a multiple of the group size");
  const std::vector<std::size_t> ones(ws, 1);
  expect_value_error_on_every_rank([&] { m.all_to_all_v(in_b, out_b, ones, ones, {}, Completion::Blocking); },
                                   "sums to");
  std::vector<std::int32_t> ints(3 * ws);
  const idist::Buffer int_b{ints.data(), ints.size(), idist::DType::Int32, {}};
  expect_value_error_on_every_rank([&] { m.all_to_all(int_b, same_b, {}, Completion::Blocking); }, "element type");
}

}  // namespace
}  // namespace idist::conformance

// reduce, gather and scatter (torch.distributed's rooted collectives, which ignite does not have) on
// every backend and world size, through the ComputationModel on Buffers: every root, every reduce op
// of each numeric type, the world and a subgroup, and the arguments a root must get right.
#include "conformance/beyond_ignite.hpp"

namespace idist::conformance {
namespace {

using idist::Completion;
using idist::ReduceOp;

template <class T>
class RootedTyped : public Conformance {};
TYPED_TEST_SUITE(RootedTyped, BeyondTypes);

class RootedErrors : public Conformance {};

TYPED_TEST(RootedTyped, ReduceToEveryRootWithEveryOp) {
  using T = TypeParam;
  const std::size_t n = 37;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    for (const ReduceOp op : reduce_ops<T>())
      for (const int dst : m) {
        const std::vector<T> mine = values<T>(n, [&](std::size_t i) { return reduce_input(op, rank(), i); });
        SpanBuffer<T> data(mine);
        idist::current_model().reduce(buffer(data), op, dst, g, Completion::Blocking);
        // The root holds the reduction; every other rank, member or not, its own input.
        const auto want = [&](std::size_t i) { return rank() == dst ? from_int<T>(reduce_oracle(op, m, i)) : mine[i]; };
        EXPECT_EQ(mismatch(data.to_host(), n, want), "") << where<T>(op, g) << " dst " << dst;
      }
  }
}

TYPED_TEST(RootedTyped, NonBlockingReduce) {
  using T = TypeParam;
  const std::size_t n = 6;
  const int dst = world() - 1;
  SpanBuffer<T> data(values<T>(n, [&](std::size_t i) { return reduce_input(ReduceOp::Max, rank(), i); }));
  idist::Work w = idist::current_model().reduce(buffer(data), ReduceOp::Max, dst);
  w.wait();
  const std::vector<int> m = members({});
  const auto want = [&](std::size_t i) {
    return from_int<T>(rank() == dst ? reduce_oracle(ReduceOp::Max, m, i) : reduce_input(ReduceOp::Max, rank(), i));
  };
  EXPECT_EQ(mismatch(data.to_host(), n, want), "") << type_name<T>();
}

TYPED_TEST(RootedTyped, GatherToEveryRoot) {
  using T = TypeParam;
  const std::size_t n = 5;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    for (const int dst : m) {
      SpanBuffer<T> in(values<T>(n, [&](std::size_t i) { return block_value(rank(), 0, i); }));
      // Only the root's `out` is used: the others pass an empty one.
      const std::size_t out_n = rank() == dst ? n * m.size() : 0;
      SpanBuffer<T> out(values<T>(out_n, [](std::size_t) { return 0; }));
      idist::current_model().gather(const_buffer(in), buffer(out), dst, g, Completion::Blocking);
      if (rank() == dst) {
        const auto want = [&](std::size_t i) { return from_int<T>(block_value(m[i / n], 0, i % n)); };
        EXPECT_EQ(mismatch(out.to_host(), out_n, want), "") << type_name<T>() << " group " << g.str() << " dst " << dst;
      }
    }
  }
}

TYPED_TEST(RootedTyped, ScatterFromEveryRoot) {
  using T = TypeParam;
  const std::size_t n = 3;
  for (const idist::Group& g : test_groups()) {
    const std::vector<int> m = members(g);
    const int me = group_rank(g);
    for (const int src : m) {
      // The root's block j (n elements) goes to group rank j; the others' `in` is not read.
      const std::size_t in_n = rank() == src ? n * m.size() : 0;
      SpanBuffer<T> in(values<T>(in_n, [&](std::size_t i) { return block_value(src, int(i / n), i % n); }));
      const std::vector<T> before = values<T>(n, [](std::size_t) { return 99; });
      SpanBuffer<T> out(before);
      idist::current_model().scatter(const_buffer(in), buffer(out), src, g, Completion::Blocking);
      const auto want = [&](std::size_t i) { return me < 0 ? before[i] : from_int<T>(block_value(src, me, i)); };
      EXPECT_EQ(mismatch(out.to_host(), n, want), "") << type_name<T>() << " group " << g.str() << " src " << src;
    }
  }
}

TEST_F(RootedErrors, RootOutsideTheWorldOrTheGroup) {
  std::vector<float> v(4, 1.0f), out(4 * std::size_t(world()));
  const idist::Buffer data{v.data(), v.size(), idist::DType::Float32, {}};
  const idist::Buffer whole{out.data(), out.size(), idist::DType::Float32, {}};
  ComputationModel& m = idist::current_model();
  expect_value_error_on_every_rank([&] { m.reduce(data, ReduceOp::Sum, world(), {}, Completion::Blocking); }, "dst");
  expect_value_error_on_every_rank([&] { m.gather(data, whole, -1, {}, Completion::Blocking); }, "dst");
  expect_value_error_on_every_rank([&] { m.scatter(whole, data, world() + 2, {}, Completion::Blocking); }, "src");
  if (world() < 2) return;  // a world rank outside a group needs a second rank
  // A world rank that is not a member of this rank's one-rank group.
  const idist::Group mine = own_group();
  const int other = (rank() + 1) % world();
  expect_value_error_on_every_rank([&] { m.reduce(data, ReduceOp::Sum, other, mine, Completion::Blocking); },
                                   "not a member");
  expect_value_error_on_every_rank([&] { m.gather(data, whole, other, mine, Completion::Blocking); }, "dst");
  expect_value_error_on_every_rank([&] { m.scatter(whole, data, other, mine, Completion::Blocking); }, "src");
}

TEST_F(RootedErrors, RootBuffersOfTheWrongSizeOrType) {
  // Only a root checks its whole buffer, before anything is sent: each rank is the root of its own
  // one-rank group, so that every rank refuses the call and none waits for a peer.
  const idist::Group mine = own_group();
  std::vector<float> v(4, 1.0f), long_whole(5);
  const idist::Buffer part{v.data(), v.size(), idist::DType::Float32, {}};
  const idist::Buffer whole{long_whole.data(), long_whole.size(), idist::DType::Float32, {}};
  std::vector<double> d(4);
  const idist::Buffer other_dtype{d.data(), d.size(), idist::DType::Float64, {}};
  ComputationModel& m = idist::current_model();
  expect_value_error_on_every_rank([&] { m.gather(part, whole, rank(), mine, Completion::Blocking); }, "out");
  expect_value_error_on_every_rank([&] { m.scatter(whole, part, rank(), mine, Completion::Blocking); }, "in");
  expect_value_error_on_every_rank([&] { m.gather(part, other_dtype, rank(), mine, Completion::Blocking); }, "float64");
  expect_value_error_on_every_rank([&] { m.reduce(part, ReduceOp::And, rank(), mine, Completion::Blocking); },
                                   "float32");
}

}  // namespace
}  // namespace idist::conformance

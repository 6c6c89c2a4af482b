// Collectives on the serial model: every one returns its input (ignite's _SerialModel), and bad
// arguments are still rejected.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "idist/idist.hpp"

namespace {

using idist::ReduceOp;

TEST(SerialCollectives, AllReduceReturnsItsInputForEveryOp) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max, ReduceOp::And, ReduceOp::Or}) {
    EXPECT_EQ(idist::all_reduce(7, op), 7);
    EXPECT_EQ(idist::all_reduce(std::int64_t(-5) << 40, op), std::int64_t(-5) << 40);
    EXPECT_EQ(idist::all_reduce(true, op), true);
    EXPECT_EQ(idist::all_reduce(std::uint8_t(200), op), 200);
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Product, ReduceOp::Min, ReduceOp::Max}) {
    EXPECT_EQ(idist::all_reduce(0.1, op), 0.1);
    EXPECT_EQ(idist::all_reduce(2.5f, op), 2.5f);
    EXPECT_EQ(float(idist::all_reduce(idist::Half(1.5f), op)), 1.5f);
    EXPECT_EQ(float(idist::all_reduce(idist::BFloat16(-3.0f), op)), -3.0f);
  }
  EXPECT_EQ(idist::all_reduce(10, "MAX"), 10);
  static_assert(std::is_same_v<decltype(idist::all_reduce(1)), int>);
  static_assert(std::is_same_v<decltype(idist::all_reduce(1.0f, "SUM")), float>);
  static_assert(std::is_same_v<decltype(idist::all_reduce(std::int8_t(1))), std::int8_t>);
}

TEST(SerialCollectives, AllReduceSpansAndVectorsUnchanged) {
  std::vector<double> v = {1.5, -2.0, 3.25};
  idist::all_reduce(v);
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0, 3.25}));
  idist::all_reduce(v, "PRODUCT");
  EXPECT_EQ(v, (std::vector<double>{1.5, -2.0, 3.25}));
  std::array<std::int32_t, 3> a = {4, 5, 6};
  idist::all_reduce(std::span<std::int32_t>(a), ReduceOp::Or);
  EXPECT_EQ(a, (std::array<std::int32_t, 3>{4, 5, 6}));
  idist::Work w = idist::all_reduce_async(std::span<std::int32_t>(a), ReduceOp::Max);
  w.wait();
  EXPECT_TRUE(w.is_completed());
  EXPECT_EQ(a, (std::array<std::int32_t, 3>{4, 5, 6}));
}

TEST(SerialCollectives, AllReduceRejectsBitwiseOpsOnFloatsAndUnknownNames) {
  std::vector<float> f = {1.0f};
  EXPECT_THROW(idist::all_reduce(f, ReduceOp::And), idist::ValueError);
  EXPECT_THROW(idist::all_reduce(1.0, ReduceOp::Or), idist::ValueError);
  EXPECT_THROW(idist::all_reduce(idist::Half(1.0f), "AND"), idist::ValueError);
  EXPECT_THROW(idist::all_reduce(idist::BFloat16(1.0f), "OR"), idist::ValueError);
  try {
    idist::all_reduce(10, "ABC");
    FAIL();
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Unsupported reduction operation"), std::string::npos) << e.what();
  }
}

TEST(SerialCollectives, AllGatherReturnsAListOfTheInput) {
  EXPECT_EQ(idist::all_gather(10), std::vector<int>{10});
  EXPECT_EQ(idist::all_gather(2.5), std::vector<double>{2.5});
  EXPECT_EQ(idist::all_gather(std::vector<std::int16_t>{1, 2, 3}), (std::vector<std::int16_t>{1, 2, 3}));
  EXPECT_EQ(idist::all_gather(std::vector<float>{}), std::vector<float>{});
  EXPECT_EQ(idist::all_gather("abc"), std::vector<std::string>{"abc"});
  EXPECT_EQ(idist::all_gather(std::string("a\0b", 3)), std::vector<std::string>{std::string("a\0b", 3)});
  EXPECT_EQ(idist::all_gather(""), std::vector<std::string>{""});
  const std::vector<std::byte> blob = {std::byte{1}, std::byte{0}, std::byte{255}};
  EXPECT_EQ(idist::all_gather_object(blob), std::vector<std::vector<std::byte>>{blob});

  const std::array<std::int64_t, 2> in = {7, 8};
  std::array<std::int64_t, 2> out = {};
  idist::all_gather_async(std::span<const std::int64_t>(in), std::span<std::int64_t>(out)).wait();
  EXPECT_EQ(out, in);
  std::array<std::int64_t, 3> wrong = {};
  EXPECT_THROW(idist::all_gather_async(std::span<const std::int64_t>(in), std::span<std::int64_t>(wrong)),
               idist::ValueError);
}

TEST(SerialCollectives, BroadcastReturnsItsInput) {
  EXPECT_EQ(idist::broadcast(1.0 / 3.0), 1.0 / 3.0);
  EXPECT_EQ(idist::broadcast(std::int64_t(1) << 62, 0), std::int64_t(1) << 62);
  EXPECT_EQ(idist::broadcast("test-abcdefg"), "test-abcdefg");
  EXPECT_EQ(idist::broadcast(std::string()), "");
  EXPECT_EQ(idist::broadcast(std::optional<int>(10), 0, true), 10);
  EXPECT_EQ(idist::broadcast(std::optional<std::string>("x"), 0, true), "x");
  std::vector<float> v = {1.2345f, 2.3456f};
  idist::broadcast(v, 0);
  EXPECT_EQ(v, (std::vector<float>{1.2345f, 2.3456f}));
  static_assert(std::is_same_v<decltype(idist::broadcast(std::int16_t(1))), std::int16_t>);
}

TEST(SerialCollectives, BroadcastChecksItsArguments) {
  EXPECT_THROW(idist::broadcast(1, 1), idist::ValueError);
  EXPECT_THROW(idist::broadcast(1, -1), idist::ValueError);
  EXPECT_THROW(idist::broadcast("abc", 1), idist::ValueError);
  std::vector<int> v = {1};
  EXPECT_THROW(idist::broadcast(v, 2), idist::ValueError);
  EXPECT_THROW(idist::broadcast(std::optional<int>(), 0, true), idist::ValueError);
  EXPECT_THROW(idist::broadcast(std::optional<int>(), 0, false), idist::ValueError);
  EXPECT_THROW(idist::broadcast(std::optional<std::string>(), 0, true), idist::ValueError);
  EXPECT_THROW(idist::broadcast(std::optional<int>(1), 1, true), idist::ValueError);
  try {
    idist::broadcast(5, 3);
    FAIL();
  } catch (const idist::ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("src"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3"), std::string::npos) << msg;
  }
}

TEST(SerialCollectives, BarrierAndGroups) {
  idist::barrier();
  idist::barrier_async().wait();
  const idist::Group g = idist::new_group({0});
  EXPECT_EQ(g.ranks(), std::vector<int>{0});
  EXPECT_EQ(idist::all_reduce(3, ReduceOp::Sum, g), 3);
  EXPECT_EQ(idist::all_gather(4, g), std::vector<int>{4});
  idist::barrier(g);
  EXPECT_EQ(idist::all_reduce(3, ReduceOp::Sum, std::vector<int>{0}), 3);
}

// ignite's serial new_group returns the list given; [] is what ranks 1 .. world size - 1 give here.
TEST(SerialCollectives, EmptyGroupIsReturnedAsGiven) {
  const idist::Group g = idist::new_group({});
  EXPECT_TRUE(g.ranks().empty());
  EXPECT_EQ(idist::all_reduce(3, ReduceOp::Sum, g), 3);
  EXPECT_EQ(idist::all_gather(std::string_view("a"), g), std::vector<std::string>{"a"});
}

TEST(SerialCollectives, PathsAndObjectsAreReturned) {
  const std::filesystem::path p("data/run 1/checkpoint_3.pt");
  EXPECT_EQ(idist::broadcast(p), p);
  EXPECT_EQ(idist::broadcast(std::optional<std::filesystem::path>(p), 0, true), p);
  EXPECT_THROW(idist::broadcast(std::optional<std::filesystem::path>(), 0, true), idist::ValueError);
  const std::vector<std::byte> blob = {std::byte{1}, std::byte{0}, std::byte{255}};
  EXPECT_EQ(idist::broadcast_object(blob), blob);
  EXPECT_THROW(idist::broadcast_object(blob, 1), idist::ValueError);
  EXPECT_THROW(idist::broadcast(p, -1), idist::ValueError);
}

TEST(SerialCollectives, BadGroupsAreValueErrors) {
  EXPECT_THROW(idist::new_group({1}), idist::ValueError);
  EXPECT_THROW(idist::new_group({-1}), idist::ValueError);
  EXPECT_THROW(idist::new_group({0, 0}), idist::ValueError);
  try {
    idist::new_group({0, 5});
    FAIL();
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(idist::all_reduce(1, ReduceOp::Sum, idist::Group{1}), idist::ValueError);
  EXPECT_THROW(idist::all_gather(1, idist::Group{0, 0}), idist::ValueError);
  EXPECT_THROW(idist::barrier(idist::Group{2}), idist::ValueError);
}

// The serial model itself (what the free functions dispatch to) checks its arguments as every
// backend does: an out of the wrong size or type is refused before anything is copied.
TEST(SerialBackend, CollectivesCheckTheirArgumentsLikeEveryBackend) {
  idist::ComputationModel& m = idist::current_model();
  std::vector<float> in = {1, 2, 3, 4};
  std::vector<float> small(3, -1.0f), right(4, -1.0f);
  std::vector<double> wide(4, -1.0);
  const idist::ConstBuffer cin{in.data(), 4, idist::DType::Float32};
  EXPECT_THROW(m.all_gather(cin, idist::Buffer{small.data(), 3, idist::DType::Float32}, idist::Group{}),
               idist::ValueError);
  EXPECT_EQ(small, std::vector<float>(3, -1.0f)) << "nothing may be written into a too small out";
  EXPECT_THROW(m.all_gather(cin, idist::Buffer{wide.data(), 4, idist::DType::Float64}, idist::Group{}),
               idist::ValueError);
  m.all_gather(cin, idist::Buffer{right.data(), 4, idist::DType::Float32}, idist::Group{}).wait();
  EXPECT_EQ(right, in);

  const std::vector<std::size_t> counts = {4}, wrong = {3};
  EXPECT_THROW(m.all_gather_v(cin, idist::Buffer{right.data(), 4, idist::DType::Float32}, wrong, idist::Group{}),
               idist::ValueError);
  EXPECT_THROW(m.all_gather_v(cin, idist::Buffer{small.data(), 3, idist::DType::Float32}, counts, idist::Group{}),
               idist::ValueError);
  EXPECT_NO_THROW(m.all_gather_v(cin, idist::Buffer{right.data(), 4, idist::DType::Float32}, counts, idist::Group{}));

  std::vector<float> data = {5};
  EXPECT_THROW(m.broadcast(idist::Buffer{data.data(), 1, idist::DType::Float32}, 1, idist::Group{}), idist::ValueError);
  EXPECT_NO_THROW(m.broadcast(idist::Buffer{data.data(), 1, idist::DType::Float32}, 0, idist::Group{}));
}

}  // namespace

// Vocabulary types: reduction names, element types, devices, groups.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "idist/idist.hpp"

namespace {

using idist::DType;
using idist::ReduceOp;

TEST(ReduceOpNames, ParsesEveryIgniteName) {
  const std::vector<std::pair<std::string, ReduceOp>> names = {{"SUM", ReduceOp::Sum}, {"PRODUCT", ReduceOp::Product},
                                                               {"MIN", ReduceOp::Min}, {"MAX", ReduceOp::Max},
                                                               {"AND", ReduceOp::And}, {"OR", ReduceOp::Or}};
  for (const auto& [name, op] : names) {
    EXPECT_EQ(idist::parse_reduce_op(name), op) << name;
    EXPECT_EQ(idist::to_string(op), name);
    EXPECT_EQ(idist::parse_reduce_op(idist::to_string(op)), op);  // round trip
  }
}

TEST(ReduceOpNames, UnknownNameIsAValueErrorListingTheAcceptedNames) {
  // ignite: ValueError("Unsupported reduction operation: 'ABC'").
  for (const std::string bad : {"ABC", "sum", "Sum", "", " SUM", "SUM ", "BAND", "PROD"}) {
    try {
      idist::parse_reduce_op(bad);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const idist::ValueError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("Unsupported reduction operation"), std::string::npos) << msg;
      EXPECT_NE(msg.find("'" + bad + "'"), std::string::npos) << msg;
      for (const char* name : {"SUM", "PRODUCT", "MIN", "MAX", "AND", "OR"})
        EXPECT_NE(msg.find(name), std::string::npos) << msg << " does not list " << name;
    }
  }
}

TEST(ReduceOpNames, ValueErrorIsAnIdistErrorAndARuntimeError) {
  EXPECT_THROW(idist::parse_reduce_op("xyz"), idist::Error);
  EXPECT_THROW(idist::parse_reduce_op("xyz"), std::runtime_error);
}

TEST(DTypes, SizesAndNames) {
  struct Row {
    DType t;
    std::size_t size;
    const char* name;
    bool floating;
  };
  const Row rows[] = {
      {DType::Bool, 1, "bool", false},      {DType::UInt8, 1, "uint8", false},
      {DType::Int8, 1, "int8", false},      {DType::Int16, 2, "int16", false},
      {DType::Int32, 4, "int32", false},    {DType::Int64, 8, "int64", false},
      {DType::Float16, 2, "float16", true}, {DType::BFloat16, 2, "bfloat16", true},
      {DType::Float32, 4, "float32", true}, {DType::Float64, 8, "float64", true},
      {DType::UInt16, 2, "uint16", false},  {DType::UInt32, 4, "uint32", false},
      {DType::UInt64, 8, "uint64", false},
  };
  static_assert(std::size(rows) == idist::kDTypeCount, "a row per DType");
  for (const Row& r : rows) {
    EXPECT_EQ(idist::dtype_size(r.t), r.size) << r.name;
    EXPECT_EQ(idist::to_string(r.t), r.name);
    EXPECT_EQ(idist::is_floating(r.t), r.floating) << r.name;
  }
}

TEST(DTypes, CxxTypesMapToTheirDTypeAndSize) {
  static_assert(idist::dtype_of<bool> == DType::Bool);
  static_assert(idist::dtype_of<std::uint8_t> == DType::UInt8);
  static_assert(idist::dtype_of<std::int8_t> == DType::Int8);
  static_assert(idist::dtype_of<std::int16_t> == DType::Int16);
  static_assert(idist::dtype_of<std::int32_t> == DType::Int32);
  static_assert(idist::dtype_of<std::int64_t> == DType::Int64);
  static_assert(idist::dtype_of<long long> == DType::Int64);
  static_assert(idist::dtype_of<const double> == DType::Float64);
  static_assert(idist::dtype_of<float> == DType::Float32);
  static_assert(idist::dtype_of<idist::Half> == DType::Float16);
  static_assert(idist::dtype_of<idist::BFloat16> == DType::BFloat16);
  // Every standard unsigned spelling maps to the unsigned type of its width.
  static_assert(idist::dtype_of<std::uint16_t> == DType::UInt16);
  static_assert(idist::dtype_of<std::uint32_t> == DType::UInt32);
  static_assert(idist::dtype_of<std::uint64_t> == DType::UInt64);
  static_assert(idist::dtype_of<unsigned char> == DType::UInt8);
  static_assert(idist::dtype_of<signed char> == DType::Int8);
  static_assert(idist::dtype_of<unsigned long long> == DType::UInt64);
  static_assert(idist::dtype_of<std::size_t> == (sizeof(std::size_t) == 8 ? DType::UInt64 : DType::UInt32));
  static_assert(idist::dtype_of<unsigned> == (sizeof(unsigned) == 4 ? DType::UInt32 : DType::UInt16));
  static_assert(idist::dtype_of<unsigned long> == (sizeof(unsigned long) == 8 ? DType::UInt64 : DType::UInt32));
  static_assert(idist::dtype_of<std::ptrdiff_t> == (sizeof(std::ptrdiff_t) == 8 ? DType::Int64 : DType::Int32));
  static_assert(!idist::Element<char>, "plain char must select the string overloads");
  static_assert(!idist::Element<wchar_t> && !idist::Element<char8_t> && !idist::Element<char32_t>);
  static_assert(!idist::Element<std::string>);
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<idist::Half>), sizeof(idist::Half));
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<idist::BFloat16>), sizeof(idist::BFloat16));
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<long long>), sizeof(long long));
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<bool>), sizeof(bool));
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<std::size_t>), sizeof(std::size_t));
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<unsigned short>), sizeof(unsigned short));
  EXPECT_EQ(idist::dtype_size(idist::dtype_of<unsigned long>), sizeof(unsigned long));
}

TEST(Buffers, BytesIsCountTimesElementSize) {
  double d[3] = {};
  const idist::Buffer b{d, 3, DType::Float64, {}};
  EXPECT_EQ(b.bytes(), 24u);
  const idist::ConstBuffer c = b;
  EXPECT_EQ(c.data, b.data);
  EXPECT_EQ(c.bytes(), 24u);
  EXPECT_EQ((idist::ConstBuffer{d, 5, DType::Int16}).bytes(), 10u);
}

TEST(DeviceNames, CpuAndCuda) {
  EXPECT_EQ(idist::Device{}.str(), "cpu");
  EXPECT_EQ((idist::Device{idist::DeviceType::CUDA, 0}).str(), "cuda:0");
  EXPECT_EQ((idist::Device{idist::DeviceType::CUDA, 1}).str(), "cuda:1");
  EXPECT_EQ((idist::Device{idist::DeviceType::CUDA, 13}).str(), "cuda:13");
  EXPECT_EQ((idist::Device{idist::DeviceType::CUDA, -1}).str(), "cuda");
  EXPECT_EQ(idist::Device{}, (idist::Device{idist::DeviceType::CPU, -1}));
  EXPECT_NE((idist::Device{idist::DeviceType::CUDA, 0}), (idist::Device{idist::DeviceType::CUDA, 1}));
}

TEST(DeviceKinds, IsCudaAndIsCpu) {
  EXPECT_TRUE(idist::Device{}.is_cpu());
  EXPECT_FALSE(idist::Device{}.is_cuda());
  const idist::Device gpu{idist::DeviceType::CUDA, 2};
  EXPECT_TRUE(gpu.is_cuda());
  EXPECT_FALSE(gpu.is_cpu());
  EXPECT_EQ(gpu.index, 2);
  EXPECT_EQ(idist::Device(idist::DeviceType::CUDA).index, -1);
}

// The shape of c10::Device that idist::Device converts from and to (tests/torch checks the real one).
struct FakeTorchDevice {
  std::string name;
  explicit FakeTorchDevice(const std::string& s) : name(s) {}
  bool is_cpu() const { return name == "cpu"; }
  bool is_cuda() const { return name.rfind("cuda", 0) == 0; }
  bool has_index() const { return name.find(':') != std::string::npos; }
  std::int8_t index() const { return has_index() ? std::int8_t(std::stoi(name.substr(name.find(':') + 1))) : -1; }
  std::string str() const { return name; }
};

TEST(DeviceKinds, ConvertsFromAndToATorchShapedDevice) {
  const auto take = [](const idist::Device& d) { return d; };  // where an idist::Device is expected
  EXPECT_EQ(take(FakeTorchDevice("cpu")), idist::Device{});
  EXPECT_EQ(take(FakeTorchDevice("cuda:3")), (idist::Device{idist::DeviceType::CUDA, 3}));
  EXPECT_EQ(take(FakeTorchDevice("cuda")), (idist::Device{idist::DeviceType::CUDA, 0}));
  EXPECT_TRUE(idist::Device{} == FakeTorchDevice("cpu"));
  EXPECT_FALSE(FakeTorchDevice("cuda:1") == idist::Device{});
  const FakeTorchDevice back = idist::Device{idist::DeviceType::CUDA, 5};
  EXPECT_EQ(back.str(), "cuda:5");
  try {
    take(FakeTorchDevice("mps"));
    ADD_FAILURE() << "an mps device was accepted";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("mps"), std::string::npos) << e.what();
  }
}

TEST(Groups, WorldAndRankLists) {
  const idist::Group world;
  EXPECT_TRUE(world.is_world());
  EXPECT_TRUE(world.ranks().empty());
  EXPECT_EQ(world.str(), "world");

  const idist::Group g{1, 2, 3};
  EXPECT_FALSE(g.is_world());
  EXPECT_EQ(g.ranks(), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(g.str(), "[1, 2, 3]");

  const idist::Group single{0};
  EXPECT_EQ(single.str(), "[0]");

  // Ranks are kept as given (validation happens when a collective first uses the group).
  const idist::Group unordered(std::vector<int>{3, -1, 3});
  EXPECT_EQ(unordered.str(), "[3, -1, 3]");

  // A plain rank list converts implicitly, as ignite accepts lists wherever a group goes.
  const auto take = [](const idist::Group& group) { return group.str(); };
  EXPECT_EQ(take(std::vector<int>{4, 5}), "[4, 5]");
  EXPECT_EQ(idist::Group(std::vector<int>{1, 2}), (idist::Group{1, 2}));
  EXPECT_NE(idist::Group({1, 2}), idist::Group({2, 1}));
  EXPECT_NE(idist::Group({1}), idist::Group());
}

}  // namespace

// Argument checks of the nccl collectives (no GPU needed).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "idist/error.hpp"
#include "nccl/validate.hpp"

namespace idist::nccl_backend {
namespace {

const Device kCpu{};
const Device kCuda0{DeviceType::CUDA, 0};
const Device kCuda1{DeviceType::CUDA, 1};

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(NcclValidate, BuffersOnThisRanksDeviceOrTheHostAreAccepted) {
  EXPECT_NO_THROW(check_buffer_device("all_reduce", "data", kCuda0, kCuda0));
  EXPECT_NO_THROW(check_buffer_device("all_reduce", "data", kCpu, kCuda0));
  EXPECT_NO_THROW(check_buffer_device("all_reduce", "data", kCuda1, kCuda1));
}

TEST(NcclValidate, ABufferOnAnotherDeviceNamesBothDevices) {
  const std::string msg = message_of([] { check_buffer_device("all_reduce", "data", kCuda1, kCuda0); });
  ASSERT_FALSE(msg.empty());
  EXPECT_NE(msg.find("all_reduce"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
}

TEST(NcclValidate, AllGatherNeedsGroupSizeTimesTheInput) {
  std::vector<float> in(3), out(9);
  const ConstBuffer cin{in.data(), 3, DType::Float32};
  EXPECT_NO_THROW(check_all_gather_args(cin, Buffer{out.data(), 9, DType::Float32}, 3));
  const std::string msg = message_of([&] { check_all_gather_args(cin, Buffer{out.data(), 8, DType::Float32}, 3); });
  EXPECT_NE(msg.find("8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("9"), std::string::npos) << msg;
  const std::string type_msg = message_of([&] { check_all_gather_args(cin, Buffer{out.data(), 9, DType::Int32}, 3); });
  EXPECT_NE(type_msg.find("int32"), std::string::npos) << type_msg;
  EXPECT_NE(type_msg.find("float32"), std::string::npos) << type_msg;
}

TEST(NcclValidate, AllGatherVChecksCountsAgainstTheGroupAndTheBuffers) {
  std::vector<std::int64_t> in(2), out(6);
  const ConstBuffer cin{in.data(), 2, DType::Int64};
  const Buffer bout{out.data(), 6, DType::Int64};
  const std::vector<std::size_t> counts = {1, 2, 3};
  EXPECT_NO_THROW(check_all_gather_v_args(cin, bout, counts, 3, 1));
  // counts of the wrong length
  EXPECT_NE(message_of([&] { check_all_gather_v_args(cin, bout, std::vector<std::size_t>{2, 4}, 3, 1); }).find("2 entries"),
            std::string::npos);
  // my own count disagrees with my input
  const std::string mine = message_of([&] { check_all_gather_v_args(cin, bout, counts, 3, 2); });
  EXPECT_NE(mine.find("counts[2] is 3"), std::string::npos) << mine;
  // out does not hold the sum
  const std::string sum = message_of([&] { check_all_gather_v_args(cin, Buffer{out.data(), 5, DType::Int64}, counts, 3, 1); });
  EXPECT_NE(sum.find("sum of counts = 6"), std::string::npos) << sum;
}

TEST(NcclValidate, BroadcastRootIsThePositionOfSrcInTheGroup) {
  const std::vector<int> ranks = {1, 3, 4};
  EXPECT_EQ(root_in_group(1, ranks, Group(ranks)), 0);
  EXPECT_EQ(root_in_group(3, ranks, Group(ranks)), 1);
  EXPECT_EQ(root_in_group(4, ranks, Group(ranks)), 2);
  const std::string msg = message_of([&] { root_in_group(2, ranks, Group(ranks)); });
  EXPECT_NE(msg.find("src 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 3, 4]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace idist::nccl_backend

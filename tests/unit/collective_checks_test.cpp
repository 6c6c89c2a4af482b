// The argument checks every backend shares (src/core/collective_checks.hpp): each accepts what is
// right and names what is wrong.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/collective_checks.hpp"
#include "idist/error.hpp"
#include "support/error_message.hpp"

namespace idist::core {
namespace {

using test::message_of;

TEST(CollectiveChecks, HostBuffersAreAcceptedAndDeviceBuffersNamed) {
  EXPECT_NO_THROW(check_host_buffer("gloo", OpType::AllReduce, "data", Device{}));
  const std::string msg = message_of([] {
    check_host_buffer("mpi", OpType::Broadcast, "data", Device{DeviceType::CUDA, 1});
  });
  EXPECT_NE(msg.find("broadcast: the mpi backend communicates host memory, but data is on cuda:1"), std::string::npos)
      << msg;
}

TEST(CollectiveChecks, AllGatherNeedsGroupSizeTimesTheInput) {
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

TEST(CollectiveChecks, AllGatherVChecksCountsAgainstTheGroupAndTheBuffers) {
  std::vector<std::int64_t> in(2), out(6);
  const ConstBuffer cin{in.data(), 2, DType::Int64};
  const Buffer bout{out.data(), 6, DType::Int64};
  const std::vector<std::size_t> counts = {1, 2, 3};
  EXPECT_NO_THROW(check_all_gather_v_args(cin, bout, counts, 3, 1));
  // counts of the wrong length
  EXPECT_NE(message_of([&] {
              check_all_gather_v_args(cin, bout, std::vector<std::size_t>{2, 4}, 3, 1);
            }).find("2 entries"),
            std::string::npos);
  // my own count disagrees with my input
  const std::string mine = message_of([&] { check_all_gather_v_args(cin, bout, counts, 3, 2); });
  EXPECT_NE(mine.find("counts[2] is 3"), std::string::npos) << mine;
  // out does not hold the sum
  const std::string sum = message_of([&] {
    check_all_gather_v_args(cin, Buffer{out.data(), 5, DType::Int64}, counts, 3, 1);
  });
  EXPECT_NE(sum.find("sum of counts = 6"), std::string::npos) << sum;
}

TEST(CollectiveChecks, BroadcastRootIsThePositionOfSrcInTheGroup) {
  const ProcessGroup group({1, 3, 4}, 3, 5, 0);
  EXPECT_EQ(group.rank(), 1);
  EXPECT_EQ(root_in_group(OpType::Broadcast, 1, group), 0);
  EXPECT_EQ(root_in_group(OpType::Broadcast, 3, group), 1);
  EXPECT_EQ(root_in_group(OpType::Broadcast, 4, group), 2);
  const std::string msg = message_of([&] { root_in_group(OpType::Broadcast, 2, group); });
  EXPECT_NE(msg.find("src 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[1, 3, 4]"), std::string::npos) << msg;
}

TEST(CollectiveChecks, WorldRootIsARankOfTheWorld) {
  EXPECT_NO_THROW(check_world_root(OpType::Broadcast, 0, 2));
  EXPECT_NO_THROW(check_world_root(OpType::Broadcast, 1, 2));
  EXPECT_NE(message_of([] {
              check_world_root(OpType::Broadcast, 2, 2);
            }).find("broadcast: src should be a rank in [0, 2), but given 2"),
            std::string::npos);
  EXPECT_NE(message_of([] { check_world_root(OpType::Broadcast, -1, 2); }).find("given -1"), std::string::npos);
}

TEST(CollectiveChecks, GroupRanksAreValidatedAndSorted) {
  EXPECT_EQ(validated_ranks(Group({3, 0, 2}), 4), (std::vector<int>{0, 2, 3}));
  EXPECT_NE(message_of([] { validated_ranks(Group({0, 4}), 4); }).find("rank 4 is outside [0, 4)"), std::string::npos);
  EXPECT_NE(message_of([] { validated_ranks(Group({1, 1}), 4); }).find("distinct"), std::string::npos);
}

}  // namespace
}  // namespace idist::core

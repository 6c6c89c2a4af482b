// The nccl collectives' buffer placement rule (no GPU needed); the shared argument checks are in
// tests/unit/collective_checks_test.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "idist/error.hpp"
#include "nccl/validate.hpp"
#include "support/error_message.hpp"

namespace idist::nccl_backend {
namespace {

const Device kCpu{};
const Device kCuda0{DeviceType::CUDA, 0};
const Device kCuda1{DeviceType::CUDA, 1};

using test::message_of;

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

}  // namespace
}  // namespace idist::nccl_backend

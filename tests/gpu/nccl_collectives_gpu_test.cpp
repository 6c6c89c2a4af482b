// The nccl backend's collectives on device memory, at any world size (one process per GPU).
// Expectations are computed from the rank and world size, so they hold for 1 and for N ranks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "idist/idist.hpp"

namespace idist::gpu_test {
namespace {

int ws() { return get_world_size(); }
int rk() { return get_rank(); }

class NcclCollectives : public GpuTest {};

TEST_F(NcclCollectives, ConfigurationIsNcclOnCudaLocalRank) {
  EXPECT_EQ(backend(), std::optional<std::string>("nccl"));
  EXPECT_EQ(model_name(), "native-dist");
  const Device d = device();
  EXPECT_EQ(d.type, DeviceType::CUDA);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(d.index, count > get_local_rank() ? get_local_rank() : 0);
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, d.index) << "initialize must make the rank's device current";
}

TEST_F(NcclCollectives, AllReduceSumOfFloatsOnDevice) {
  const std::size_t n = 1000;
  std::vector<float> host(n);
  for (std::size_t i = 0; i < n; ++i) host[i] = float(rk() + 1) + float(i);
  DeviceBuffer<float> d(host);
  all_reduce(d.span());
  const std::vector<float> out = d.host();
  const float ranks_sum = float(ws() * (ws() + 1) / 2);
  for (std::size_t i = 0; i < n; i += 97) EXPECT_EQ(out[i], ranks_sum + float(ws()) * float(i)) << i;
}

TEST_F(NcclCollectives, AllReduceEveryOpOnInt32) {
  // ignite's case: 2 * rank + 1 under each op.
  const std::int32_t mine = 2 * rk() + 1;
  std::int32_t sum = 0, prod = 1, mn = mine, mx = mine, band = -1, bor = 0;
  for (int r = 0; r < ws(); ++r) {
    const std::int32_t v = 2 * r + 1;
    sum += v, prod *= v, mn = std::min(mn, v), mx = std::max(mx, v), band &= v, bor |= v;
  }
  const std::vector<std::pair<ReduceOp, std::int32_t>> cases = {{ReduceOp::Sum, sum},  {ReduceOp::Product, prod},
                                                                {ReduceOp::Min, mn},   {ReduceOp::Max, mx},
                                                                {ReduceOp::And, band}, {ReduceOp::Or, bor}};
  for (const auto& [op, expected] : cases) {
    DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(3, mine));
    all_reduce(d.span(), op);
    EXPECT_EQ(d.host(), std::vector<std::int32_t>(3, expected)) << to_string(op);
  }
}

TEST_F(NcclCollectives, Int16UsesTheHostFallbackExactly) {
  std::int16_t sum = 0, band = -1;
  for (int r = 0; r < ws(); ++r) sum = std::int16_t(sum + (r + 1) * 100), band = std::int16_t(band & (0x0ff0 | r));
  DeviceBuffer<std::int16_t> d(std::vector<std::int16_t>(5, std::int16_t((rk() + 1) * 100)));
  all_reduce(d.span(), ReduceOp::Sum);
  EXPECT_EQ(d.host(), std::vector<std::int16_t>(5, sum));
  DeviceBuffer<std::int16_t> b(std::vector<std::int16_t>(5, std::int16_t(0x0ff0 | rk())));
  all_reduce(b.span(), ReduceOp::And);
  EXPECT_EQ(b.host(), std::vector<std::int16_t>(5, band));
}

TEST_F(NcclCollectives, HalfAndBFloat16SumNatively) {
  const float expected = float(ws() * (ws() + 1) / 2);
  DeviceBuffer<Half> h(std::vector<Half>(64, Half(float(rk() + 1))));
  all_reduce(h.span());
  for (Half v : h.host()) ASSERT_EQ(float(v), expected);
  DeviceBuffer<BFloat16> b(std::vector<BFloat16>(64, BFloat16(float(rk() + 1))));
  all_reduce(b.span(), ReduceOp::Max);
  for (BFloat16 v : b.host()) ASSERT_EQ(float(v), float(ws()));
}

TEST_F(NcclCollectives, BoolReducesLogically) {
  // true on even ranks only: "any" is true, "all" is true only in a world of 1.
  const bool mine = rk() % 2 == 0;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Or, ReduceOp::Max}) {
    DeviceBuffer<bool> d(std::vector<bool>{mine, false});
    all_reduce(d.span(), op);
    const std::vector<bool> out = d.host();
    EXPECT_TRUE(out[0]) << to_string(op);
    EXPECT_FALSE(out[1]) << to_string(op);
  }
  for (ReduceOp op : {ReduceOp::Product, ReduceOp::And, ReduceOp::Min}) {
    DeviceBuffer<bool> d(std::vector<bool>{mine, true});
    all_reduce(d.span(), op);
    const std::vector<bool> out = d.host();
    EXPECT_EQ(out[0], ws() == 1) << to_string(op);
    EXPECT_TRUE(out[1]) << to_string(op);
  }
}

TEST_F(NcclCollectives, ScalarsAndHostVectorsAreStagedThroughTheDevice) {
  EXPECT_EQ(all_reduce(rk() + 1), ws() * (ws() + 1) / 2);
  EXPECT_EQ(all_reduce(double(rk()) + 0.5, ReduceOp::Max), double(ws() - 1) + 0.5);
  std::vector<std::int64_t> host(10, std::int64_t(1) << 40);
  all_reduce(host);  // host memory in a span: recognized and staged
  EXPECT_EQ(host, std::vector<std::int64_t>(10, std::int64_t(ws()) << 40));
}

TEST_F(NcclCollectives, AllGatherOfDeviceSpans) {
  DeviceBuffer<std::int32_t> in(std::vector<std::int32_t>{rk(), 10 * rk()});
  DeviceBuffer<std::int32_t> out(std::size_t(2 * ws()));
  all_gather_async(std::span<const std::int32_t>(in.data(), 2), out.span()).wait();
  std::vector<std::int32_t> expected;
  for (int r = 0; r < ws(); ++r) expected.insert(expected.end(), {r, 10 * r});
  EXPECT_EQ(out.host(), expected);
}

TEST_F(NcclCollectives, AllGatherOfDifferentLengthsOnDevice) {
  // Rank r contributes r + 1 elements of value r (the model's all_gather_v on device memory).
  std::vector<std::size_t> counts;
  std::vector<double> expected;
  for (int r = 0; r < ws(); ++r) {
    counts.push_back(std::size_t(r + 1));
    expected.insert(expected.end(), std::size_t(r + 1), double(r));
  }
  DeviceBuffer<double> in(std::vector<double>(std::size_t(rk() + 1), double(rk())));
  DeviceBuffer<double> out(expected.size());
  current_model()
      .all_gather_v(ConstBuffer{in.data(), in.size(), DType::Float64, device()},
                    Buffer{out.data(), out.size(), DType::Float64, device()}, counts, Group{})
      .wait();
  EXPECT_EQ(out.host(), expected);
}

TEST_F(NcclCollectives, StringsAndObjectsOfAnyLength) {
  const std::string mine = rk() == 0 ? "abc" : std::string(std::size_t(90000 + rk()), char('a' + rk() % 26));
  const std::vector<std::string> all = all_gather(mine);
  ASSERT_EQ(all.size(), std::size_t(ws()));
  EXPECT_EQ(all[0], "abc");
  for (int r = 1; r < ws(); ++r) EXPECT_EQ(all[std::size_t(r)].size(), std::size_t(90000 + r));
  for (int src = 0; src < ws(); ++src)
    EXPECT_EQ(broadcast(rk() == src ? std::string("héllo ") + std::to_string(src) : std::string(), src),
              "héllo " + std::to_string(src));
}

TEST_F(NcclCollectives, BroadcastOfDeviceSpansFromEverySource) {
  for (int src = 0; src < ws(); ++src) {
    DeviceBuffer<float> d(std::vector<float>(300, float(rk() * 7 + 1)));
    broadcast(d.span(), src);
    EXPECT_EQ(d.host(), std::vector<float>(300, float(src * 7 + 1))) << "src " << src;
  }
  EXPECT_THROW(broadcast(1, ws()), ValueError);
}

TEST_F(NcclCollectives, ManyAsyncCollectivesCompleteInOrder) {
  std::vector<std::unique_ptr<DeviceBuffer<float>>> bufs;
  std::vector<Work> works;
  for (int i = 0; i < 32; ++i) {
    bufs.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(4096, float(i + rk()))));
    works.push_back(all_reduce_async(bufs.back()->span()));
  }
  for (auto& w : works) w.wait();
  const float ranks = float(ws() * (ws() - 1) / 2);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(bufs[std::size_t(i)]->host()[4095], float(i * ws()) + ranks) << i;
}

TEST_F(NcclCollectives, BarrierCompletes) {
  barrier();
  Work w = barrier_async();
  w.wait();
  EXPECT_TRUE(w.is_completed());
}

TEST_F(NcclCollectives, GroupsRunOnTheirMembersOnly) {
  if (ws() == 1) {
    const Group g = new_group({0});
    EXPECT_EQ(all_reduce(5, ReduceOp::Sum, g), 5);
    return;
  }
  std::vector<int> ranks(std::size_t(ws() - 1));
  std::iota(ranks.begin(), ranks.end(), 1);
  const Group g = new_group(ranks);
  DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(4, rk()));
  all_reduce(d.span(), ReduceOp::Sum, g);
  const std::int32_t members_sum = ws() * (ws() - 1) / 2;
  EXPECT_EQ(d.host(), std::vector<std::int32_t>(4, rk() == 0 ? 0 : members_sum));
  barrier(g);
}

TEST_F(NcclCollectives, MemoryOfAnotherDeviceIsAValueErrorNamingBoth) {
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  if (count < 2) GTEST_SKIP() << "needs 2 visible GPUs in this process (sees " << count << ")";
  const int mine = device().index;
  const int other = (mine + 1) % count;
  IDIST_CUDA_OK(cudaSetDevice(other));
  void* p = nullptr;
  IDIST_CUDA_OK(cudaMalloc(&p, 16 * sizeof(float)));
  IDIST_CUDA_OK(cudaSetDevice(mine));
  try {
    all_reduce(std::span<float>(static_cast<float*>(p), 16));
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cuda:" + std::to_string(other)), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:" + std::to_string(mine)), std::string::npos) << msg;
  }
  IDIST_CUDA_OK(cudaFree(p));
}

TEST_F(NcclCollectives, BitwiseOpsOnFloatsAreValueErrors) {
  DeviceBuffer<float> d(std::vector<float>(4, 1.0f));
  EXPECT_THROW(all_reduce(d.span(), ReduceOp::And), ValueError);
  EXPECT_THROW(all_reduce(d.span(), "OR"), ValueError);
}

}  // namespace
}  // namespace idist::gpu_test

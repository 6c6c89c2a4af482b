// Stream semantics of the nccl backend (docs/nccl.md): a collective runs after the work already
// enqueued on the caller's stream, whichever stream that is; wait() orders the caller's stream after
// the collective without blocking the host, wait(timeout) and synchronize() block it.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gpu_support.hpp"
#include "idist/idist.hpp"
#include "nccl/stream_provider.hpp"

namespace idist::gpu_test {
namespace {

using namespace std::chrono_literals;

// A host function that holds its stream for 300 ms: if the collective did not wait for the caller's
// stream, it would read the buffer before the memset behind this delay.
void hold_stream(void*) { std::this_thread::sleep_for(300ms); }

// 0x01 in every byte of an int32: memset's value, summed over the ranks.
constexpr std::int32_t kPattern = 0x01010101;

class NcclStreams : public GpuTest {};

TEST_F(NcclStreams, ACollectiveWaitsForTheDefaultStream) {
  DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(1024, 0));
  IDIST_CUDA_OK(cudaLaunchHostFunc(nullptr, &hold_stream, nullptr));
  IDIST_CUDA_OK(cudaMemsetAsync(d.data(), 0x01, d.size() * sizeof(std::int32_t), nullptr));
  all_reduce(d.span());
  const std::vector<std::int32_t> out = d.host();
  EXPECT_EQ(out.front(), kPattern * get_world_size());
  EXPECT_EQ(out.back(), kPattern * get_world_size());
}

cudaStream_t g_user_stream = nullptr;
void* user_stream(int) { return g_user_stream; }

TEST_F(NcclStreams, ACollectiveWaitsForTheProvidersStream) {
  IDIST_CUDA_OK(cudaStreamCreateWithFlags(&g_user_stream, cudaStreamNonBlocking));
  nccl_backend::set_stream_provider(&user_stream);
  DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(1024, 0));
  IDIST_CUDA_OK(cudaLaunchHostFunc(g_user_stream, &hold_stream, nullptr));
  IDIST_CUDA_OK(cudaMemsetAsync(d.data(), 0x01, d.size() * sizeof(std::int32_t), g_user_stream));
  Work w = all_reduce_async(d.span());
  w.wait();
  // wait() made the user's stream wait for the collective: a copy enqueued there sees the result.
  std::vector<std::int32_t> out(d.size());
  IDIST_CUDA_OK(
      cudaMemcpyAsync(out.data(), d.data(), out.size() * sizeof(std::int32_t), cudaMemcpyDeviceToHost, g_user_stream));
  IDIST_CUDA_OK(cudaStreamSynchronize(g_user_stream));
  nccl_backend::set_stream_provider(nullptr);
  IDIST_CUDA_OK(cudaStreamDestroy(g_user_stream));
  g_user_stream = nullptr;
  EXPECT_EQ(out.front(), kPattern * get_world_size());
  EXPECT_EQ(out.back(), kPattern * get_world_size());
}

TEST_F(NcclStreams, IsCompletedTurnsTrueWithoutWaiting) {
  DeviceBuffer<float> d(std::vector<float>(1 << 20, 1.0f));
  Work w = all_reduce_async(d.span());
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!w.is_completed() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(w.is_completed());
  w.wait();
  EXPECT_EQ(d.host()[12345], float(get_world_size()));
}

TEST_F(NcclStreams, WaitOrdersTheStreamWithoutBlockingTheHost) {
  DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(1024, 0));
  IDIST_CUDA_OK(cudaLaunchHostFunc(nullptr, &hold_stream, nullptr));  // the stream is busy for 300 ms
  IDIST_CUDA_OK(cudaMemsetAsync(d.data(), 0x01, d.size() * sizeof(std::int32_t), nullptr));
  Work w = all_reduce_async(d.span());
  const auto start = std::chrono::steady_clock::now();
  w.wait();
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_FALSE(w.is_completed()) << "wait() returned after the collective: it blocked the host";
  EXPECT_LT(waited, 250ms);
  w.synchronize();  // the host waits now
  EXPECT_TRUE(w.is_completed());
  const std::vector<std::int32_t> out = d.host();
  EXPECT_EQ(out.front(), kPattern * get_world_size());
  EXPECT_EQ(out.back(), kPattern * get_world_size());
}

TEST_F(NcclStreams, WaitWithATimeoutBlocksTheHost) {
  DeviceBuffer<std::int32_t> d(std::vector<std::int32_t>(1024, 0));
  IDIST_CUDA_OK(cudaLaunchHostFunc(nullptr, &hold_stream, nullptr));
  Work w = all_reduce_async(d.span());
  w.wait(30s);  // as torch's work.wait(timeout): the host waits for the GPU
  EXPECT_TRUE(w.is_completed());
}

TEST_F(NcclStreams, HostResultsAreValidWhenWaitReturns) {
  // A host scalar goes host -> pinned -> device -> NCCL -> device -> pinned -> host; wait() copies
  // the last step, so the value is final exactly when it returns.
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(all_reduce(i + get_rank()), i * get_world_size() + get_world_size() * (get_world_size() - 1) / 2);
}

}  // namespace
}  // namespace idist::gpu_test

// The LibTorch layer on CUDA orders collectives as ProcessGroupNCCL does (docs/nccl.md): a collective
// on a CUDA tensor waits for LibTorch's current stream of that device, also a side stream under a
// CUDAStreamGuard, and wait() makes that stream wait for the collective without a host block. Built
// only against a LibTorch with CUDA (IDIST_TORCH_CUDA); gpu_main.cpp initializes nccl.
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>

#include "gpu_support.hpp"
#include "idist/idist.hpp"

namespace idist::gpu_test {
namespace {

using namespace std::chrono_literals;

// About half a second of GPU time on current GPUs: long enough that a collective not ordered after
// it reads the tensor before the kernel behind it wrote.
constexpr std::int64_t kSleepCycles = 1'000'000'000;

class TorchStreams : public GpuTest {};

TEST_F(TorchStreams, ACollectiveSeesTheSideStreamsWritesWithoutAHostSync) {
  const torch::Device dev = torch::Device(torch::kCUDA, idist::get_local_rank());
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, dev.index());
  c10::cuda::CUDAStreamGuard guard(side);
  torch::Tensor t = torch::zeros({1 << 20}, torch::TensorOptions().device(dev));
  at::cuda::sleep(kSleepCycles);  // on the side stream, ahead of the write below
  t.fill_(2.0f);
  Work w = idist::all_reduce_async(t);
  const auto start = std::chrono::steady_clock::now();
  w.wait();  // the side stream waits for the collective; the host does not
  const auto waited = std::chrono::steady_clock::now() - start;
  const torch::Tensor host = t.cpu();  // a copy on the side stream: after the collective
  EXPECT_TRUE(torch::all(host == 2.0f * float(get_world_size())).item<bool>())
      << "the collective did not see the side stream's write (first element " << host[0].item<float>() << ")";
  EXPECT_LT(waited, 200ms) << "wait() blocked the host";
}

TEST_F(TorchStreams, BlockingCollectivesSeeTheSideStreamsWrites) {
  const torch::Device dev = torch::Device(torch::kCUDA, idist::get_local_rank());
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, dev.index());
  c10::cuda::CUDAStreamGuard guard(side);
  torch::Tensor t = torch::zeros({4096}, torch::TensorOptions().device(dev));
  at::cuda::sleep(kSleepCycles);
  t.fill_(1.0f);
  idist::all_reduce(t);
  EXPECT_TRUE(torch::all(t.cpu() == float(get_world_size())).item<bool>());
}

TEST_F(TorchStreams, AutoModelOnASideStreamAveragesTheGradients) {
  const torch::Device dev = torch::Device(torch::kCUDA, idist::get_local_rank());
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, dev.index());
  c10::cuda::CUDAStreamGuard guard(side);
  torch::manual_seed(0);
  auto model = idist::auto_model(torch::nn::Linear(64, 8));
  const torch::Tensor x = torch::full({16, 64}, float(get_rank() + 1), torch::TensorOptions().device(dev));
  at::cuda::sleep(kSleepCycles / 4);
  model->forward(x).sum().backward();
  // Every rank's gradient of the weight is the batch's column sums: the average over the ranks.
  const float mean_input = float(get_world_size() + 1) / 2.0f;
  const torch::Tensor g = model->parameters()[0].grad().cpu();
  EXPECT_TRUE(torch::allclose(g, torch::full_like(g, 16.0f * mean_input)))
      << "weight gradient " << g.mean().item<float>() << ", expected " << 16.0f * mean_input;
}

}  // namespace
}  // namespace idist::gpu_test

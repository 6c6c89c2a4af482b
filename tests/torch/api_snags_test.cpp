// What a LibTorch program meets in its first hour: tensor outputs given as views or temporaries
// (written through to their base), idist::Device beside torch::Device, the unsigned scalar types,
// and the option structs of the LibTorch layer under designated initializers (a missing-field
// warning is an error in this file). At any world size.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "idist/idist.hpp"
#include "idist/torch/auto_model_options.hpp"
#include "idist/torch/checkpoint.hpp"
#include "idist/torch/join.hpp"
#include "idist/torch/loader_options.hpp"
#include "idist/torch/powersgd_hook.hpp"
#include "idist/torch/zero.hpp"

#pragma GCC diagnostic error "-Wmissing-field-initializers"

namespace {

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

// Rank r's values: row i holds (i + 1) * (r + 1).
torch::Tensor rows_of(int r) {
  return (torch::arange(1, 4, torch::kLong).unsqueeze(1).expand({3, 2}) * (r + 1)).contiguous();
}

torch::Tensor sum_of_ranks() {
  auto total = torch::zeros({3, 2}, torch::kLong);
  for (int r = 0; r < ws(); ++r) total += rows_of(r);
  return total;
}

TEST(TensorOutputs, ReduceIntoAViewReachesTheBase) {
  const int dst = ws() - 1;
  auto base = rows_of(rank());
  idist::reduce(base.view(-1), dst);  // a temporary view: accepted since the parameter is const&
  EXPECT_TRUE(base.equal(rank() == dst ? sum_of_ranks() : rows_of(rank()))) << base;

  // A non-contiguous view is staged and copied back through the view.
  auto wide = torch::zeros({2, 3}, torch::kLong);
  wide.t().copy_(rows_of(rank()));
  idist::reduce(wide.t(), dst, idist::ReduceOp::Max);
  const auto want = rank() == dst ? rows_of(ws() - 1) : rows_of(rank());
  EXPECT_TRUE(wide.t().equal(want)) << wide;
}

TEST(TensorOutputs, RecvAndIrecvIntoRowsOfABase) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  // Ranks 0 and 1 exchange a row each; the others take no part.
  if (rank() > 1) return;
  const int peer = 1 - rank();
  auto base = torch::full({2, 4}, -1, torch::kInt);
  const auto mine = torch::arange(4, torch::kInt) + 10 * (rank() + 1);
  const auto theirs = torch::arange(4, torch::kInt) + 10 * (peer + 1);
  if (rank() == 0) {
    idist::send(mine, peer, 1);
    idist::recv(base[0], peer, 1);
    idist::send(mine, peer, 2);
    idist::irecv(base.select(0, 1), peer, 2).wait();
  } else {
    idist::recv(base[0], peer, 1);
    idist::send(mine, peer, 1);
    idist::irecv(base.select(0, 1), peer, 2).wait();
    idist::send(mine, peer, 2);
  }
  EXPECT_TRUE(base[0].equal(theirs)) << base;
  EXPECT_TRUE(base[1].equal(theirs)) << base;
}

idist::Device pass_through(const idist::Device& d) { return d; }

TEST(Devices, IdistAndTorchDevicesConvertBothWays) {
  const torch::Device d = idist::device();  // the test registrations hide GPUs
  EXPECT_EQ(d.str(), idist::device().str());
  EXPECT_EQ(idist::device().is_cuda(), d.is_cuda());
  EXPECT_EQ(idist::device().is_cpu(), d.is_cpu());
  // A torch::Device where an idist::Device is expected.
  EXPECT_EQ(pass_through(torch::Device(torch::kCPU)), idist::Device{});
  EXPECT_EQ(pass_through(torch::Device(torch::kCUDA, 3)), (idist::Device{idist::DeviceType::CUDA, 3}));
  EXPECT_TRUE(pass_through(torch::Device("cuda:1")).is_cuda());
  const idist::Device from_torch = torch::Device("cuda:2");
  EXPECT_EQ(from_torch.index, 2);
  // Mixed comparisons pick neither conversion over the other.
  EXPECT_TRUE(idist::Device{} == torch::Device(torch::kCPU));
  EXPECT_TRUE(torch::Device(torch::kCUDA, 1) == (idist::Device{idist::DeviceType::CUDA, 1}));
  EXPECT_FALSE(idist::Device{} == torch::Device(torch::kCUDA, 0));
  // Round trip.
  const torch::Device back = idist::Device{idist::DeviceType::CUDA, 4};
  EXPECT_EQ(back, torch::Device(torch::kCUDA, 4));
  EXPECT_EQ(idist::Device(back), (idist::Device{idist::DeviceType::CUDA, 4}));
  try {
    pass_through(torch::Device(torch::kMPS));
    ADD_FAILURE() << "an mps device was accepted";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("mps"), std::string::npos) << e.what();
  }
}

TEST(UnsignedTypes, ScalarTypesMapWhereLibTorchHasThem) {
  for (idist::DType t : {idist::DType::UInt16, idist::DType::UInt32, idist::DType::UInt64}) {
    const c10::ScalarType st = idist::to_scalar_type(t);
    if constexpr (idist::detail::has_wide_unsigned<>) {
      EXPECT_EQ(idist::to_dtype(st), t) << idist::to_string(t);
      EXPECT_EQ(c10::elementSize(st), idist::dtype_size(t)) << idist::to_string(t);
    } else {
      EXPECT_EQ(st, c10::ScalarType::Undefined) << idist::to_string(t);
    }
  }
  // uint8 tensors reduce as unsigned: 200 + 100 wraps around at 256.
  auto t = torch::full({2}, rank() == 0 ? 200 : 100, torch::kByte);
  idist::all_reduce(t);
  const std::int64_t want = (200 + 100 * std::int64_t(ws() - 1)) % 256;
  EXPECT_EQ(t[0].item<std::int64_t>(), want);
  EXPECT_EQ(t[1].item<std::int64_t>(), want);
}

TEST(OptionStructs, DesignatedInitializersOfTheLibTorchLayer) {
  const idist::DataLoaderOptions loader{.batch_size = 8};
  EXPECT_EQ(loader.batch_size, 8u);
  EXPECT_EQ(loader.num_workers, 0u);
  EXPECT_EQ(loader.shuffle, std::nullopt);
  const idist::AutoModelOptions model{.sync_bn = true};
  EXPECT_TRUE(model.broadcast_buffers);
  EXPECT_EQ(model.bucket_cap_mb, std::nullopt);
  const idist::CheckpointOptions checkpoint{.n_saved = 2};
  EXPECT_TRUE(checkpoint.require_empty);
  EXPECT_EQ(checkpoint.save_on_rank, 0);
  const idist::ZeroRedundancyOptimizerOptions zero{.parameters_as_bucket_view = false};
  EXPECT_TRUE(zero.group.is_world());
  const idist::JoinOptions join{.enable = false};
  EXPECT_TRUE(join.divide_by_initial_world_size);
  const idist::PowerSGDOptions powersgd{.matrix_approximation_rank = 2};
  EXPECT_EQ(powersgd.start_powersgd_iter, 1000);
  const idist::InitOptions init{.timeout = std::chrono::seconds(3)};
  EXPECT_EQ(init.debug, std::nullopt);
}

}  // namespace

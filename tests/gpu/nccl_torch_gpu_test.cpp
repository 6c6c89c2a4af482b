// The LibTorch layer's reduce, gather, scatter, reduce_scatter, all_to_all (even and with split sizes)
// and send / recv / isend / irecv on CUDA tensors over the nccl backend, blocking and non-blocking, at
// any world size (one process per GPU). Built where LibTorch has CUDA. Expectations are computed on
// the host from the rank and the world size, in int64 and then cast (exact in every type used).
//
// Results are read with .cpu(), a copy on the current CUDA stream that the host waits for: ordered
// after Work::wait() both where wait() blocks the host and where it only makes the caller's stream
// wait for the operation, as ProcessGroupNCCL's work.wait() does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_support.hpp"
#include "idist/idist.hpp"
#include "idist/torch.hpp"

namespace idist::gpu_test {
namespace {

int ws() { return get_world_size(); }
int rk() { return get_rank(); }
torch::Device gpu() { return idist::device(); }

// Element types whose sums of small integers are exact.
const std::vector<c10::ScalarType> kTypes = {torch::kFloat, torch::kDouble, torch::kInt,
                                             torch::kLong,  torch::kHalf,   torch::kBFloat16};

// Rank r's (rows, cols) tensor on the host: row index + r + 1.
torch::Tensor host_input(int r, std::int64_t rows, std::int64_t cols, c10::ScalarType st) {
  return (torch::arange(rows, torch::kLong).unsqueeze(1).expand({rows, cols}) + r + 1).to(st);
}
torch::Tensor gpu_input(int r, std::int64_t rows, std::int64_t cols, c10::ScalarType st) {
  return host_input(r, rows, cols, st).to(gpu());
}
torch::Tensor host_sum(std::int64_t rows, std::int64_t cols, c10::ScalarType st) {
  auto total = torch::zeros({rows, cols}, torch::kLong);
  for (int r = 0; r < ws(); ++r) total += host_input(r, rows, cols, torch::kLong);
  return total.to(st);
}

// `t` on the host, after what was issued on its stream (see the file comment).
torch::Tensor on_host(const torch::Tensor& t) { return t.cpu(); }

class NcclTensors : public GpuTest {};

TEST_F(NcclTensors, ReduceToEveryDestinationOverDTypes) {
  for (auto st : kTypes)
    for (int dst = 0; dst < ws(); ++dst)
      for (bool async : {false, true}) {
        auto t = gpu_input(rk(), 4, 3, st);
        if (async)
          idist::reduce_async(t, dst).wait();
        else
          idist::reduce(t, dst);
        EXPECT_EQ(t.device(), gpu());
        const auto expected = rk() == dst ? host_sum(4, 3, st) : host_input(rk(), 4, 3, st);
        EXPECT_TRUE(on_host(t).equal(expected))
            << c10::toString(st) << " dst " << dst << (async ? " async" : "") << "\n"
            << on_host(t);
      }
}

TEST_F(NcclTensors, ReduceIntoANonContiguousTensorAndIntoAHostTensor) {
  // Staged in a contiguous copy on the device and written back; a host tensor through pinned memory.
  auto base = gpu_input(rk(), 3, 4, torch::kLong);
  auto view = base.t();
  ASSERT_FALSE(view.is_contiguous());
  idist::reduce(view, 0, ReduceOp::Max);
  EXPECT_TRUE(
      on_host(base).equal(rk() == 0 ? host_input(ws() - 1, 3, 4, torch::kLong) : host_input(rk(), 3, 4, torch::kLong)))
      << on_host(base);
  auto cpu = host_input(rk(), 2, 2, torch::kDouble);
  idist::reduce(cpu, 0);
  EXPECT_TRUE(cpu.is_cpu());
  EXPECT_TRUE(cpu.equal(rk() == 0 ? host_sum(2, 2, torch::kDouble) : host_input(rk(), 2, 2, torch::kDouble))) << cpu;
}

TEST_F(NcclTensors, GatherToEveryDestination) {
  for (auto st : {torch::kFloat, torch::kLong, torch::kBFloat16})
    for (int dst = 0; dst < ws(); ++dst) {
      const auto parts = idist::gather(gpu_input(rk(), 2, 3, st), dst);
      if (rk() != dst) {
        EXPECT_TRUE(parts.empty());
        continue;
      }
      ASSERT_EQ(parts.size(), std::size_t(ws()));
      for (int r = 0; r < ws(); ++r) {
        EXPECT_EQ(parts[std::size_t(r)].device(), gpu());
        EXPECT_TRUE(on_host(parts[std::size_t(r)]).equal(host_input(r, 2, 3, st)))
            << c10::toString(st) << " part " << r;
      }
    }
  // Into a preallocated output; off the root no output is passed.
  const int dst = ws() - 1;
  auto out =
      rk() == dst ? torch::full({2 * ws(), 3}, -1, torch::TensorOptions(torch::kInt).device(gpu())) : torch::Tensor();
  idist::gather_async(gpu_input(rk(), 2, 3, torch::kInt), out, dst).wait();
  if (rk() == dst) {
    for (int r = 0; r < ws(); ++r)
      EXPECT_TRUE(on_host(out.narrow(0, 2 * r, 2)).equal(host_input(r, 2, 3, torch::kInt))) << "part " << r;
  }
}

TEST_F(NcclTensors, ScatterFromEverySource) {
  for (auto st : {torch::kDouble, torch::kInt, torch::kHalf})
    for (int src = 0; src < ws(); ++src) {
      std::vector<torch::Tensor> chunks;
      if (rk() == src)
        for (int r = 0; r < ws(); ++r) chunks.push_back(gpu_input(10 * r, 3, 2, st));
      const auto mine = idist::scatter(chunks, src);
      ASSERT_TRUE(mine.defined());
      EXPECT_EQ(mine.device(), gpu());
      EXPECT_TRUE(on_host(mine).equal(host_input(10 * rk(), 3, 2, st))) << c10::toString(st) << " src " << src;
    }
  const int src = ws() - 1;
  auto out = torch::full({2}, -1.0, torch::TensorOptions(torch::kDouble).device(gpu()));
  const auto in =
      rk() == src ? torch::arange(2 * ws(), torch::TensorOptions(torch::kDouble).device(gpu())) : torch::Tensor();
  idist::scatter_async(in, out, src).wait();
  EXPECT_TRUE(on_host(out).equal(torch::arange(2 * rk(), 2 * rk() + 2, torch::kDouble))) << on_host(out);
}

TEST_F(NcclTensors, ReduceScatterGivesEachRankItsRows) {
  const std::int64_t k = 2;
  for (auto st : kTypes) {
    const auto out = idist::reduce_scatter(gpu_input(rk(), ws() * k, 3, st));
    EXPECT_EQ(out.device(), gpu());
    EXPECT_TRUE(on_host(out).equal(host_sum(ws() * k, 3, st).narrow(0, rk() * k, k))) << c10::toString(st) << "\n"
                                                                                      << on_host(out);
  }
  auto out = torch::full({k, 1}, -1, torch::TensorOptions(torch::kInt).device(gpu()));
  idist::reduce_scatter_async(gpu_input(rk(), ws() * k, 1, torch::kInt), out, ReduceOp::Min).wait();
  EXPECT_TRUE(on_host(out).equal(host_input(0, ws() * k, 1, torch::kInt).narrow(0, rk() * k, k))) << on_host(out);
}

TEST_F(NcclTensors, AllToAllOfEqualBlocks) {
  const std::int64_t k = 2;
  for (auto st : {torch::kFloat, torch::kInt, torch::kBFloat16}) {
    // Row q of rank r: r * 8 + q (exact in bfloat16 for up to 8 ranks).
    const auto rows = [](int r, std::int64_t from, std::int64_t n, c10::ScalarType t) {
      return (torch::arange(from, from + n, torch::kLong) + 8 * r).unsqueeze(1).expand({n, 2}).to(t);
    };
    const auto out = idist::all_to_all(rows(rk(), 0, ws() * k, st).to(gpu()));
    EXPECT_EQ(out.device(), gpu());
    const auto got = on_host(out);
    for (int i = 0; i < ws(); ++i)
      EXPECT_TRUE(got.narrow(0, i * k, k).equal(rows(i, rk() * k, k, st))) << c10::toString(st) << " block " << i;
  }
  const auto in = torch::full({ws()}, rk(), torch::TensorOptions(torch::kLong).device(gpu()));
  auto out = torch::full({ws()}, -1, torch::TensorOptions(torch::kLong).device(gpu()));
  idist::all_to_all_async(in, out).wait();
  EXPECT_TRUE(on_host(out).equal(torch::arange(ws(), torch::kLong))) << on_host(out);
}

TEST_F(NcclTensors, AllToAllWithSplitSizes) {
  // Rank r sends r + j + 1 rows to rank j; row q of that block holds r * 1000 + j * 10 + q.
  const auto block = [](int from, int to) {
    return (torch::arange(from + to + 1, torch::kDouble) + from * 1000 + to * 10).unsqueeze(1).repeat({1, 2});
  };
  std::vector<std::int64_t> in_splits, out_splits;
  std::vector<torch::Tensor> mine, expected;
  for (int j = 0; j < ws(); ++j) {
    in_splits.push_back(rk() + j + 1);
    out_splits.push_back(j + rk() + 1);
    mine.push_back(block(rk(), j));
    expected.push_back(block(j, rk()));
  }
  const auto input = torch::cat(mine).to(gpu());
  const auto out = idist::all_to_all(input, out_splits, in_splits);
  EXPECT_EQ(out.device(), gpu());
  EXPECT_TRUE(on_host(out).equal(torch::cat(expected))) << on_host(out);
  auto preallocated = torch::full_like(out, -1.0);
  idist::all_to_all_async(input, preallocated, out_splits, in_splits).wait();
  EXPECT_TRUE(on_host(preallocated).equal(torch::cat(expected))) << on_host(preallocated);
}

TEST_F(NcclTensors, SendAndRecvRefuseThisRank) {
  auto t = torch::ones({4}, torch::TensorOptions(torch::kFloat).device(gpu()));
  EXPECT_THROW(idist::send(t, rk()), ValueError);
  EXPECT_THROW(idist::recv(t, rk()), ValueError);
  EXPECT_THROW(idist::isend(t, ws()), ValueError);
  EXPECT_THROW(idist::irecv(t, -1), ValueError);
}

TEST_F(NcclTensors, SendRecvAndIsendIrecvAroundTheRing) {
  if (ws() < 2) GTEST_SKIP() << "needs 2 ranks (a message to this rank is refused: see SendAndRecvRefuseThisRank)";
  const int next = (rk() + 1) % ws();
  const int prev = (rk() + ws() - 1) % ws();
  const auto payload = [](int r) { return torch::arange(200000, torch::kLong) + std::int64_t(r) * 1000000; };
  // One stream carries both in issue order: even ranks send first, odd ranks receive first, so that
  // no send waits for a receive queued behind its peer's own send.
  for (bool async : {false, true}) {
    const auto out = payload(rk()).to(gpu());
    auto in = torch::full({200000}, -1, torch::TensorOptions(torch::kLong).device(gpu()));
    if (async) {
      Work first = rk() % 2 == 0 ? idist::isend(out, next) : idist::irecv(in, prev);
      Work second = rk() % 2 == 0 ? idist::irecv(in, prev) : idist::isend(out, next);
      second.wait();
      first.wait();
    } else if (rk() % 2 == 0) {
      idist::send(out, next);
      idist::recv(in, prev);
    } else {
      idist::recv(in, prev);
      idist::send(out, next);
    }
    EXPECT_TRUE(on_host(in).equal(payload(prev))) << (async ? "isend / irecv" : "send / recv");
  }
}

}  // namespace
}  // namespace idist::gpu_test

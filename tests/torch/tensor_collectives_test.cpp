// Tensor collectives of the LibTorch layer: dtype mapping, all_reduce / all_gather / broadcast /
// all_gather_tensors_with_shapes at any world size (ignite's test cases as the floor), staging of
// non-contiguous tensors, and the errors.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "idist/idist.hpp"
#include "torch/comm/staging.hpp"  // internal: idist_torch

namespace {

using idist::ValueError;

int ws() { return idist::get_world_size(); }
int rank() { return idist::get_rank(); }

// Runs `fn` and returns the message of the idist::ValueError it throws ("" when it does not).
template <class Fn>
std::string value_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

TEST(TorchDType, MapsEveryScalarTypeBothWays) {
  const std::vector<std::pair<c10::ScalarType, idist::DType>> cases = {
      {torch::kBool, idist::DType::Bool},     {torch::kByte, idist::DType::UInt8},
      {torch::kChar, idist::DType::Int8},     {torch::kShort, idist::DType::Int16},
      {torch::kInt, idist::DType::Int32},     {torch::kLong, idist::DType::Int64},
      {torch::kHalf, idist::DType::Float16},  {torch::kBFloat16, idist::DType::BFloat16},
      {torch::kFloat, idist::DType::Float32}, {torch::kDouble, idist::DType::Float64}};
  for (auto [st, dt] : cases) {
    EXPECT_EQ(idist::to_dtype(st), dt) << c10::toString(st);
    EXPECT_EQ(idist::to_scalar_type(dt), st) << idist::to_string(dt);
    EXPECT_EQ(idist::dtype_size(dt), c10::elementSize(st)) << c10::toString(st);
  }
  EXPECT_EQ(idist::dtype_of<c10::Half>, idist::DType::Float16);
  EXPECT_EQ(idist::dtype_of<c10::BFloat16>, idist::DType::BFloat16);
}

TEST(TorchDType, UnsupportedScalarTypeNamesIt) {
  for (auto st : {torch::kComplexFloat, torch::kComplexDouble, torch::kQInt8}) {
    const std::string msg = value_error_of([&] { idist::to_dtype(st); });
    EXPECT_NE(msg.find(c10::toString(st)), std::string::npos) << msg;
  }
  const std::string msg = value_error_of([] { idist::all_reduce(torch::zeros({2}, torch::kComplexFloat)); });
  EXPECT_NE(msg.find("ComplexFloat"), std::string::npos) << msg;
}

TEST(TorchDevice, ConvertsToTorchDevice) {
  torch::Device d = idist::device();
  EXPECT_EQ(d.str(), idist::device().str());
  // The CPU backends' tests hide GPUs; on nccl the device is this rank's GPU.
  EXPECT_EQ(d.is_cuda(), idist::backend() == std::string("nccl"));
  torch::Device cuda1 = idist::Device{idist::DeviceType::CUDA, 1};
  EXPECT_TRUE(cuda1.is_cuda());
  EXPECT_EQ(cuda1.index(), 1);
  EXPECT_EQ(idist::to_idist_device(cuda1), (idist::Device{idist::DeviceType::CUDA, 1}));
  EXPECT_EQ(idist::to_idist_device(torch::Device(torch::kCPU)), idist::Device{});
  // A tensor moves with it, as with ignite's idist.device().
  auto t = torch::ones({2}).to(idist::device());
  EXPECT_EQ(t.device(), d);
}

TEST(TorchStaging, NonContiguousTensorIsStagedAndWrittenBack) {
  auto base = torch::arange(12, torch::kFloat).reshape({3, 4});
  auto view = base.t();  // not contiguous
  ASSERT_FALSE(view.is_contiguous());
  auto staged = idist::detail::stage(view, torch::Device(torch::kCPU));
  ASSERT_TRUE(staged.copied);
  ASSERT_TRUE(staged.buffer.is_contiguous());
  EXPECT_TRUE(staged.buffer.equal(view));
  staged.buffer.mul_(-1);  // what a collective would write
  idist::Work done;        // already completed: the write-back runs at once
  idist::detail::finish_into(done, view, staged);
  EXPECT_TRUE(base.equal(-torch::arange(12, torch::kFloat).reshape({3, 4})));

  auto contiguous = torch::arange(6, torch::kFloat);
  auto direct = idist::detail::stage(contiguous, torch::Device(torch::kCPU));
  EXPECT_FALSE(direct.copied);
  EXPECT_EQ(direct.buffer.data_ptr(), contiguous.data_ptr());
}

// ignite: all_reduce of 2 * rank + 1 under each op.
TEST(TorchAllReduce, EveryOpOnLongTensor) {
  const std::vector<std::pair<std::string, idist::ReduceOp>> ops = {
      {"SUM", idist::ReduceOp::Sum}, {"PRODUCT", idist::ReduceOp::Product}, {"MIN", idist::ReduceOp::Min},
      {"MAX", idist::ReduceOp::Max}, {"AND", idist::ReduceOp::And},         {"OR", idist::ReduceOp::Or}};
  for (const auto& [name, op] : ops) {
    std::int64_t expected = 1;  // 2 * 0 + 1
    for (int r = 1; r < ws(); ++r) {
      const std::int64_t v = 2 * r + 1;
      switch (op) {
        case idist::ReduceOp::Sum: expected += v; break;
        case idist::ReduceOp::Product: expected *= v; break;
        case idist::ReduceOp::Min: expected = std::min(expected, v); break;
        case idist::ReduceOp::Max: expected = std::max(expected, v); break;
        case idist::ReduceOp::And: expected &= v; break;
        case idist::ReduceOp::Or: expected |= v; break;
      }
    }
    auto t = torch::full({3}, 2 * rank() + 1, torch::kLong);
    auto out = idist::all_reduce(t, op);
    EXPECT_TRUE(out.is_same(t)) << name;
    EXPECT_TRUE(t.eq(expected).all().item<bool>()) << name << ": " << t;
    auto s = torch::full({2, 2}, 2 * rank() + 1, torch::kLong);
    idist::all_reduce(s, name);
    EXPECT_TRUE(s.eq(expected).all().item<bool>()) << name;
  }
  EXPECT_NE(value_error_of([] { idist::all_reduce(torch::ones({1}), "ABC"); }).find("ABC"), std::string::npos);
}

TEST(TorchAllReduce, SumOverEveryDType) {
  const int sum = ws() * (ws() + 1) / 2;  // of rank + 1
  for (auto st : {torch::kByte, torch::kChar, torch::kShort, torch::kInt, torch::kLong, torch::kHalf, torch::kBFloat16,
                  torch::kFloat, torch::kDouble}) {
    auto t = torch::full({5}, rank() + 1, st);
    idist::all_reduce(t);
    EXPECT_TRUE(t.to(torch::kDouble).eq(sum).all().item<bool>()) << c10::toString(st) << ": " << t;
  }
  // bool: Sum acts as Or, And as And.
  auto any = torch::full({2}, rank() == ws() - 1, torch::kBool);
  idist::all_reduce(any, idist::ReduceOp::Sum);
  EXPECT_TRUE(any.all().item<bool>());
  auto all = torch::full({2}, rank() == 0, torch::kBool);
  idist::all_reduce(all, idist::ReduceOp::And);
  EXPECT_EQ(all.all().item<bool>(), ws() == 1);
}

TEST(TorchAllReduce, NonContiguousInPlace) {
  // Column 1 and 3 of a (3, 4) matrix: a strided view; the other columns must stay untouched.
  auto base = torch::arange(12, torch::kDouble).reshape({3, 4}) + 100 * rank();
  auto view = base.slice(/*dim=*/1, 1, 4, 2);
  ASSERT_FALSE(view.is_contiguous());
  idist::all_reduce(view);
  auto plain = torch::arange(12, torch::kDouble).reshape({3, 4});
  const double rank_sum = 100.0 * ws() * (ws() - 1) / 2;
  EXPECT_TRUE(view.equal(plain.slice(1, 1, 4, 2) * ws() + rank_sum)) << view;
  EXPECT_TRUE(base.slice(1, 0, 4, 2).equal(plain.slice(1, 0, 4, 2) + 100 * rank()));

  auto transposed = (torch::arange(6, torch::kFloat).reshape({2, 3}) * (rank() + 1)).t();
  idist::all_reduce(transposed, idist::ReduceOp::Max);
  EXPECT_TRUE(transposed.equal((torch::arange(6, torch::kFloat).reshape({2, 3}) * ws()).t()));
}

TEST(TorchAllReduce, AsyncKeepsTensorAndCopiesBack) {
  auto base = torch::ones({4, 4}, torch::kFloat) * (rank() + 1);
  idist::Work w = idist::all_reduce_async(base.t(), idist::ReduceOp::Sum);  // temporary view
  w.wait();
  EXPECT_TRUE(base.eq(float(ws() * (ws() + 1) / 2)).all().item<bool>()) << base;
  EXPECT_TRUE(w.is_completed());
}

TEST(TorchAllReduce, BadInputs) {
  EXPECT_NE(value_error_of([] { idist::all_reduce(torch::Tensor()); }).find("undefined"), std::string::npos);
  EXPECT_NE(value_error_of([] { idist::all_reduce(torch::ones({2}), idist::ReduceOp::And); }).find("AND"),
            std::string::npos);
}

TEST(TorchAllGather, DifferentFirstDimensions) {
  // Rank r contributes r + 1 rows of 3 columns.
  auto mine = torch::arange(3 * (rank() + 1), torch::kFloat).reshape({rank() + 1, 3}) + 1000 * rank();
  auto out = idist::all_gather(mine);
  std::vector<torch::Tensor> parts;
  for (int r = 0; r < ws(); ++r)
    parts.push_back(torch::arange(3 * (r + 1), torch::kFloat).reshape({r + 1, 3}) + 1000 * r);
  EXPECT_TRUE(out.equal(torch::cat(parts))) << out;

  // Equal shapes, non-contiguous input.
  auto t = (torch::arange(6, torch::kLong).reshape({3, 2}) + 10 * rank()).t();
  auto equal = idist::all_gather(t);
  ASSERT_EQ(equal.sizes(), (std::vector<std::int64_t>{2 * ws(), 3}));
  for (int r = 0; r < ws(); ++r)
    EXPECT_TRUE(equal.slice(0, 2 * r, 2 * r + 2).equal((torch::arange(6, torch::kLong).reshape({3, 2}) + 10 * r).t()));

  // A rank may contribute no rows.
  auto maybe_empty = torch::full({rank() % 2, 2}, rank(), torch::kInt);
  auto gathered = idist::all_gather(maybe_empty);
  EXPECT_EQ(gathered.size(0), ws() / 2);
}

TEST(TorchAllGather, ZeroDimTensorGivesOnePerRank) {
  auto out = idist::all_gather(torch::tensor(rank() * 2.5));
  EXPECT_TRUE(out.equal(torch::arange(ws(), torch::kDouble) * 2.5)) << out;
}

TEST(TorchAllGather, MismatchedTrailingDimsRaiseEverywhere) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  auto t = torch::zeros({2, 3 + rank() % 2});
  const std::string msg = value_error_of([&] { idist::all_gather(t); });
  EXPECT_NE(msg.find("same dtype and the same sizes"), std::string::npos) << msg;
  auto u = torch::zeros({2}, rank() == 0 ? torch::kFloat : torch::kDouble);
  EXPECT_NE(value_error_of([&] { idist::all_gather(u); }), "");
}

TEST(TorchAllGather, GroupWithoutRankZero) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<int> ranks(std::size_t(ws() - 1));
  std::iota(ranks.begin(), ranks.end(), 1);
  auto t = torch::full({1, 2}, rank(), torch::kLong);
  auto out = idist::all_gather(t, ranks);
  if (rank() == 0) {
    EXPECT_TRUE(out.equal(t));
  } else {
    EXPECT_TRUE(out.select(1, 0).equal(torch::arange(1, ws(), torch::kLong))) << out;
  }
  auto r = torch::full({2}, rank() + 1, torch::kInt);
  idist::all_reduce(r, idist::ReduceOp::Sum, ranks);
  EXPECT_EQ(r[0].item<int>(), rank() == 0 ? 1 : ws() * (ws() + 1) / 2 - 1);
}

TEST(TorchAllGather, AsyncIntoPreallocatedOutput) {
  auto in = torch::full({2, 2}, rank(), torch::kFloat);
  auto out = torch::empty({2 * ws(), 2});
  idist::all_gather_async(in, out).wait();
  for (int r = 0; r < ws(); ++r) EXPECT_TRUE(out.slice(0, 2 * r, 2 * r + 2).eq(float(r)).all().item<bool>());
  EXPECT_NE(value_error_of([&] { idist::all_gather_async(in, torch::empty({3})); }).find("elements"),
            std::string::npos);
}

// A non-contiguous input and output: both staged, the output written back when the Work is waited for.
TEST(TorchAllGather, AsyncStagesNonContiguousInputAndOutput) {
  auto in_base = torch::full({2, 3}, rank(), torch::kFloat);
  in_base.select(1, 1).fill_(-1);
  const auto in = in_base.t();  // [3, 2], not contiguous
  auto out_base = torch::zeros({2, 3 * ws()});
  const auto out = out_base.t();  // [3 * ws, 2], not contiguous: written through the view
  ASSERT_FALSE(in.is_contiguous());
  ASSERT_FALSE(out.is_contiguous());
  idist::all_gather_async(in, out).wait();
  for (int r = 0; r < ws(); ++r) {
    const auto block = out_base.slice(1, 3 * r, 3 * r + 3);  // rank r's [2, 3] transposed back
    EXPECT_TRUE(block.select(1, 0).eq(float(r)).all().item<bool>()) << block;
    EXPECT_TRUE(block.select(1, 1).eq(-1.0f).all().item<bool>()) << block;
    EXPECT_TRUE(block.select(1, 2).eq(float(r)).all().item<bool>()) << block;
  }
}

// ignite's _test_distrib_broadcast, tensor cases, from every source rank.
TEST(TorchBroadcast, FromEverySourceWithAndWithoutSafeMode) {
  const std::vector<torch::Tensor> sources = {torch::tensor({1.2345, 2.3456}, torch::kFloat),
                                              torch::arange(100, torch::kLong).reshape({4, 25}) * 2, torch::tensor(12),
                                              torch::tensor({true, false, true})};
  for (const auto& data : sources) {
    for (int src = 0; src < ws(); ++src) {
      // Without safe mode: a placeholder of the same shape and dtype, filled in place.
      auto mine = rank() == src ? data.clone() : torch::empty_like(data);
      auto res = idist::broadcast(mine, src);
      EXPECT_TRUE(res.is_same(mine));
      EXPECT_TRUE(res.equal(data)) << res << " vs " << data;
      // Safe mode: others pass nothing and receive the source's shape and dtype.
      auto safe = idist::broadcast(rank() == src ? data.clone() : torch::Tensor(), src, /*safe_mode=*/true);
      ASSERT_TRUE(safe.defined());
      EXPECT_EQ(safe.scalar_type(), data.scalar_type());
      EXPECT_TRUE(safe.equal(data)) << safe;
      // Safe mode with a placeholder of another shape / dtype: replaced.
      auto other = idist::broadcast(rank() == src ? data.clone() : torch::zeros({7}, torch::kInt), src, true);
      EXPECT_TRUE(other.equal(data));
    }
  }
}

TEST(TorchBroadcast, NonContiguousTarget) {
  auto base = torch::full({4, 3}, -1.0);
  auto view = base.t();
  if (rank() == 0) view.copy_(torch::arange(12, torch::kDouble).reshape({3, 4}));
  idist::broadcast(view, 0);
  EXPECT_TRUE(base.t().equal(torch::arange(12, torch::kDouble).reshape({3, 4})));
}

TEST(TorchBroadcast, Errors) {
  // ignite: "Source data can not be None" on the source, "safe_mode should be True" elsewhere;
  // raised before any communication.
  const std::string msg = value_error_of([] { idist::broadcast(torch::Tensor(), 0); });
  if (rank() == 0)
    EXPECT_NE(msg.find("source data can not be"), std::string::npos) << msg;
  else
    EXPECT_NE(msg.find("safe_mode should be true"), std::string::npos) << msg;
  // Safe mode: an undefined tensor on the source raises on every rank.
  const std::string safe = value_error_of([] { idist::broadcast(torch::Tensor(), ws() - 1, true); });
  EXPECT_NE(safe.find("source data can not be"), std::string::npos) << safe;
  // Safe mode: an unsupported dtype on the source raises on every rank.
  const std::string complex = value_error_of(
      [] { idist::broadcast(rank() == 0 ? torch::zeros({2}, torch::kComplexFloat) : torch::Tensor(), 0, true); });
  EXPECT_NE(complex.find("ComplexFloat"), std::string::npos) << complex;
  EXPECT_NE(value_error_of([] { idist::broadcast(torch::ones({1}), ws()); }).find("src"), std::string::npos);
}

// ignite's _test_idist_all_gather_tensors_with_shapes.
TEST(TorchAllGatherWithShapes, IgniteCase) {
  torch::manual_seed(41);
  const int n = ws();
  auto reference = torch::randn({n * 5, n * 5, n * 5});
  auto piece = [&](int r) {
    return reference.slice(0, r * (r + 1) / 2, r * (r + 1) / 2 + r + 1)
        .slice(1, r * (r + 3) / 2, r * (r + 3) / 2 + r + 2)
        .slice(2, r * (r + 5) / 2, r * (r + 5) / 2 + r + 3);
  };
  std::vector<std::vector<std::int64_t>> shapes;
  for (int r = 0; r < n; ++r) shapes.push_back({r + 1, r + 2, r + 3});
  auto tensors = idist::all_gather_tensors_with_shapes(piece(rank()), shapes);
  ASSERT_EQ(int(tensors.size()), n);
  for (int r = 0; r < n; ++r) EXPECT_TRUE(tensors[std::size_t(r)].allclose(piece(r))) << "rank " << r;
}

// ignite's _test_idist_all_gather_tensors_with_shapes_group.
TEST(TorchAllGatherWithShapes, GroupWithoutRankZero) {
  if (ws() < 2) GTEST_SKIP() << "needs two ranks";
  torch::manual_seed(41);
  const int n = ws();
  std::vector<int> ranks(std::size_t(n - 1));
  std::iota(ranks.begin(), ranks.end(), 1);
  auto reference = torch::randn({n * 5, n * 5, n * 5});
  auto piece = [&](int r) {
    return reference.slice(0, r * (r + 1) / 2, r * (r + 1) / 2 + r + 1)
        .slice(1, r * (r + 3) / 2, r * (r + 3) / 2 + r + 2)
        .slice(2, r * (r + 5) / 2, r * (r + 5) / 2 + r + 3);
  };
  std::vector<std::vector<std::int64_t>> shapes;
  for (int r : ranks) shapes.push_back({r + 1, r + 2, r + 3});
  auto mine = rank() == 0 ? torch::tensor({rank()}) : piece(rank());
  auto tensors = idist::all_gather_tensors_with_shapes(mine, shapes, ranks);
  if (rank() == 0) {
    ASSERT_EQ(tensors.size(), 1u);
    EXPECT_TRUE(tensors[0].is_same(mine));
  } else {
    ASSERT_EQ(tensors.size(), ranks.size());
    for (std::size_t i = 0; i < ranks.size(); ++i) EXPECT_TRUE(tensors[i].allclose(piece(ranks[i])));
  }
}

TEST(TorchAllGatherWithShapes, IntegerAndNonContiguousPieces) {
  // Rank r: an int tensor of shape (2, r + 1), given as a transposed view.
  auto mine = (torch::arange(2 * (rank() + 1), torch::kInt).reshape({rank() + 1, 2}) + 100 * rank()).t();
  std::vector<std::vector<std::int64_t>> shapes;
  for (int r = 0; r < ws(); ++r) shapes.push_back({2, r + 1});
  auto tensors = idist::all_gather_tensors_with_shapes(mine, shapes);
  for (int r = 0; r < ws(); ++r)
    EXPECT_TRUE(
        tensors[std::size_t(r)].equal((torch::arange(2 * (r + 1), torch::kInt).reshape({r + 1, 2}) + 100 * r).t()));
}

TEST(TorchAllGatherWithShapes, BadArgumentsRaiseOnEveryRank) {
  auto t = torch::zeros({2, 2});
  std::vector<std::vector<std::int64_t>> too_few(std::size_t(ws() + 1), {2, 2});
  EXPECT_NE(value_error_of([&] { idist::all_gather_tensors_with_shapes(t, too_few); }).find("shapes has"),
            std::string::npos);
  // Only the last rank's own entry is wrong: it names the problem, the others name that rank.
  std::vector<std::vector<std::int64_t>> shapes(std::size_t(ws()), {2, 2});
  shapes.back() = {2, 3};
  const std::string msg = value_error_of([&] { idist::all_gather_tensors_with_shapes(t, shapes); });
  if (rank() == ws() - 1)
    EXPECT_NE(msg.find("differs from shapes"), std::string::npos) << msg;
  else
    EXPECT_NE(msg.find("group rank " + std::to_string(ws() - 1)), std::string::npos) << msg;
}

}  // namespace

// Communication hooks of auto_model (register_comm_hook, idist::comm_hooks): every rank trains on
// its own data, and the gradients after backward are compared with the exact average of the ranks'
// local gradients (computed on an unhooked copy and all-reduced here).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "average_reference.hpp"
#include "idist/idist.hpp"

namespace {

// A 1-D bias and 2-D weights of several shapes: compressible matrices and uncompressed vectors.
struct Net : torch::nn::Module {
  Net() {
    fc1 = register_module("fc1", torch::nn::Linear(32, 48));
    fc2 = register_module("fc2", torch::nn::Linear(48, 40));
    fc3 = register_module("fc3", torch::nn::Linear(40, 3));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc3(torch::tanh(fc2(torch::tanh(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};

std::shared_ptr<Net> make_net() {
  torch::manual_seed(7);  // the same parameters on every rank
  return std::make_shared<Net>();
}

// This rank's batch: different on every rank and every step.
torch::Tensor batch_of(int step) {
  torch::manual_seed(1000 + 17 * idist::get_rank() + step);
  return torch::randn({64, 32}).to(idist::device());  // 64 samples: the summed gradients have full rank
}

torch::Tensor loss_of(Net& net, const torch::Tensor& x) { return net.forward(x).pow(2).mean(); }

std::vector<torch::Tensor> averaged_reference(const Net& like, const torch::Tensor& x) {
  return idist_test::averaged_reference(like, [&](Net& n) { return loss_of(n, x); });
}

double max_relative_error(const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, ((got[i] - want[i]).abs().max() / (want[i].abs().max() + 1e-12)).item<double>());
  return worst;
}

std::vector<torch::Tensor> grads_of(const Net& net) {
  std::vector<torch::Tensor> out;
  for (const auto& p : net.parameters()) out.push_back(p.grad().clone());
  return out;
}

// One hooked backward on `net` (prepared by auto_model) against the exact average.
double hooked_step_error(const std::shared_ptr<Net>& net, int step) {
  const torch::Tensor x = batch_of(step);
  const auto want = averaged_reference(*net, x);
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  loss_of(*net, x).backward();
  return max_relative_error(grads_of(*net), want);
}

// The result must be the same on every rank (same collectives, same arithmetic).
void expect_same_on_all_ranks(const Net& net) {
  for (const auto& p : net.parameters()) {
    torch::Tensor g = p.grad().clone();
    torch::Tensor max = g.clone(), min = g.clone();
    idist::all_reduce(max, idist::ReduceOp::Max);
    idist::all_reduce(min, idist::ReduceOp::Min);
    EXPECT_TRUE(torch::equal(max, min)) << "gradients differ between ranks";
  }
}

TEST(CommHook, AllreduceHookEqualsTheDefault) {
  auto net = idist::auto_model(make_net());
  idist::register_comm_hook(net, idist::comm_hooks::allreduce());
  for (int step = 0; step < 3; ++step) EXPECT_LT(hooked_step_error(net, step), 1e-5) << "step " << step;
  if (idist::get_world_size() > 1) expect_same_on_all_ranks(*net);
}

TEST(CommHook, RegisteredAllreduceIsTheDefaultBitForBit) {
  // comm_hooks::allreduce() is auto_model's default hook: registering it changes no bit. A fixed cap
  // keeps the bucket tuning, which times the steps, from giving the two models different layouts.
  auto plain = idist::auto_model(make_net(), {.bucket_cap_mb = 25.0});
  auto hooked = idist::auto_model(make_net(), {.bucket_cap_mb = 25.0});
  idist::register_comm_hook(hooked, idist::comm_hooks::allreduce());
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor x = batch_of(step);
    plain->zero_grad();
    hooked->zero_grad();
    loss_of(*plain, x).backward();
    loss_of(*hooked, x).backward();
    const auto want = grads_of(*plain), got = grads_of(*hooked);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(torch::equal(got[i], want[i])) << "step " << step << ", parameter " << i;
  }
}

TEST(CommHook, AHookMayYieldANewTensorAsItsWorksValue) {
  // The average is computed into a tensor of its own, which the reducer copies into the bucket.
  auto net = idist::auto_model(make_net());
  idist::register_comm_hook(net, [](idist::GradBucket& b) {
    torch::Tensor sum = b.buffer().clone();
    return idist::all_reduce_async(sum).then([sum] { return sum / idist::get_world_size(); });
  });
  for (int step = 0; step < 2; ++step) EXPECT_LT(hooked_step_error(net, step), 1e-5) << "step " << step;
}

TEST(CommHook, Fp16AndBf16CompressAverageWithinTheirPrecision) {
  struct Case {
    const char* name;
    idist::CommHook hook;
    double tolerance;  // relative to the largest gradient: 11 and 8 significant bits
  };
  for (auto& c : {Case{"fp16", idist::comm_hooks::fp16_compress(), 2e-3},
                  Case{"bf16", idist::comm_hooks::bf16_compress(), 2e-2}}) {
    auto net = idist::auto_model(make_net());
    idist::register_comm_hook(net, c.hook);
    for (int step = 0; step < 2; ++step) {
      const double err = hooked_step_error(net, step);
      EXPECT_LT(err, c.tolerance) << c.name << " step " << step;
      if (idist::get_world_size() > 1) EXPECT_GT(err, 0.0) << c.name << ": no rounding at all is suspicious";
    }
    if (idist::get_world_size() > 1) expect_same_on_all_ranks(*net);
  }
}

TEST(CommHook, PowerSgdIsPlainAllReduceBeforeItsStart) {
  auto net = idist::auto_model(make_net());
  idist::register_comm_hook(net,
                            idist::comm_hooks::powersgd({.matrix_approximation_rank = 1, .start_powersgd_iter = 3}));
  for (int step = 0; step < 3; ++step) EXPECT_LT(hooked_step_error(net, step), 1e-5) << "step " << step;
}

TEST(CommHook, PowerSgdAtFullRankIsExact) {
  // Rank >= min(n, m) and every matrix compressed: P spans the column space of the summed
  // gradient (of full rank: more samples than rows or columns), so P Q^T / world size is the exact
  // average up to float32 rounding. Error feedback then carries nothing from step to step.
  auto net = idist::auto_model(make_net());
  idist::register_comm_hook(
      net, idist::comm_hooks::powersgd(
               {.matrix_approximation_rank = 48, .start_powersgd_iter = 2, .min_compression_rate = 0.0}));
  // Classical Gram-Schmidt over 40 columns in float32 loses about 3 digits; rank 2 errs by 50-90 %.
  for (int step = 0; step < 5; ++step) EXPECT_LT(hooked_step_error(net, step), 1e-2) << "step " << step;
  if (idist::get_world_size() > 1) expect_same_on_all_ranks(*net);
}

TEST(CommHook, PowerSgdLowRankCompressesMatricesAndAveragesVectorsExactly) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks";
  auto net = idist::auto_model(make_net());
  idist::register_comm_hook(
      net, idist::comm_hooks::powersgd(
               {.matrix_approximation_rank = 2, .start_powersgd_iter = 2, .use_error_feedback = false}));
  for (int step = 0; step < 2; ++step) hooked_step_error(net, step);  // the plain iterations
  const torch::Tensor x = batch_of(9);
  const auto want = averaged_reference(*net, x);
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
  loss_of(*net, x).backward();
  const auto params = net->named_parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor g = params[i].value().grad();
    const bool compressed = g.dim() == 2 && double(g.size(0) + g.size(1)) * 2 * 2 < double(g.numel());
    if (compressed) {  // fc1 and fc2 weights at rank 2 (min_compression_rate 2)
      const torch::Tensor s = torch::linalg_svdvals(g.to(torch::kDouble));
      EXPECT_LT(s[2].item<double>(), 1e-4 * s[0].item<double>()) << params[i].key() << " is not of rank 2";
      EXPECT_FALSE(torch::allclose(g, want[i], 1e-3, 1e-6)) << params[i].key() << ": rank 2 cannot be exact here";
    } else {  // biases and the 3 x 40 fc3 weight travel uncompressed
      EXPECT_TRUE(torch::allclose(g, want[i], 1e-4, 1e-6)) << params[i].key();
    }
  }
  expect_same_on_all_ranks(*net);
}

TEST(CommHook, PowerSgdTrainsLikeAllReduce) {
  // Fit a fixed linear map: with error feedback, PowerSGD at rank 2 reaches a loss close to plain
  // all-reduce after the same number of SGD steps.
  auto train = [](idist::CommHook hook) {
    auto net = idist::auto_model(make_net());
    idist::register_comm_hook(net, std::move(hook));
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05));
    torch::manual_seed(3);
    const torch::Tensor target_map = torch::randn({32, 3}).to(idist::device());
    double loss = 0;
    for (int step = 0; step < 60; ++step) {
      const torch::Tensor x = batch_of(step);
      opt.zero_grad();
      torch::Tensor l = (net->forward(x) - x.matmul(target_map)).pow(2).mean();
      l.backward();
      opt.step();
      loss = l.item<double>();
    }
    return loss;
  };
  const double plain = train(idist::comm_hooks::allreduce());
  const double compressed =
      train(idist::comm_hooks::powersgd({.matrix_approximation_rank = 2, .start_powersgd_iter = 5}));
  EXPECT_LT(compressed, 1.5 * plain + 0.05) << "allreduce " << plain << ", powersgd " << compressed;
}

TEST(CommHook, BadHooksAndOptionsAreRefused) {
  auto net = idist::auto_model(make_net());
  EXPECT_THROW(idist::register_comm_hook(net, idist::CommHook{}), idist::ValueError);
  EXPECT_THROW(idist::comm_hooks::powersgd({.matrix_approximation_rank = 0}), idist::ValueError);
  EXPECT_THROW(idist::comm_hooks::powersgd({.start_powersgd_iter = 1}), idist::ValueError);
  EXPECT_NO_THROW(
      idist::comm_hooks::powersgd({.start_powersgd_iter = 0, .use_error_feedback = false, .warm_start = false}));
  if (idist::get_world_size() < 2) {
    // Serial: no reducer, nothing to hook; the call is accepted so that the program runs unchanged.
    EXPECT_NO_THROW(idist::register_comm_hook(net, idist::comm_hooks::allreduce()));
    return;
  }
  idist::register_comm_hook(net, idist::comm_hooks::allreduce());
  try {
    idist::register_comm_hook(net, idist::comm_hooks::allreduce());
    ADD_FAILURE() << "a second hook was accepted";
  } catch (const idist::ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("only once"), std::string::npos) << e.what();
  }
  // A hook returning a tensor of the wrong size fails the backward with the bucket named.
  auto other = idist::auto_model(make_net());
  idist::register_comm_hook(other, [](idist::GradBucket& b) {
    return idist::Work::ready(torch::zeros({b.buffer().numel() + 1}, b.buffer().options()));
  });
  try {
    loss_of(*other, batch_of(0)).backward();
    ADD_FAILURE() << "a hook's wrong-sized result was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("elements (the bucket's buffer)"), std::string::npos) << e.what();
  }
}

TEST(CommHook, GradBucketDescribesItsParameters) {
  if (idist::get_world_size() < 2) GTEST_SKIP() << "needs 2 or more ranks (no buckets when serial)";
  auto net = idist::auto_model(make_net());
  std::vector<std::size_t> seen_indices;
  std::vector<bool> seen_last;
  std::int64_t params_seen = 0;
  idist::register_comm_hook(net, [&](idist::GradBucket& b) {
    seen_indices.push_back(b.index());
    seen_last.push_back(b.is_last());
    const auto grads = b.gradients();
    EXPECT_EQ(grads.size(), b.parameters().size());
    for (std::size_t i = 0; i < grads.size(); ++i) {
      EXPECT_EQ(grads[i].sizes(), b.parameters()[i].sizes());
      EXPECT_EQ(grads[i].data_ptr<float>(), b.buffer().data_ptr<float>() + b.offsets()[i]);
    }
    params_seen += std::int64_t(grads.size());
    return idist::comm_hooks::allreduce()(b);
  });
  loss_of(*net, batch_of(0)).backward();
  ASSERT_FALSE(seen_indices.empty());
  for (std::size_t k = 0; k < seen_indices.size(); ++k) EXPECT_EQ(seen_indices[k], k);
  EXPECT_TRUE(seen_last.back());
  EXPECT_EQ(params_seen, std::int64_t(net->parameters().size()));
}

}  // namespace

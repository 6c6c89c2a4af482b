#include "metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <idist/idist.hpp>

namespace fashion_mnist {

double Totals::mean_loss() const { return count > 0 ? loss_sum / count : NAN; }
double Totals::accuracy() const { return count > 0 ? correct / count : NAN; }

Totals step_totals(const torch::Tensor& loss, const torch::Tensor& logits, const torch::Tensor& target) {
  const auto n = double(target.size(0));
  return {loss.item<double>() * n, double(logits.argmax(1).eq(target).sum().item<std::int64_t>()), n};
}

std::pair<Totals, LinePlan> reduce_totals(const Totals& local, const LinePlan& plan) {
  const bool root = idist::get_rank() == 0;
  // The plan is non-zero on rank 0 only, so the sums are rank 0's plan (steps are exact in a double).
  std::array<double, 5> v{local.loss_sum, local.correct, local.count, root && plan.print ? 1.0 : 0.0,
                          root ? double(plan.next_step) : 0.0};
  idist::all_reduce(std::span<double>(v));
  return {Totals{v[0], v[1], v[2]}, LinePlan{v[3] > 0, std::int64_t(v[4])}};
}

std::string weights_digest(const torch::nn::Module& model) {
  std::uint64_t h = 14695981039346656037ull;
  const auto add = [&h](const torch::Tensor& p) {
    const torch::Tensor t = p.detach().to(torch::kCPU).contiguous();
    const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
    for (std::size_t i = 0; i < t.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  };
  for (const auto& p : model.parameters()) add(p);
  for (const auto& b : model.buffers()) add(b);
  return fmt::format("{:016x}", h);
}

std::string agreed_weights_digest(const torch::nn::Module& model) {
  const std::string mine = weights_digest(model);
  const std::vector<std::string> all = idist::all_gather(std::string_view(mine));
  if (std::all_of(all.begin(), all.end(), [&](const std::string& d) { return d == all.front(); })) return mine;
  std::string list;
  for (std::size_t r = 0; r < all.size(); ++r) list += fmt::format("{}rank {}: {}", r ? ", " : "", r, all[r]);
  throw idist::Error(fmt::format("the ranks' weights differ after training ({})", list));
}

}  // namespace fashion_mnist

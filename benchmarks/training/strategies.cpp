#include "training/strategies.hpp"

#include <stdexcept>

#include <fmt/core.h>

#include "idist/idist.hpp"

namespace idist_bench {

namespace {
// Large enough that a rank training on its own data alone drifts visibly from synchronised ranks
// within a few steps (the loss check in main.cpp), small enough to stay stable.
constexpr double kLearningRate = 0.05;
}  // namespace

std::string Config::name() const {
  const std::string suffix = hook.empty() ? "" : "+" + hook;
  switch (strategy) {
    case Strategy::Local: return "local";
    case Strategy::AutoModel: return fmt::format("auto_model:{:g}{}", bucket_mb, suffix);
    case Strategy::AutoModelCopy: return fmt::format("auto_model_copy:{:g}{}", bucket_mb, suffix);
    case Strategy::StatusQuoIdist: return "status_quo_idist";
    case Strategy::StatusQuoRaw: return "status_quo_raw";
    case Strategy::NoSync: return "no_sync";
  }
  return "?";
}

Config parse_config(const std::string& full) {
  Config c;
  const std::size_t plus = full.find('+');
  const std::string text = full.substr(0, plus);
  if (plus != std::string::npos) {
    c.hook = full.substr(plus + 1);
    const bool powersgd = c.hook.rfind("powersgd", 0) == 0 && c.hook.size() > 8 &&
                          c.hook.find_first_not_of("0123456789", 8) == std::string::npos;
    if (!(c.hook == "allreduce" || c.hook == "fp16" || c.hook == "bf16" || powersgd) ||
        text.rfind("auto_model", 0) != 0)
      throw std::invalid_argument("config '" + full +
                                  "': a hook is auto_model[...]+allreduce, +fp16, +bf16 or "
                                  "+powersgd<rank>");
  }
  if (text == "local") {
    c.strategy = Strategy::Local;
  } else if (text == "auto_model" || text == "auto_model_copy") {
    c.strategy = text == "auto_model" ? Strategy::AutoModel : Strategy::AutoModelCopy;
  } else if (text.rfind("auto_model:", 0) == 0 || text.rfind("auto_model_copy:", 0) == 0) {
    c.strategy = text[10] == ':' ? Strategy::AutoModel : Strategy::AutoModelCopy;
    std::size_t used = 0;
    const std::string num = text.substr(text.find(':') + 1);
    try {
      c.bucket_mb = std::stod(num, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != num.size() || used == 0 || !(c.bucket_mb > 0))
      throw std::invalid_argument("config '" + text + "': expected " + text.substr(0, text.find(':')) +
                                  ":<positive bucket cap in MiB>");
  } else if (text == "status_quo_idist") {
    c.strategy = Strategy::StatusQuoIdist;
  } else if (text == "status_quo_raw") {
    c.strategy = Strategy::StatusQuoRaw;
  } else if (text == "no_sync") {
    c.strategy = Strategy::NoSync;
  } else {
    throw std::invalid_argument("unknown config '" + text +
                                "'; expected local, auto_model[:MiB], auto_model_copy[:MiB], status_quo_idist, "
                                "status_quo_raw or no_sync");
  }
  return c;
}

std::vector<Config> default_configs(bool distributed, const std::vector<double>& buckets_mb) {
  if (!distributed) return {Config{Strategy::Local}};
  std::vector<Config> out{{Strategy::StatusQuoIdist}, {Strategy::StatusQuoRaw}, {Strategy::NoSync}};
  for (double b : buckets_mb) out.push_back(Config{Strategy::AutoModel, b});
  out.push_back(Config{Strategy::AutoModelCopy, 25.0});  // DDP's default layout, for comparison
  return out;
}

Trainer::Trainer(const std::string& model, Config config, std::int64_t batch, std::uint64_t seed, RawBackend* raw)
    : config_(config), raw_(raw), world_(idist::get_world_size()) {
  if (config_.strategy == Strategy::StatusQuoRaw && !raw_)
    throw std::invalid_argument("status_quo_raw needs a raw backend (mpi or gloo)");
  w_ = make_workload(model, batch, seed, seed + 1000 + std::uint64_t(idist::get_rank()));
  grad_bytes_ = idist_bench::gradient_bytes(*w_.model);
  if (config_.strategy == Strategy::AutoModel || config_.strategy == Strategy::AutoModelCopy ||
      config_.strategy == Strategy::NoSync) {
    w_.model = idist::auto_model(
        w_.model, idist::AutoModelOptions{.bucket_cap_mb = config_.bucket_mb,
                                          .gradient_as_bucket_view = config_.strategy != Strategy::AutoModelCopy});
    if (config_.hook == "allreduce") idist::register_comm_hook(w_.model, idist::comm_hooks::allreduce());
    if (config_.hook == "fp16") idist::register_comm_hook(w_.model, idist::comm_hooks::fp16_compress());
    if (config_.hook == "bf16") idist::register_comm_hook(w_.model, idist::comm_hooks::bf16_compress());
    if (config_.hook.rfind("powersgd", 0) == 0)  // compressing from the third step (error feedback needs > 1)
      idist::register_comm_hook(
          w_.model, idist::comm_hooks::powersgd(
                        {.matrix_approximation_rank = std::stoi(config_.hook.substr(8)), .start_powersgd_iter = 2}));
    const std::vector<std::size_t> buckets = idist::gradient_bucket_bytes(w_.model);
    for (std::size_t b : buckets) bucket_bytes_ += b;
    buckets_ = buckets.size();
  } else if (config_.strategy != Strategy::Local && world_ > 1) {
    // The status quo starts from the same weights too (what users do by hand: broadcast once).
    for (auto& p : w_.model->parameters()) idist::broadcast(p.detach(), 0);
  }
  params_ = w_.model->parameters();
  opt_ = std::make_unique<torch::optim::SGD>(params_, torch::optim::SGDOptions(kLearningRate));
}

void Trainer::sync_status_quo() {
  for (auto& p : params_) {
    torch::Tensor g = p.grad();
    if (config_.strategy == Strategy::StatusQuoIdist)
      idist::all_reduce(g);
    else
      raw_->all_reduce_sum(g.data_ptr<float>(), std::size_t(g.numel()));
    g.div_(world_);
  }
}

void Trainer::step() {
  opt_->zero_grad();
  torch::Tensor out = w_.model->forward(w_.input);
  torch::Tensor loss = torch::nn::functional::cross_entropy(out, w_.target);
  if (config_.strategy == Strategy::NoSync) {
    auto guard = idist::no_sync(w_.model);
    loss.backward();
  } else {
    loss.backward();
  }
  if ((config_.strategy == Strategy::StatusQuoIdist || config_.strategy == Strategy::StatusQuoRaw) && world_ > 1)
    sync_status_quo();
  opt_->step();
  last_loss_ = loss.item<double>();
}

}  // namespace idist_bench
